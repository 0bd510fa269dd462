"""The broker of `rmqtool serve`: request dispatch, background tasks, LocalBroker underneath.

`BrokerController` plays RocketMQ's BrokerController + NettyRemotingServer processors: each
request family lives in its own module (send, pull, clientmanage, admin, transaction) as a
mixin; this module wires them to request codes, runs store calls on a thread pool (the store
is synchronous; a sync-flush put must not stall other connections, and concurrent puts share
one fsync through the store's group commit), keeps the name server's route up to date and runs
the periodic jobs (client expiry, transaction check-back, offset persistence).
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import inspect
import logging
import time
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from rmqtool.broker.admin import AdminProcessor
from rmqtool.broker.assignment import QueryAssignmentProcessor
from rmqtool.broker.clientmanage import ClientManageProcessor
from rmqtool.broker.clients import ClientManager
from rmqtool.broker.cluster import ClusterSettings
from rmqtool.broker.confvalues import conf_flag, conf_int
from rmqtool.broker.durable import Later, answer_later, call_collecting
from rmqtool.broker.locks import RebalanceLockManager
from rmqtool.broker.longpoll import PullHoldService
from rmqtool.broker.nameserver import NameServerProcessor, RouteInfoManager
from rmqtool.broker.notify import CACHED_WINDOW_S, REAL_TIME_WINDOW_S, ConsumerIdsChangeNotifier
from rmqtool.broker.pop import PopProcessor, PopService
from rmqtool.broker.pull import PullProcessor
from rmqtool.broker.recall import RecallProcessor
from rmqtool.broker.registration import BrokerIdentity, NameServerRegistrar
from rmqtool.broker.relay import ConsumerRelayProcessor
from rmqtool.broker.roles import RoleProcessor
from rmqtool.broker.send import SendProcessor
from rmqtool.broker.slave import SYNC_CHECK_INTERVAL_S, SlaveSynchronize
from rmqtool.broker.transaction import TransactionProcessor
from rmqtool.broker.wire import to_wire_topic_config
from rmqtool.errors import InvalidInput, InvalidMessage, InvalidTopic, StoreError
from rmqtool.layouts.net import Host
from rmqtool.remoting.bodies import DataVersion, TopicConfigSerializeWrapper
from rmqtool.remoting.codes import RequestCode, ResponseCode
from rmqtool.remoting.command import RemotingCommand
from rmqtool.remoting.headers import HeaderError
from rmqtool.remoting.transport import Connection

log = logging.getLogger("rmqtool.broker")

T = TypeVar("T")
Processor = Callable[[RemotingCommand, Connection], Awaitable[RemotingCommand | None]]




class BrokerController(SendProcessor, PullProcessor, ClientManageProcessor, AdminProcessor, TransactionProcessor,
                       RecallProcessor, RoleProcessor):
    """One broker (a master, or a slave: brokerRole, cluster.py) over a LocalBroker, answering remoting requests."""

    def __init__(self, local: Any, advertised: Host, *, routes: RouteInfoManager | None = None,
                 workers: int = 16, namesrv_addrs: list[str] | None = None) -> None:
        self.local = local
        self.store = local.store
        self.config = local.config
        self.clock: Callable[[], int] = local.clock
        self.advertised = advertised
        self.broker_addr = str(advertised)
        self.broker_name = self.config.broker_name
        self.cluster_name = self.config.broker_cluster_name
        self.routes = routes
        self.namesrv = NameServerProcessor(routes) if routes is not None else None
        extra: dict[str, str] = dict(getattr(self.config, "extra", {}) or {})
        # SQL92 filtering is on by default here (RocketMQ's enablePropertyFilter defaults to false)
        self.enable_property_filter = conf_flag(extra, "enablePropertyFilter", True)
        self.long_polling_enable = conf_flag(extra, "longPollingEnable", True)
        self.short_polling_ms = conf_int(extra, "shortPollingTimeMills", 1000)
        self.transaction_check_interval_ms = conf_int(extra, "transactionCheckInterval", 30_000)
        self.transaction_timeout_ms = conf_int(extra, "transactionTimeOut", 6_000)
        self.transaction_check_max = conf_int(extra, "transactionCheckMax", 15)
        self.region_id = extra.get("regionId", "DefaultRegion")
        self.trace_on = extra.get("traceOn", "true")
        self.clients = ClientManager(self.clock)
        self.notifier = ConsumerIdsChangeNotifier(self.clients.consumer_channels, self.spawn, CACHED_WINDOW_S if not
                                                  conf_flag(extra, "realTimeNotifyConsumerChange", True) else REAL_TIME_WINDOW_S)
        self.locks = RebalanceLockManager(self.clock)
        self.executor = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="rmqtool-store")
        # With async flush a put is a memory copy into the mapped file: running it on the loop thread
        # avoids a thread hop and GIL hand-offs per request. With sync flush a put waits for the
        # disk, so it runs on the pool, where concurrent puts share one fsync (group commit).
        self.inline_store_calls = str(self.config.flush_disk_type).upper() != "SYNC_FLUSH"
        self.loop: asyncio.AbstractEventLoop | None = None
        self.hold: PullHoldService | None = None
        self._tasks: list[asyncio.Task] = []
        self._bg: set[asyncio.Task] = set()
        self.boot_ms = self.clock()
        self.stats = {"put": 0, "get": 0, "get_found": 0, "get_miss": 0}
        # TOPIC_PUT_NUMS of sends, counted in place by the send handlers (BrokerStatsManager.fold)
        self.put_msgs, self.put_calls = self.broker_stats.put_msgs, self.broker_stats.put_calls
        self._registered_version: tuple[int, int] | None = None
        self.cluster = ClusterSettings.from_config(self.config)
        self.broker_id = self.cluster.broker_id
        self.ha_server_addr = self.cluster.ha_server_addr(advertised.port)
        self.ha_master_addr: str | None = self.cluster.fixed_ha_master
        self.slave_sync = SlaveSynchronize(local, self.broker_addr, modes=self)
        self.replication: Any = None  # broker/replication.py's Replication, set by serve before start()
        # name servers of other processes (namesrvAddr): registered with as a Java broker does
        self.registrar = NameServerRegistrar(namesrv_addrs, BrokerIdentity(
            self.cluster_name, self.broker_name, self.broker_addr, self.broker_id,
            self.ha_server_addr)) if namesrv_addrs else None
        self._remote_version: tuple[int, int] | None = None
        self._remote_at = 0.0
        self.register_period_s = conf_int(extra, "registerNameServerPeriod", 30_000) / 1000
        self.force_register = conf_flag(extra, "forceRegister", True)  # BrokerConfig's default
        self.handlers: dict[int, Processor] = {
            RequestCode.SEND_MESSAGE: self.process_send,
            RequestCode.SEND_MESSAGE_V2: self.process_send,
            RequestCode.SEND_BATCH_MESSAGE: self.process_send,
            RequestCode.CONSUMER_SEND_MSG_BACK: self.process_send_back,
            RequestCode.PULL_MESSAGE: self.process_pull,
            RequestCode.LITE_PULL_MESSAGE: self.process_pull,  # 5.x DefaultLitePullConsumer, same header
            RequestCode.HEART_BEAT: self.process_heartbeat,
            RequestCode.UNREGISTER_CLIENT: self.process_unregister_client,
            RequestCode.GET_CONSUMER_LIST_BY_GROUP: self.process_consumer_list,
            RequestCode.QUERY_CONSUMER_OFFSET: self.process_query_consumer_offset,
            RequestCode.UPDATE_CONSUMER_OFFSET: self.process_update_consumer_offset,
            RequestCode.LOCK_BATCH_MQ: self.process_lock_batch,
            RequestCode.UNLOCK_BATCH_MQ: self.process_unlock_batch,
            RequestCode.CHECK_CLIENT_CONFIG: self.process_check_client_config,
            RequestCode.GET_MAX_OFFSET: self.process_get_max_offset,
            RequestCode.GET_MIN_OFFSET: self.process_get_min_offset,
            RequestCode.SEARCH_OFFSET_BY_TIMESTAMP: self.process_search_offset,
            RequestCode.GET_EARLIEST_MSG_STORETIME: self.process_earliest_msg_storetime,
            RequestCode.VIEW_MESSAGE_BY_ID: self.process_view_message,
            RequestCode.QUERY_MESSAGE: self.process_query_message,
            RequestCode.UPDATE_AND_CREATE_TOPIC: self.process_update_and_create_topic,
            RequestCode.GET_ALL_TOPIC_CONFIG: self.process_get_all_topic_config,
            RequestCode.GET_TOPIC_STATS_INFO: self.process_topic_stats,
            RequestCode.GET_TOPIC_CONFIG: self.process_get_topic_config,
            RequestCode.QUERY_TOPIC_CONSUME_BY_WHO: self.process_topic_consume_by_who,
            RequestCode.GET_CONSUME_STATS: self.process_consume_stats,
            RequestCode.GET_CONSUMER_CONNECTION_LIST: self.process_consumer_connection_list,
            RequestCode.GET_BROKER_RUNTIME_INFO: self.process_broker_runtime_info,
            RequestCode.END_TRANSACTION: self.process_end_transaction,
            RequestCode.RECALL_MESSAGE: self.process_recall_message,
        }
        self.handlers.update(self.cluster_handlers())
        self.pop = PopService(self)  # POP consumption (broker/pop), also the gRPC front's API
        self.handlers.update(PopProcessor(self.pop).handlers())
        self.handlers.update(self.admin_handlers())
        self.handlers.update(QueryAssignmentProcessor(self).handlers())  # 400: broker-side rebalance
        self.handlers.update(ConsumerRelayProcessor(self).handlers())  # 307/309 passed on to a consumer
        self._async_of: dict[Any, bool] = {}  # processor -> is it `async def` (answered in answer_later)

    # ------------------------------------------------------------ lifecycle
    async def start(self) -> None:
        self.loop = asyncio.get_running_loop()
        self.hold = PullHoldService(self.loop)
        self.store.add_arrival_listener(self._on_arrival, self.hold.topics)  # the topics pulls are held on
        self.local.start_config_writer()  # config files written off the event loop, batched
        ha_port = getattr(self.replication, "ha_port", None)
        if ha_port:  # where the HA service listens (another port than listenPort + 1 in tests)
            self.ha_server_addr = f"{self.cluster.broker_ip2}:{ha_port}"
            if self.registrar is not None:
                self.registrar.identity.ha_server_addr = self.ha_server_addr
        if self.ha_master_addr is not None:  # haMasterAddress: the HA client follows it from the start
            self.set_ha_master_address(self.ha_master_addr)
        self.sample_runtime_stats()  # the boot sample: put sizes and TPS count from here
        self.register_broker_all()
        master_only = self.special_services_start()
        for svc in getattr(self.local, "services", []):
            if master_only or getattr(svc, "name", "") not in MASTER_ONLY_SERVICES:
                svc.start()
        self._tasks = [
            asyncio.create_task(self._every(10.0, self._scan_clients), name="client-expiry"),
            asyncio.create_task(self._every(5.0, self._persist_offsets), name="offset-persist"),
            asyncio.create_task(self._every(1.0, self.sample_runtime_stats), name="stats-sampling"),
            asyncio.create_task(self._every(30.0, self.register_broker_all), name="register-broker"),
            asyncio.create_task(self._every(1.0, self.register_remote), name="register-remote"),
            asyncio.create_task(self._every(5.0, self._scan_brokers), name="namesrv-expiry"),
        ]
        if master_only:
            self._tasks.append(asyncio.create_task(self._every(max(0.2, self.transaction_check_interval_ms / 1000),
                                                               self.check_transactions), name="transaction-check"))
        else:
            self._tasks.append(asyncio.create_task(self._every(SYNC_CHECK_INTERVAL_S, self.slave_sync_tick),
                                                   name="slave-synchronize"))
        self._tasks.extend(self.pop.start())
        if self.registrar is not None:
            # BrokerController.start registers once before the broker counts as started, so a
            # slave started right after its master finds it in the name server's answer (each
            # name server bounded by the registrar's timeout; a failure is logged, not raised)
            try:
                await self.register_remote(force=True)
            except Exception:  # noqa: BLE001 - registration never stops the broker
                log.exception("first registration with the name servers failed")

    async def stop(self) -> None:
        # the periodic jobs stop first: a registration (or, with forceRegister=false, a
        # QUERY_DATA_VERSION answered "changed") after UNREGISTER_BROKER would list the stopped
        # broker again for 120 s; Java's doRegisterBrokerAll returns once `shutdown` is set
        for t in self._tasks + list(self._bg):
            t.cancel()
        for t in self._tasks + list(self._bg):
            with contextlib.suppress(BaseException):
                await t
        if self.registrar is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self.registrar.unregister_all(), 10)
        self.notifier.close()
        if self.hold is not None:
            self.hold.wake_all()
        self.pop.stop()
        for svc in getattr(self.local, "services", []):
            with contextlib.suppress(Exception):
                svc.stop()
        self.store.remove_arrival_listener(self._on_arrival)
        await asyncio.get_running_loop().run_in_executor(None, self.executor.shutdown, True)
        with contextlib.suppress(Exception):
            self.local.offsets.persist()

    async def _every(self, seconds: float, fn: Callable[[], Any]) -> None:
        while True:
            await asyncio.sleep(seconds)
            try:
                r = fn()
                if asyncio.iscoroutine(r):
                    await r
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("periodic task %s failed", getattr(fn, "__name__", fn))

    def spawn(self, coro: Awaitable[Any]) -> None:
        """Fire-and-forget a coroutine (oneway notifications), keeping a reference until done."""
        t = asyncio.ensure_future(coro)
        self._bg.add(t)
        t.add_done_callback(self._bg.discard)

    async def run(self, fn: Callable[..., T], *args: Any, **kw: Any) -> T:
        """Run a store call: inline with async flush, on the worker pool with sync flush."""
        if self.inline_store_calls:
            return fn(*args, **kw)
        loop = self.loop or asyncio.get_running_loop()
        ctx = contextvars.copy_context()  # the request's durable_waits go along to the pool thread
        if kw:
            return await loop.run_in_executor(self.executor, lambda: ctx.run(fn, *args, **kw))
        return await loop.run_in_executor(self.executor, ctx.run, fn, *args)

    def call_store(self, fn: Callable[..., T], args: tuple[Any, ...],
                   done: Callable[[T], Any], *, read: bool = False) -> Any:
        """`done(fn(*args))`, synchronously when store calls run inline, else as a coroutine.

        The hot handlers (send, pull) are written as "checks, one store call, build the
        answer": with async flush the whole request then completes inside the transport's
        read callback, without a task. `done` may itself return an awaitable (a pull that goes
        on to wait for messages); the transport awaits it. A `read` (a pull) runs inline even
        with sync flush: it never waits for the disk flush, so the pool's thread hop buys nothing.
        """
        if self.inline_store_calls or read:
            return done(fn(*args))
        return Later(self._call_store_async, fn, args, done)

    async def _call_store_async(self, fn: Callable[..., T], args: tuple[Any, ...],
                                done: Callable[[T], Any]) -> Any:
        loop = self.loop or asyncio.get_running_loop()
        r = done(await loop.run_in_executor(self.executor, contextvars.copy_context().run, fn, *args))
        if r is not None and not isinstance(r, RemotingCommand):
            r = await r
        return r

    def _on_arrival(self, topic: str, queue_id: int) -> None:
        hold = self.hold
        if hold is not None:
            hold.notify_threadsafe(topic, queue_id)

    # ------------------------------------------------------------ name server registration
    def topic_config_wrapper(self) -> TopicConfigSerializeWrapper:
        topics = self.local.topics
        dv = topics.data_version
        table = {name: to_wire_topic_config(tc) for name, tc in list(topics.table.items())}
        perm = self.configuration.permission()
        if perm & 6 != 6:  # brokerPermission without read or write: every topic registers so
            for tc in table.values():
                tc.perm &= perm
        return TopicConfigSerializeWrapper(table, DataVersion(dv.counter, dv.timestamp,
                                                              getattr(dv, "state_version", 0)))

    def register_broker_all(self) -> None:
        """`registerBrokerAll`: publish the topic table to the in-process name server."""
        if self.routes is None:
            return
        version = (self.local.topics.data_version.counter, self.local.topics.data_version.timestamp)
        if version == self._registered_version and self.broker_addr in self.routes.broker_live_table:
            self.routes.broker_live_table[self.broker_addr].last_update_ms = self.clock()
            return
        self._registered_version = version
        w = self.topic_config_wrapper()
        result = self.routes.register_broker(self.cluster_name, self.broker_addr, self.broker_name, self.broker_id,
                                             self.ha_server_addr, w.topicConfigTable, w.dataVersion, None)
        if self.registrar is None:
            self.handle_register_result(result)

    async def register_remote(self, *, force: bool = False) -> int:
        """REGISTER_BROKER to the namesrvAddr name servers: every registerNameServerPeriod, and at
        once when the topic table changed (a topic created or auto-created), as the Java broker
        re-registers after `createTopicInSendMessageMethod`. With forceRegister=false the periodic
        one is sent only if a name server's QUERY_DATA_VERSION says so (`needRegister`). Returns
        how many accepted."""
        if self.registrar is None:
            return 0
        dv = self.local.topics.data_version
        version = (dv.counter, dv.timestamp)
        now = time.monotonic()
        periodic = not force and version == self._remote_version
        if periodic and now - self._remote_at < self.register_period_s:
            return 0
        self._remote_version, self._remote_at = version, now
        wrapper = self.topic_config_wrapper()
        if periodic and not self.force_register and not await self.registrar.need_register(wrapper.dataVersion):
            return 0
        n = await self.registrar.register_all(wrapper)
        self.handle_register_result(self.registrar.first_result())
        return n

    def _scan_brokers(self) -> None:
        """The name server's scanNotActiveBroker: every 5 s (Java's scanNotActiveBrokerInterval, so a
        broker with a 10 s heartbeat timeout is gone 10-15 s after it fell silent), drop brokers
        silent for longer than their own timeout."""
        if self.routes is not None:
            self.routes.scan_not_active_broker()

    def _persist_offsets(self) -> Any:
        if getattr(self.local.offsets, "dirty", True):
            return self.run(self.local.offsets.persist)
        return None

    # ------------------------------------------------------------ dispatch
    def handle(self, cmd: RemotingCommand, conn: Connection) -> Any:
        """Dispatch by request code; a response, None, or an awaitable of one (see transport.py).

        Processors that complete synchronously answer without a task. One that has to wait is
        answered by a single coroutine (`answer_later`): an `async def` processor is called in
        it, a synchronous one hands back a `Later`, so nothing exists unawaited before the
        task runs. The errors below map to the same response codes whether they are raised now
        or while awaiting.
        """
        fn = self.handlers.get(cmd.code)
        if fn is None:
            if self.namesrv is not None and self.namesrv.handles(cmd.code):
                return self.namesrv.process(cmd, conn)
            log.info("request code %s from %s (%s v%s) not supported", cmd.code, conn.peer, cmd.language,
                     cmd.version)
            return cmd.response(ResponseCode.REQUEST_CODE_NOT_SUPPORTED,
                                remark=f" request type {cmd.code} not supported")
        is_async = self._async_of.get(fn)
        if is_async is None:
            is_async = self._async_of[fn] = inspect.iscoroutinefunction(fn)
        if is_async:
            return answer_later(fn, (cmd, conn), None, (), lambda e: _error_response(cmd, e, conn), _MAPPED_ERRORS)
        try:
            # topic/group writes the request asks for: answered once on disk (durable.py)
            r, waits = call_collecting(fn, cmd, conn)
        except _MAPPED_ERRORS as e:
            return _error_response(cmd, e, conn)
        if r is None or isinstance(r, RemotingCommand):
            return answer_later(None, (), r, waits) if waits and r is not None else r
        return answer_later(None, (), r, waits, lambda e: _error_response(cmd, e, conn), _MAPPED_ERRORS)

    def on_close(self, conn: Connection) -> None:
        """A channel closed: it leaves every group (`doChannelCloseEvent`)."""
        for group in self.clients.channel_closed(conn):
            self.notify_consumer_ids_changed(group)

    def _scan_clients(self) -> None:
        stale, groups = self.clients.scan_not_active()
        for conn in stale:
            log.info("closing %s: no heartbeat for 120 s", conn.peer)
            self.spawn(conn.close())
        for group in groups:
            self.notify_consumer_ids_changed(group)

    def now(self) -> int:
        return self.clock() if self.clock else int(time.time() * 1000)


# services that write to the CommitLog: a slave does not run them (changeSpecialServiceStatus)
MASTER_ONLY_SERVICES = frozenset({"schedule-message", "timer-message-store"})

_MAPPED_ERRORS = (HeaderError, InvalidTopic, InvalidMessage, InvalidInput, StoreError)


def _error_response(cmd: RemotingCommand, e: Exception, conn: Connection | None = None) -> RemotingCommand:
    """The answer to a processor's error, as the Java broker's codes go. A header that cannot be
    decoded is a bad request: one WARNING line (Java logs "Failed field [..] decoding")."""
    if isinstance(e, HeaderError):
        log.warning("bad request code %s from %s: %s", cmd.code, conn.peer if conn is not None else "?", e)
        code = ResponseCode.SYSTEM_ERROR
    elif isinstance(e, InvalidTopic):
        code = ResponseCode.TOPIC_NOT_EXIST
    elif isinstance(e, InvalidMessage):
        code = ResponseCode.MESSAGE_ILLEGAL
    elif isinstance(e, InvalidInput):
        code = ResponseCode.SYSTEM_ERROR
    else:  # StoreError
        code = ResponseCode.SERVICE_NOT_AVAILABLE
    return cmd.response(code, remark=str(e))
