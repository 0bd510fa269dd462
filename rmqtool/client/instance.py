"""`MQClientInstance`: one event loop, the channels to name servers and brokers, routes, periodic tasks.

The client runs asyncio on its own daemon thread; the public classes (`Producer`, `PushConsumer`,
...) are synchronous wrappers that submit coroutines to it, so plain scripts and threads can use
them, and several producers/consumers can share one instance (one set of sockets, one heartbeat).
Periods follow `MQClientInstance#startScheduledTask` (protocol.md §7.3); tests shorten them.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import logging
import os
import random
import re
import socket
import threading
import time
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass
from typing import Any, TypeVar

from rmqtool.client.exceptions import BrokerError, ClientError
from rmqtool.client.members import MQConsumerInner, MQProducerInner
from rmqtool.client.reply import RequestFutures
from rmqtool.client.route import MASTER_ID, TopicRouteData, broker_addr_table
from rmqtool.client.running_info import answer_running_info
from rmqtool.client.transaction_check import check_transaction_state
from rmqtool.errors import RemotingError
from rmqtool.remoting import fastjson
from rmqtool.remoting.bodies import HeartbeatData, ProducerData
from rmqtool.remoting.codes import RequestCode, ResponseCode
from rmqtool.remoting.command import RemotingCommand
from rmqtool.remoting.headers import (
    GetRouteInfoRequestHeader,
    NotifyConsumerIdsChangedRequestHeader,
    UnregisterClientRequestHeader,
)
from rmqtool.remoting.transport import Connection, connect

log = logging.getLogger("rmqtool.client")
T = TypeVar("T")


@dataclass
class ClientConfig:
    """`ClientConfig`: timings in seconds (Java's are in ms)."""

    poll_name_server_interval: float = 30.0
    heartbeat_broker_interval: float = 30.0
    persist_consumer_offset_interval: float = 5.0
    rebalance_interval: float = 20.0
    request_timeout: float = 3.0
    language: str = "PYTHON"


def namesrv_list(addr: str | None) -> list[str]:
    addr = addr if addr is not None else os.environ.get("NAMESRV_ADDR", "")
    addrs = [a.strip() for a in re.split(r"[;,\s]+", addr or "") if a.strip()]
    if not addrs:
        raise ClientError("no name server address: give --namesrv HOST:PORT or set NAMESRV_ADDR")
    return addrs


def local_ip_towards(addr: str) -> str:
    """The address this host uses to reach `addr` (what the Java client puts in its client id)."""
    host = addr.rpartition(":")[0].strip("[]") or "127.0.0.1"
    try:
        fam = socket.AF_INET6 if ":" in host else socket.AF_INET
        with socket.socket(fam, socket.SOCK_DGRAM) as s:
            s.connect((host, 9))
            return s.getsockname()[0]
    except OSError:
        return "127.0.0.1"


def resolve_instance(namesrv: str | None, instance: ClientInstance | None, config: ClientConfig | None,
                     instance_name: str | None = None) -> tuple[ClientInstance, bool]:
    """The caller's shared instance (not ours to shut down), or a new one we own (flag True).

    Without `instance_name` the new instance gets a process-unique name (changeInstanceNameToPID),
    so two clients of one process do not share a client id by accident.
    """
    if instance is not None:
        return instance, False
    name = instance_name if instance_name is not None else f"{os.getpid()}#{time.monotonic_ns()}"
    return ClientInstance(namesrv, instance_name=name, config=config), True


class ClientInstance:
    """Owns the loop thread, the connections and the route table shared by producers and consumers."""

    def __init__(self, namesrv_addr: str | None = None, *, instance_name: str | None = None,
                 client_ip: str | None = None, unit_name: str | None = None,
                 config: ClientConfig | None = None) -> None:
        self.namesrv_addrs = namesrv_list(namesrv_addr)
        self.config = config or ClientConfig()
        self.client_ip = client_ip or local_ip_towards(self.namesrv_addrs[0])
        # changeInstanceNameToPID: two processes on one host must not share a client id
        self.instance_name = instance_name or f"{os.getpid()}#{time.monotonic_ns()}"
        self.client_id = f"{self.client_ip}@{self.instance_name}" + (f"@{unit_name}" if unit_name else "")
        self.request_futures = RequestFutures()  # request(): correlation id -> the reply's future
        self.loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._conns: dict[str, Connection] = {}
        self._conn_locks: dict[str, asyncio.Lock] = {}
        self._namesrv_index = random.randrange(len(self.namesrv_addrs))
        self.routes: dict[str, TopicRouteData] = {}
        self.broker_addrs: dict[str, dict[int, str]] = {}
        # PullAPIWrapper.pullFromWhichNodeTable: (group, queue) -> the broker id the last pull
        # response suggested (suggestWhichBrokerId)
        self.pull_from_which_node: dict[tuple[str, Any], int] = {}
        self.broker_versions: dict[str, int] = {}
        self.producers: dict[str, MQProducerInner] = {}
        self.consumers: dict[str, MQConsumerInner] = {}
        self._tasks: list[asyncio.Task] = []
        self._users = 0
        self._lock = threading.Lock()

    # ---- loop thread -----------------------------------------------------------------------------
    def start(self) -> None:
        with self._lock:
            self._users += 1
            if self.loop is not None:
                return
            ready = threading.Event()

            def run() -> None:
                loop = asyncio.new_event_loop()
                asyncio.set_event_loop(loop)
                self.loop = loop
                ready.set()
                loop.run_forever()
                with contextlib.suppress(Exception):
                    loop.run_until_complete(loop.shutdown_asyncgens())
                loop.close()

            self._thread = threading.Thread(target=run, name=f"rmqtool-client-{self.instance_name}", daemon=True)
            self._thread.start()
            ready.wait()
        self.run(self._start_tasks())

    async def _start_tasks(self) -> None:
        c = self.config
        self._tasks = [
            asyncio.create_task(self._every(c.poll_name_server_interval, self.update_all_routes, 0.01)),
            asyncio.create_task(self._every(c.heartbeat_broker_interval, self.send_heartbeat_to_all_brokers, 1.0)),
            asyncio.create_task(self._every(c.persist_consumer_offset_interval, self._persist_all_offsets,
                                            c.persist_consumer_offset_interval)),
            asyncio.create_task(self._every(c.rebalance_interval, self._rebalance_all, c.rebalance_interval)),
        ]

    async def _every(self, period: float, fn: Callable[[], Awaitable[Any]], first: float) -> None:
        await asyncio.sleep(first)
        while True:
            try:
                await fn()
            except asyncio.CancelledError:
                raise
            except Exception as e:  # periodic work only logs, as in Java
                log.debug("periodic task %s failed: %s", getattr(fn, "__name__", fn), e)
            await asyncio.sleep(period)

    def in_loop(self) -> bool:
        return self._thread is threading.current_thread()

    def submit(self, coro: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
        if self.loop is None:
            coro.close()
            raise ClientError("client not started: call start() first")
        return asyncio.run_coroutine_threadsafe(coro, self.loop)

    def run(self, coro: Coroutine[Any, Any, T], timeout: float | None = None) -> T:
        """Run a coroutine on the client loop and wait for it (from any thread but the loop's own)."""
        if self.in_loop():
            coro.close()
            raise RuntimeError("blocking client call made on the client's own event loop; use the async API")
        return self.submit(coro).result(timeout)

    def shutdown(self) -> None:
        with self._lock:
            self._users -= 1
            if self._users > 0 or self.loop is None:
                return
            loop = self.loop
        with contextlib.suppress(Exception):
            self.run(self._close(), timeout=10)
        loop.call_soon_threadsafe(loop.stop)
        if self._thread is not None:
            self._thread.join(5)
        self.loop = None

    async def _close(self) -> None:
        for t in self._tasks:
            t.cancel()
        for t in self._tasks:
            with contextlib.suppress(BaseException):
                await t
        for conn in list(self._conns.values()):
            await conn.close()
        self._conns.clear()

    # ---- channels --------------------------------------------------------------------------------
    async def connection(self, addr: str) -> Connection:
        conn = self._conns.get(addr)
        if conn is not None and not conn.closed.is_set():
            return conn
        lock = self._conn_locks.setdefault(addr, asyncio.Lock())
        async with lock:
            conn = self._conns.get(addr)
            if conn is None or conn.closed.is_set():
                conn = await connect(addr, self._on_request, timeout=self.config.request_timeout)
                self._conns[addr] = conn
            return conn

    async def invoke(self, addr: str, cmd: RemotingCommand, timeout: float | None = None) -> RemotingCommand:
        cmd.language = self.config.language
        conn = await self.connection(addr)
        return await conn.request(cmd, timeout or self.config.request_timeout)

    async def invoke_oneway(self, addr: str, cmd: RemotingCommand) -> None:
        cmd.language = self.config.language
        conn = await self.connection(addr)
        await conn.oneway(cmd)

    async def invoke_namesrv(self, cmd: RemotingCommand, timeout: float | None = None) -> RemotingCommand:
        """Stick to one name server until it fails, then try the others (`NettyRemotingClient`)."""
        errors = []
        n = len(self.namesrv_addrs)
        for i in range(n):
            idx = (self._namesrv_index + i) % n
            addr = self.namesrv_addrs[idx]
            try:
                resp = await self.invoke(addr, cmd, timeout)
                self._namesrv_index = idx
                return resp
            except RemotingError as e:
                errors.append(str(e))
                cmd = RemotingCommand.request(cmd.code, dict(cmd.ext_fields), cmd.body)
        raise ClientError(f"no name server reachable at {';'.join(self.namesrv_addrs)}: {errors[-1]}")

    async def _on_request(self, cmd: RemotingCommand, conn: Connection) -> RemotingCommand | None:
        """Requests the broker sends us (`ClientRemotingProcessor`)."""
        if cmd.code == RequestCode.NOTIFY_CONSUMER_IDS_CHANGED:
            group = NotifyConsumerIdsChangedRequestHeader.from_ext(cmd.ext_fields).consumerGroup
            consumer = self.consumers.get(group)
            if consumer is not None:
                consumer.rebalance_soon()
            return None
        if cmd.code == RequestCode.CHECK_TRANSACTION_STATE:
            await check_transaction_state(self.producers, self.config.language, cmd, conn)
            return None
        if cmd.code == RequestCode.PUSH_REPLY_MESSAGE_TO_CLIENT:  # the reply to one of our request()s
            return self.request_futures.receive(cmd)
        if cmd.code == RequestCode.GET_CONSUMER_RUNNING_INFO:  # mqadmin consumerStatus, via the broker
            return answer_running_info(self, cmd)
        return cmd.response(ResponseCode.REQUEST_CODE_NOT_SUPPORTED,
                            remark=f" request type {cmd.code} not supported")

    # ---- routes ----------------------------------------------------------------------------------
    async def fetch_route(self, topic: str) -> TopicRouteData | None:
        """GET_ROUTEINFO_BY_TOPIC; None when the name server has no route (code 17)."""
        req = RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC,
                                      GetRouteInfoRequestHeader(topic, acceptStandardJsonOnly=True).to_ext())
        resp = await self.invoke_namesrv(req)
        if resp.code == ResponseCode.TOPIC_NOT_EXIST:
            return None
        if resp.code != ResponseCode.SUCCESS or not resp.body:
            raise BrokerError(resp.code, resp.remark, "name server")
        return TopicRouteData.decode(resp.body)

    async def update_route(self, topic: str) -> TopicRouteData | None:
        route = await self.fetch_route(topic)
        if route is not None:
            self.set_route(topic, route)
        return route

    def set_route(self, topic: str, route: TopicRouteData) -> None:
        self.routes[topic] = route
        new_broker = False
        for name, addrs in broker_addr_table(route).items():
            new_broker |= self.broker_addrs.get(name) != addrs
            self.broker_addrs[name] = addrs
        if new_broker and self.loop is not None and self.in_loop():
            # a broker we have not greeted yet: heartbeat now, so it can call us back (transaction
            # checks, consumer notifications) without waiting for the 30 s round
            self._tasks = [t for t in self._tasks if not t.done()]
            self._tasks.append(asyncio.ensure_future(self.send_heartbeat_to_all_brokers()))
        for p in self.producers.values():
            p.on_route(topic, route)
        for c in self.consumers.values():
            c.on_route(topic, route)

    async def update_all_routes(self) -> None:
        topics: set[str] = set()
        for p in self.producers.values():
            topics |= p.topics_in_use()
        for c in self.consumers.values():
            topics |= c.topics_in_use()
        for topic in topics:
            try:
                await self.update_route(topic)
            except RemotingError as e:
                log.debug("route refresh of %s failed: %s", topic, e)

    def master_addr(self, broker_name: str) -> str | None:
        return self.broker_addrs.get(broker_name, {}).get(MASTER_ID)

    def find_broker_address_in_subscribe(self, broker_name: str, broker_id: int,
                                         only_this_broker: bool) -> tuple[str, bool] | None:
        """`MQClientInstance.findBrokerAddressInSubscribe`: (address, is a slave) of `broker_id`, or
        for a slave id the next one, or (unless `only_this_broker`) any of the group, the lowest id
        first as Java's HashMap of small ids iterates; None when the group has no address."""
        addrs = self.broker_addrs.get(broker_name) or {}
        if not addrs:
            return None
        addr = addrs.get(broker_id)
        slave = broker_id != MASTER_ID
        if addr is None and slave:
            addr = addrs.get(broker_id + 1)
        if addr is None and not only_this_broker:
            first = min(addrs)
            addr, slave = addrs[first], first != MASTER_ID
        return (addr, slave) if addr is not None else None

    def any_addr(self, broker_name: str) -> str | None:
        addrs = self.broker_addrs.get(broker_name, {})
        return addrs.get(MASTER_ID) or next(iter(addrs.values()), None)

    # ---- heartbeat -------------------------------------------------------------------------------
    def heartbeat_data(self) -> HeartbeatData:
        groups = list(self.producers) + (["CLIENT_INNER_PRODUCER"] if self.consumers else [])
        return HeartbeatData(self.client_id, [ProducerData(g) for g in dict.fromkeys(groups)],
                             [c.consumer_data() for c in self.consumers.values()])

    async def send_heartbeat_to_all_brokers(self) -> None:
        if not self.producers and not self.consumers:
            return
        body = fastjson.dumpb(self.heartbeat_data().to_json_obj())
        only_masters = not self.consumers
        for name, addrs in list(self.broker_addrs.items()):
            for bid, addr in addrs.items():
                if only_masters and bid != MASTER_ID:
                    continue
                try:
                    resp = await self.invoke(addr, RemotingCommand.request(RequestCode.HEART_BEAT, body=body))
                    if resp.code == ResponseCode.SUCCESS:
                        self.broker_versions[name] = resp.version
                except RemotingError as e:
                    log.debug("heartbeat to %s failed: %s", addr, e)

    async def unregister_client(self, producer_group: str | None, consumer_group: str | None) -> None:
        for addrs in list(self.broker_addrs.values()):
            for addr in addrs.values():
                with contextlib.suppress(RemotingError):
                    await self.invoke(addr, RemotingCommand.request(
                        RequestCode.UNREGISTER_CLIENT,
                        UnregisterClientRequestHeader(self.client_id, producer_group, consumer_group).to_ext()),
                        timeout=1.0)

    async def _persist_all_offsets(self) -> None:
        for c in list(self.consumers.values()):
            await c.persist_consumer_offset()

    async def _rebalance_all(self) -> None:
        for c in list(self.consumers.values()):
            await c.do_rebalance()

    def now_ms(self) -> int:
        return int(time.time() * 1000)
