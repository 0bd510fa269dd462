"""asyncio transport shared by the broker, the name server and the client.

One TCP connection carries many requests at once, answered by opaque, out of order (a held pull
must not block a send on the same socket). Either side may send requests (the broker sends
NOTIFY_CONSUMER_IDS_CHANGED and CHECK_TRANSACTION_STATE to clients). A malformed frame closes
that connection only.

Each connection is an `asyncio.Protocol`: frames are decoded in `data_received` and handed to
the handler right there. A handler may answer synchronously (return the response, or None) or
return an awaitable; only the latter costs a task. The broker answers sends and most pulls
synchronously, which saves a task, a stream reader wake-up and a drain per request. To keep
the order in which requests of one connection start, a request that arrives while an earlier
one of the same connection waits for its task to start is queued behind it in a task too.
Responses produced while one read chunk is being processed go out in one write. An awaitable
answer should be one coroutine that creates whatever else it awaits when it runs: a task
cancelled before its first step (its connection closed) closes only that coroutine.

A server's connections hold partial frames against one `FrameBudget` (budget.py): a connection
whose frame does not fit stops reading until it does, and one whose partial frame gets no byte
for 120 s is closed. A malformed frame, a handler bug: one WARNING line each, never a traceback.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any, cast

from rmqtool.errors import RemotingError
from rmqtool.layouts.net import Host
from rmqtool.remoting.budget import FrameBudget
from rmqtool.remoting.codes import ResponseCode
from rmqtool.remoting.command import (
    MAX_FRAME_LENGTH,
    ONEWAY_FLAG,
    RESPONSE_FLAG,
    FrameError,
    FrameReader,
    RemotingCommand,
)

log = logging.getLogger("rmqtool.remoting")
STALLED_FRAME_S = 120.0

# A handler answers with a response, None (no answer), or an awaitable of either.
HandlerResult = RemotingCommand | None | Awaitable[RemotingCommand | None]
Handler = Callable[[RemotingCommand, "Connection"], HandlerResult]


class _Writer:
    """The slice of `asyncio.StreamWriter` callers and tests use: write, drain, close."""

    def __init__(self, conn: Connection) -> None:
        self._conn = conn

    def write(self, data: bytes) -> None:
        t = self._conn.transport
        if t is not None and not t.is_closing():
            t.write(data)

    def writelines(self, data: list[bytes] | tuple[bytes, ...]) -> None:
        t = self._conn.transport
        if t is not None and not t.is_closing():
            t.writelines(data)

    async def drain(self) -> None:
        await self._conn._drain()

    def is_closing(self) -> bool:
        t = self._conn.transport
        return t is None or t.is_closing()

    def close(self) -> None:
        t = self._conn.transport
        if t is not None:
            t.close()

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        t = self._conn.transport
        return default if t is None else t.get_extra_info(name, default)


class Connection(asyncio.Protocol):
    """One remoting channel: request/response matching, oneway sends, incoming requests."""

    def __init__(self, handler: Handler | None = None, max_frame: int = MAX_FRAME_LENGTH,
                 on_lost: Callable[[Connection], None] | None = None, budget: FrameBudget | None = None) -> None:
        self.handler = handler
        self.transport: asyncio.Transport | None = None
        self.writer = _Writer(self)
        self._frames = FrameReader(max_frame)
        self._budget = budget  # the server's cap on partial frames (none on client connections)
        self.reserved = 0  # bytes of the budget the frame being assembled holds
        self.partial_progress = 0.0  # monotonic time the last bytes of a partial frame came
        self._pending: dict[int, asyncio.Future[RemotingCommand]] = {}
        self._tasks: set[asyncio.Task] = set()
        self._unstarted = 0  # handler tasks created but not yet run: later requests queue behind them
        self._out: list[bytes] | None = None  # responses collected while a read chunk is processed
        self._paused = False
        self._drain_waiters: list[asyncio.Future[None]] = []
        self._broken = False  # a malformed frame was seen: ignore whatever else arrives
        self._on_lost = on_lost
        self.closed = asyncio.Event()
        self.peer = Host("0.0.0.0", 0)
        self.local = Host("0.0.0.0", 0)
        self.attrs: dict[str, object] = {}  # per-channel state kept by handlers (client id, ...)

    # ------------------------------------------------------------ asyncio.Protocol
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # a stream transport, though not always an asyncio.Transport subclass (uvloop's are not)
        self.transport = cast(asyncio.Transport, transport)
        peer = self.transport.get_extra_info("peername") or ("0.0.0.0", 0)
        local = self.transport.get_extra_info("sockname") or ("0.0.0.0", 0)
        self.peer = Host(str(peer[0]), int(peer[1]))
        self.local = Host(str(local[0]), int(local[1]))

    def data_received(self, data: bytes) -> None:
        if self._broken:
            return
        try:
            cmds = self._frames.feed(data)
        except Exception as e:  # FrameError; anything else is a decoder bug, closed the same way
            what = e if isinstance(e, FrameError) else f"{e.__class__.__name__}: {str(e)[:200]!r}"
            log.warning("closing %s: malformed frame: %s", self.peer, what)
            self._broken = True
            self._frames.clear()
            self._close_now()
            return
        if self._budget is not None:
            need = self._frames.pending()
            if need:
                self.partial_progress = time.monotonic()
                if need != self.reserved:
                    self._budget.hold(self, need, self.peer)
            elif self.reserved:
                self._budget.hold(self, 0, self.peer)
        self._out = out = []
        try:
            for cmd in cmds:
                if cmd.flag & RESPONSE_FLAG:
                    fut = self._pending.pop(cmd.opaque, None)
                    if fut is not None and not fut.done():
                        fut.set_result(cmd)
                else:
                    self._dispatch(cmd)
        finally:
            self._out = None
            if out:
                if len(out) == 1:
                    self.writer.write(out[0])
                else:
                    self.writer.writelines(out)  # one writev on uvloop, one join on asyncio's loop

    def eof_received(self) -> bool | None:
        return None  # close the transport

    def connection_lost(self, exc: Exception | None) -> None:
        self._shutdown()
        self._frames.clear()
        if self._budget is not None:
            self._budget.drop(self)
        for w in self._drain_waiters:
            if not w.done():
                w.set_exception(ConnectionResetError("connection lost"))
        self._drain_waiters.clear()
        if self._on_lost is not None:
            cb, self._on_lost = self._on_lost, None
            try:
                cb(self)
            except Exception:
                log.exception("connection close callback failed")

    def pause_reading(self) -> None:
        """The budget for partial frames is spent: stop reading until it admits us again."""
        t = self.transport
        if t is not None and not t.is_closing():
            with contextlib.suppress(RuntimeError):
                t.pause_reading()

    def resume_reading(self) -> None:
        self.partial_progress = time.monotonic()  # the wait for the budget is no stall of its own
        t = self.transport
        if t is not None and not t.is_closing():
            with contextlib.suppress(RuntimeError):
                t.resume_reading()

    def pause_writing(self) -> None:
        self._paused = True

    def resume_writing(self) -> None:
        self._paused = False
        for w in self._drain_waiters:
            if not w.done():
                w.set_result(None)
        self._drain_waiters.clear()

    async def _drain(self) -> None:
        """Wait while the transport's write buffer is above its high-water mark."""
        if self.transport is None or self.transport.is_closing():
            if self.closed.is_set():
                raise ConnectionResetError("connection closed")
            return
        if not self._paused:
            return
        w: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._drain_waiters.append(w)
        await w

    # ------------------------------------------------------------ requests we serve
    def _dispatch(self, cmd: RemotingCommand) -> None:
        """Run the handler now; only an awaitable result (or a queue ahead) costs a task."""
        if self.closed.is_set():
            return
        if self._unstarted:
            self._spawn(cmd, None)
            return
        handler = self.handler
        if handler is None:
            resp: RemotingCommand | None = cmd.response(ResponseCode.REQUEST_CODE_NOT_SUPPORTED,
                                                        remark=f" request type {cmd.code} not supported")
        else:
            try:
                r = handler(cmd, self)
            except Exception as e:  # a handler bug answers SYSTEM_ERROR, the server stays up
                resp = self._handler_failed(cmd, e)
            else:
                if r is not None and not isinstance(r, RemotingCommand):
                    self._spawn(cmd, r)
                    return
                resp = r
        self._answer(cmd, resp)

    def _spawn(self, cmd: RemotingCommand, pending: Awaitable[RemotingCommand | None] | None) -> None:
        """A task for the request: the handler's awaitable itself (no coroutine around it, so a
        task cancelled before its first step leaves nothing unawaited), or, for a request queued
        behind one that has not started, the handler called in the task."""
        self._unstarted += 1
        loop = asyncio.get_running_loop()
        if pending is None:
            t = loop.create_task(self._handle(cmd))
        else:
            t = loop.create_task(pending if asyncio.iscoroutine(pending) else _awaited(pending))
            loop.call_soon(self._started)  # runs right after the task's first step
        self._tasks.add(t)
        t.add_done_callback(lambda t, cmd=cmd: self._finished(cmd, t))

    def _started(self) -> None:
        self._unstarted -= 1

    async def _handle(self, cmd: RemotingCommand) -> RemotingCommand | None:
        self._unstarted -= 1
        if self.handler is None:
            return cmd.response(ResponseCode.REQUEST_CODE_NOT_SUPPORTED,
                                remark=f" request type {cmd.code} not supported")
        r = self.handler(cmd, self)
        return await r if r is not None and not isinstance(r, RemotingCommand) else r

    def _finished(self, cmd: RemotingCommand, t: asyncio.Task) -> None:
        self._tasks.discard(t)
        if t.cancelled():
            return
        e = t.exception()
        if e is None:
            self._answer(cmd, t.result())
        elif isinstance(e, Exception):
            self._answer(cmd, self._handler_failed(cmd, e))
        # anything else (KeyboardInterrupt, SystemExit) was raised by the loop already

    def _handler_failed(self, cmd: RemotingCommand, e: Exception) -> RemotingCommand:
        """A handler bug: SYSTEM_ERROR with the exception, as NettyRemotingAbstract answers it
        (`UtilAll.exceptionSimpleDesc`), and one WARNING line naming where it was raised; the
        traceback goes to DEBUG, so hostile input cannot fill the log with them."""
        tb = e.__traceback__
        while tb is not None and tb.tb_next is not None:
            tb = tb.tb_next
        where = f"{tb.tb_frame.f_code.co_filename.rsplit('/', 1)[-1]}:{tb.tb_lineno}" if tb is not None else "?"
        desc = str(e).replace("\n", "\\n")  # one log line, whatever the exception carries
        if len(desc) > 200:
            desc = desc[:197] + "..."
        log.warning("request code %s from %s failed: %s: %s (at %s)", cmd.code, self.peer, e.__class__.__name__,
                    desc, where)
        log.debug("request code %s failed", cmd.code, exc_info=e)
        return cmd.response(ResponseCode.SYSTEM_ERROR, remark=f"{e.__class__.__name__}: {desc}")

    def _answer(self, cmd: RemotingCommand, resp: RemotingCommand | None) -> None:
        if resp is None or cmd.flag & ONEWAY_FLAG:
            return
        resp.opaque = cmd.opaque
        resp.flag |= RESPONSE_FLAG
        head, body = resp.encode_parts()
        out = self._out
        if out is not None:
            out.append(head)
            if body:
                out.append(body)
        elif body:
            self.writer.writelines((head, body))
        else:
            self.writer.write(head)

    # ------------------------------------------------------------ requests we send
    def write(self, cmd: RemotingCommand) -> None:
        self.writer.write(cmd.encode())

    async def request(self, cmd: RemotingCommand, timeout: float = 3.0) -> RemotingCommand:
        """Send a request and wait for the response with the same opaque."""
        if self.closed.is_set():
            raise RemotingError(f"connection to {self.peer} is closed")
        fut: asyncio.Future[RemotingCommand] = asyncio.get_running_loop().create_future()
        self._pending[cmd.opaque] = fut
        try:
            self.write(cmd)
            await self._drain()
            return await asyncio.wait_for(fut, timeout)
        except asyncio.TimeoutError:
            raise RemotingError(f"no response from {self.peer} within {timeout:g}s (code {cmd.code})") from None
        except (ConnectionError, OSError) as e:
            raise RemotingError(f"connection to {self.peer} failed: {e}") from None
        finally:
            self._pending.pop(cmd.opaque, None)

    async def oneway(self, cmd: RemotingCommand) -> None:
        cmd.flag |= ONEWAY_FLAG
        self.write(cmd)
        with contextlib.suppress(ConnectionError, OSError):
            await self._drain()

    # ------------------------------------------------------------ lifecycle
    async def run(self) -> None:
        """Wait until the connection is closed (reading happens in `data_received`)."""
        await self.closed.wait()

    def _shutdown(self) -> None:
        """Mark closed, fail the requests waiting for an answer, cancel the handler tasks."""
        if self.closed.is_set():
            return
        self.closed.set()
        for fut in self._pending.values():
            if not fut.done():
                fut.set_exception(RemotingError(f"connection to {self.peer} closed"))
        self._pending.clear()
        for t in list(self._tasks):
            t.cancel()

    def _close_now(self) -> None:
        self._shutdown()
        if self.transport is not None:
            with contextlib.suppress(Exception):
                self.transport.close()  # buffered responses are still flushed

    async def close(self) -> None:
        self._close_now()

    def abort(self) -> None:
        """`close` for synchronous callers (a scan on the loop thread that drops a peer)."""
        self._close_now()


class RemotingServer:
    """Accepts connections and serves each with `handler`."""

    def __init__(self, handler: Handler, host: str = "127.0.0.1", port: int = 0,
                 max_frame: int = MAX_FRAME_LENGTH,
                 on_close: Callable[[Connection], None] | None = None,
                 budget: FrameBudget | None = None, stalled_frame_s: float = STALLED_FRAME_S) -> None:
        self.handler, self.host, self.port, self.max_frame = handler, host, port, max_frame
        self.on_close = on_close
        self.budget = budget if budget is not None else FrameBudget()  # servers may share one
        self.stalled_frame_s = stalled_frame_s
        self.connections: set[Connection] = set()
        self._server: asyncio.base_events.Server | None = None
        self._reaper: asyncio.Task | None = None

    async def start(self) -> None:
        loop = asyncio.get_running_loop()
        self._server = await loop.create_server(self._new_connection, self.host, self.port, reuse_address=True)
        self.port = self._server.sockets[0].getsockname()[1]
        self._reaper = loop.create_task(self._reap_stalled())

    async def _reap_stalled(self) -> None:
        """Close connections whose partial frame got no byte for `stalled_frame_s` (120 s, Netty's
        serverChannelMaxIdleTimeSeconds): a frame held open forever would keep its share of the
        budget for partial frames from the others. Connections the budget made wait are not theirs
        to blame and are left alone."""
        period = max(0.05, min(5.0, self.stalled_frame_s / 4))
        while True:
            await asyncio.sleep(period)
            cut = time.monotonic() - self.stalled_frame_s
            for conn in [c for c in self.connections if c.reserved and 0 < c.partial_progress < cut]:
                log.warning("closing %s: its %d-byte frame got no data for %g s", conn.peer, conn.reserved,
                            self.stalled_frame_s)
                conn.abort()

    def _new_connection(self) -> Connection:
        conn = Connection(self.handler, self.max_frame, on_lost=self._lost, budget=self.budget)
        self.connections.add(conn)
        return conn

    def _lost(self, conn: Connection) -> None:
        self.connections.discard(conn)
        if self.on_close:
            self.on_close(conn)

    async def close(self) -> None:
        if self._reaper is not None:
            self._reaper.cancel()
        if self._server:
            self._server.close()
        for c in list(self.connections):
            await c.close()
        if self._server:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._server.wait_closed(), 2)


async def connect(addr: str | Host, handler: Handler | None = None, timeout: float = 3.0) -> Connection:
    """Open a channel to `host:port`; incoming frames are read by the loop from then on."""
    host = addr if isinstance(addr, Host) else Host.parse(addr) if addr[:1] == "[" else _host(addr)
    loop = asyncio.get_running_loop()
    try:
        _, conn = await asyncio.wait_for(
            loop.create_connection(lambda: Connection(handler), host.ip, host.port), timeout)
    except (OSError, asyncio.TimeoutError) as e:
        raise RemotingError(f"cannot connect to {host}: {e or 'timeout'}") from None
    return conn


def _host(addr: str) -> Host:
    ip, _, port = addr.rpartition(":")
    if not ip or not port.isdigit():
        raise RemotingError(f"bad address {addr!r}: expected HOST:PORT")
    return Host(ip, int(port))


async def _awaited(a: Awaitable[RemotingCommand | None]) -> RemotingCommand | None:
    return await a
