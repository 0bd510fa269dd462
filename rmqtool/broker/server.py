"""`rmqtool serve`: a name server and one broker in one asyncio process (cli.md, protocol.md §1.1).

`--namesrv-only` runs the name server alone (as `mqnamesrv`), `--broker-only` the broker alone
(as `mqbroker`: it registers with `--namesrv-addr` / namesrvAddr only); this is how masters and
slaves of several broker groups make one cluster.

Ports are bound before the store opens, so an ephemeral broker port (0, for tests) is known
when the store stamps its address into records and msgIds. The broker also listens on
`broker port - 2` (the VIP channel of clients <= 4.4) when that port is free.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import os
import signal
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rmqtool.broker.busypoll import DEFAULT_BUDGET_US, BusyPoll
from rmqtool.broker.durable import install_sink
from rmqtool.broker.nameserver import NameServerProcessor, RouteInfoManager
from rmqtool.broker.nameserver_admin import namesrv_admin
from rmqtool.errors import InvalidInput
from rmqtool.layouts.net import Host
from rmqtool.remoting.budget import FrameBudget
from rmqtool.remoting.codes import ResponseCode
from rmqtool.remoting.command import RemotingCommand
from rmqtool.remoting.transport import Connection, RemotingServer

log = logging.getLogger("rmqtool.serve")


@dataclass
class ServeOptions:
    store: Path | None = None
    host: str | None = None
    namesrv_port: int = 9876
    broker_port: int | None = None
    flush: str | None = None  # "sync" | "async"
    config_file: Path | None = None
    namesrv_addr: str | None = None  # name servers of other processes to register with (namesrvAddr)
    mode: str = "all"  # "all" | "namesrv" (mqnamesrv) | "broker" (mqbroker)
    grpc_port: int = -1  # the 5.x gRPC endpoint (rmqtool.proxy); -1 = off, 0 = any free port
    grpc_port_soft: bool = False  # the CLI's default port: when taken, warn and serve without gRPC
    # async (controller, host, port, soft, broker.conf properties) -> (server | None, Host | None, why off | None):
    # rmqtool.proxy.launch.start_grpc, handed in by the CLI (the proxy layer sits above the broker)
    grpc_starter: Any = None
    # after a request the loop polls this long for the next instead of sleeping (busypoll.py); 0 = off
    busy_poll_us: int = DEFAULT_BUDGET_US


@dataclass
class ServeInfo:
    namesrv: Host | None
    broker: Host | None
    broker_name: str
    store: Path | None
    vip_port: int | None
    ha_port: int | None = None  # where slaves connect (a master); None on a slave
    role: str = "ASYNC_MASTER"
    broker_id: int = 0
    grpc: Host | None = None
    grpc_off: str | None = None  # why the default gRPC port is not served (named in the ready line)


def read_properties(path: Path) -> dict[str, str]:
    """A broker.conf (Java properties: `key=value`, `key: value`, `#`/`!` comments)."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as e:
        raise InvalidInput(f"cannot read config {path}: {e.strerror or e}") from None
    props: dict[str, str] = {}
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line[0] in "#!":
            continue
        for sep in ("=", ":"):
            if sep in line:
                k, _, v = line.partition(sep)
                props[k.strip()] = v.strip()
                break
    return props


def build_config(opts: ServeOptions) -> Any:
    from rmqtool.store.config import StoreConfig

    props = read_properties(opts.config_file) if opts.config_file else {}
    cfg = StoreConfig.from_properties(props)
    if opts.store is not None:
        cfg.store_path_root_dir = Path(opts.store)
    if opts.broker_port is not None:
        cfg.listen_port = opts.broker_port
    if opts.flush is not None:
        if opts.flush.lower() not in ("sync", "async"):
            raise InvalidInput(f"--flush must be sync or async, not {opts.flush!r}")
        cfg.flush_disk_type = "SYNC_FLUSH" if opts.flush.lower() == "sync" else "ASYNC_FLUSH"
    cfg.store_path_root_dir = Path(cfg.store_path_root_dir).expanduser()
    return cfg


class Serve:
    """Owns the sockets, the LocalBroker and the controller; `run()` until `stop()`."""

    def __init__(self, opts: ServeOptions) -> None:
        if opts.mode not in ("all", "namesrv", "broker"):
            raise InvalidInput(f"serve mode must be all, namesrv or broker, not {opts.mode!r}")
        self.opts = opts
        self.config = build_config(opts)
        if opts.mode != "namesrv":
            from rmqtool.broker.cluster import ClusterSettings

            ClusterSettings.from_config(self.config)  # a bad brokerRole / brokerId fails before any port opens
        self.listen_host = opts.host or "127.0.0.1"
        self.controller: Any = None
        self.local: Any = None
        self.routes = RouteInfoManager()
        self.ns_processor = NameServerProcessor(self.routes, namesrv_admin(self.routes, self.config.store_path_root_dir))
        self.servers: list[RemotingServer] = []
        self.busy_poll: BusyPoll | None = None
        self.grpc: Any = None
        self.grpc_off: str | None = None
        self._stop = asyncio.Event()
        self.info: ServeInfo | None = None
        self.replication: Any = None

    def _broker_handler(self, cmd: RemotingCommand, conn: Connection) -> Any:
        """The controller's answer: a response now, or an awaitable of one."""
        ctl = self.controller
        if ctl is None:
            return cmd.response(ResponseCode.SYSTEM_BUSY, remark="broker is starting")
        if self.busy_poll is not None:
            self.busy_poll.touch(conn)
        return ctl.handle(cmd, conn)

    def _broker_closed(self, conn: Connection) -> None:
        if self.controller is not None:
            self.controller.on_close(conn)

    async def _ns_handler(self, cmd: RemotingCommand, conn: Connection) -> RemotingCommand:
        if self.ns_processor.handles(cmd.code):
            return await self.ns_processor.process(cmd, conn)
        log.info("name server request code %s from %s (%s v%s) not supported", cmd.code, conn.peer, cmd.language,
                 cmd.version)  # as the broker's dispatch logs it: which features a peer misses
        return cmd.response(ResponseCode.REQUEST_CODE_NOT_SUPPORTED, remark=f" request type {cmd.code} not supported")

    async def start(self) -> ServeInfo:
        from rmqtool.store.local import LocalBroker

        cfg = self.config
        # before any listener starts: their connections' callbacks see the sink (durable.py)
        install_sink()
        budget = FrameBudget()  # one cap on partial frames for all three listeners of the process
        mode = self.opts.mode
        ns = RemotingServer(self._ns_handler, self.listen_host, self.opts.namesrv_port,
                            on_close=self.routes.on_channel_destroy, budget=budget)
        broker = RemotingServer(self._broker_handler, self.listen_host, cfg.listen_port, on_close=self._broker_closed,
                                budget=budget)
        try:
            if mode != "broker":
                await ns.start()
                self.servers.append(ns)
            if mode == "namesrv":
                self.info = ServeInfo(Host(self.listen_host, ns.port), None, "", None, None)
                return self.info
            if mode != "broker" and self.ns_processor.admin is not None:
                self.ns_processor.admin.conf.set_listen(self.listen_host, ns.port)
            await broker.start()
            self.servers.append(broker)
        except OSError as e:
            await self.close_servers()
            from rmqtool.errors import RemotingError

            raise RemotingError(f"cannot listen on {self.listen_host}: {e.strerror or e}") from None
        vip_port: int | None = None
        if broker.port - 2 > 0:
            vip = RemotingServer(self._broker_handler, self.listen_host, broker.port - 2,
                                 on_close=self._broker_closed, budget=budget)
            try:
                await vip.start()
                self.servers.append(vip)
                vip_port = vip.port
            except OSError:
                vip_port = None
        cfg.listen_port = broker.port
        if self.opts.host and self.opts.host not in ("0.0.0.0", "::") and "brokerIP1" not in self._conf_keys():
            cfg.broker_ip1 = self.opts.host
        loop = asyncio.get_running_loop()
        if self.opts.busy_poll_us > 0:
            self.busy_poll = BusyPoll(loop, self.opts.busy_poll_us / 1e6)
        try:
            self.local = await loop.run_in_executor(None, lambda: LocalBroker.open(cfg.store_path_root_dir, cfg))
            if os.environ.get("RMQTOOL_INDEX_PROCESS") == "1":  # the index in a second process: off by default
                # on this loop's thread: the child is killed with the thread that started it (PDEATHSIG)
                self.local.store.start_index_process()
            _defer_index(self.local.store, loop)
        except BaseException:
            await self.close_servers()
            raise
        _ensure_delivery(self.local)
        from rmqtool.broker.replication import start_replication

        try:
            self.replication = start_replication(self.local, self.listen_host, ephemeral=self.opts.broker_port == 0)
        except BaseException:
            await self.close_servers()
            await loop.run_in_executor(None, self.local.close)
            self.local = None
            raise
        from rmqtool.broker.controller import BrokerController

        advertised = Host(cfg.broker_ip1, broker.port)
        from rmqtool.broker.registration import parse_namesrv_addr

        # besides our own name server, `--namesrv-addr` / broker.conf `namesrvAddr`
        addrs = parse_namesrv_addr(self.opts.namesrv_addr or cfg.extra.get("namesrvAddr"))
        routes = self.routes if mode == "all" else None
        if routes is None and not addrs:  # as mqbroker without namesrvAddr: it runs, no client finds it
            log.warning("--broker-only without --namesrv-addr (namesrvAddr): registered with no name server")
        self.controller = BrokerController(self.local, advertised, routes=routes, namesrv_addrs=addrs)
        self.controller.replication = self.replication  # haStatus, masterAddr updates from the name server
        # where updateBrokerConfig persists: the -c file, as BrokerStartup's brokerConfigPath
        self.controller.broker_config_path = Path(self.opts.config_file) if self.opts.config_file else None
        await self.controller.start()
        grpc_host = await self._start_grpc()
        self.info = ServeInfo(Host(self.listen_host, ns.port) if mode == "all" else None, advertised,
                              cfg.broker_name, Path(cfg.store_path_root_dir), vip_port,
                              ha_port=self.replication.ha_port, role=cfg.broker_role,
                              broker_id=self.controller.broker_id, grpc=grpc_host, grpc_off=self.grpc_off)
        return self.info

    async def _start_grpc(self) -> Host | None:
        """The gRPC front over the controller, unless `grpc_port` is -1. The front lives in
        rmqtool.proxy, a layer above this one, so whoever composes the process (the CLI) hands its
        starter in as `ServeOptions.grpc_starter`; without one there is no gRPC endpoint."""
        starter = self.opts.grpc_starter
        if self.opts.grpc_port < 0 or starter is None:
            return None
        props = read_properties(self.opts.config_file) if self.opts.config_file else {}
        self.grpc, host, self.grpc_off = await starter(self.controller, self.listen_host, self.opts.grpc_port,
                                                        self.opts.grpc_port_soft, props)
        return host

    def _conf_keys(self) -> set[str]:
        return set(read_properties(self.opts.config_file)) if self.opts.config_file else set()

    def stop(self) -> None:
        self._stop.set()

    async def wait(self) -> None:
        await self._stop.wait()

    async def close_servers(self) -> None:
        for s in self.servers:
            with contextlib.suppress(Exception):
                await s.close()
        self.servers = []

    async def close(self) -> None:
        """Stop accepting, answer nothing more, stop the services, close the store cleanly."""
        if self.grpc is not None:
            await self.grpc.stop()
            self.grpc = None
        await self.close_servers()
        if self.controller is not None:
            await self.controller.stop()
        if self.replication is not None:
            await asyncio.get_running_loop().run_in_executor(None, self.replication.stop)
            self.replication = None
        if self.local is not None:
            await asyncio.get_running_loop().run_in_executor(None, self.local.close)
            self.local = None


# How long serve lets index keys queue before building them. Java's ReputMessageService catches
# up every millisecond; a few more let the keys of single sends, which arrive one per loop pass
# from one producer, be hashed and written together (`build_index_batch`: about 28,000
# instructions a key for 24 keys against 66,000 one by one). Look-ups, flushes and close drain
# first, and past indexdefer.MAX_PENDING queued builds a putter drains: the delay is never seen.
INDEX_DRAIN_DELAY_S = 0.005


def _defer_index(store: Any, loop: asyncio.AbstractEventLoop) -> None:
    """Index entries built shortly after the requests that appended them, not inside them
    (store/indexdefer.py, as ReputMessageService builds them behind the append): the drain is
    scheduled on this loop, INDEX_DRAIN_DELAY_S on, when the first build waits, from this
    thread or a store thread."""
    loop_thread = threading.get_ident()

    def wake(drain: Callable[[], None]) -> None:
        if threading.get_ident() == loop_thread:
            loop.call_later(INDEX_DRAIN_DELAY_S, drain)
        else:
            loop.call_soon_threadsafe(loop.call_later, INDEX_DRAIN_DELAY_S, drain)

    store.defer_index(wake)


def _ensure_delivery(local: Any) -> None:
    """Delay levels and timers must run inside serve: attach them if LocalBroker.open did not."""
    try:
        from rmqtool.store.timer import ScheduleMessageService, attach_delivery
    except ImportError:
        return
    if not any(isinstance(s, ScheduleMessageService) for s in local.services):
        attach_delivery(local)


async def serve_forever(opts: ServeOptions, ready: Callable[[ServeInfo], None]) -> None:
    """Start, report readiness, run until SIGINT/SIGTERM, shut down cleanly."""
    srv = Serve(opts)
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.add_signal_handler(sig, srv.stop)
    try:
        info = await srv.start()
        # what start-up made (modules, the store's tables) lives as long as serve: frozen, the
        # collector's full passes, which run on whichever thread allocates, here mostly the
        # event loop's, no longer scan it (~20 ms a pass, a stall of every request meanwhile)
        gc.collect()
        gc.freeze()
        ready(info)
        await srv.wait()
    finally:
        await srv.close()


def ready_line(info: ServeInfo) -> str:
    """One line on stderr once the listeners are up; its form depends on what runs."""
    if info.broker is None:
        return f"rmqtool serve: name server {info.namesrv}"
    grpc = f"gRPC {info.grpc}, " if info.grpc is not None else ""
    if info.grpc_off:
        grpc = f"gRPC off ({info.grpc_off}), "
    role = "" if info.broker_id == 0 and info.role == "ASYNC_MASTER" else \
        f" (brokerId {info.broker_id}, {info.role})"
    if info.namesrv is None:
        return f"rmqtool serve: broker {info.broker_name} {info.broker}{role}, {grpc}store {info.store}"
    return f"rmqtool serve: name server {info.namesrv}, broker {info.broker_name} {info.broker}, {grpc}store {info.store}"


def replication_line(info: ServeInfo, master: str | None) -> str | None:
    """The second ready line: where slaves connect, or which master this slave follows (none
    for a name server alone)."""
    if info.broker is None:
        return None
    if info.ha_port is not None:
        return f"rmqtool serve: {info.role}, HA listening on {info.broker.ip}:{info.ha_port}"
    return f"rmqtool serve: SLAVE, following HA master {master or '(from the name server)'}"
