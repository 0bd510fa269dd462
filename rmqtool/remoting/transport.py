"""asyncio transport shared by the broker, the name server and the client.

One TCP connection carries many requests at once: each request is handled in its own task and
answered by opaque, out of order (a held pull must not block a send on the same socket).
Either side may send requests (the broker sends NOTIFY_CONSUMER_IDS_CHANGED and
CHECK_TRANSACTION_STATE to clients). A malformed frame closes that connection only.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable

from rmqtool.errors import RemotingError
from rmqtool.layouts.net import Host
from rmqtool.remoting.codes import ResponseCode
from rmqtool.remoting.command import MAX_FRAME_LENGTH, FrameError, FrameReader, RemotingCommand

log = logging.getLogger("rmqtool.remoting")

Handler = Callable[[RemotingCommand, "Connection"], Awaitable[RemotingCommand | None]]


class Connection:
    """One remoting channel: request/response matching, oneway sends, incoming requests."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                 handler: Handler | None = None, max_frame: int = MAX_FRAME_LENGTH) -> None:
        self.reader, self.writer, self.handler = reader, writer, handler
        self._frames = FrameReader(max_frame)
        self._pending: dict[int, asyncio.Future[RemotingCommand]] = {}
        self._tasks: set[asyncio.Task] = set()
        self.closed = asyncio.Event()
        peer = writer.get_extra_info("peername") or ("0.0.0.0", 0)
        local = writer.get_extra_info("sockname") or ("0.0.0.0", 0)
        self.peer = Host(str(peer[0]), int(peer[1]))
        self.local = Host(str(local[0]), int(local[1]))
        self.attrs: dict[str, object] = {}  # per-channel state kept by handlers (client id, ...)

    def write(self, cmd: RemotingCommand) -> None:
        if not self.writer.is_closing():
            self.writer.write(cmd.encode())

    async def request(self, cmd: RemotingCommand, timeout: float = 3.0) -> RemotingCommand:
        """Send a request and wait for the response with the same opaque."""
        if self.closed.is_set():
            raise RemotingError(f"connection to {self.peer} is closed")
        fut: asyncio.Future[RemotingCommand] = asyncio.get_running_loop().create_future()
        self._pending[cmd.opaque] = fut
        try:
            self.write(cmd)
            await self.writer.drain()
            return await asyncio.wait_for(fut, timeout)
        except asyncio.TimeoutError:
            raise RemotingError(f"no response from {self.peer} within {timeout:g}s (code {cmd.code})") from None
        except (ConnectionError, OSError) as e:
            raise RemotingError(f"connection to {self.peer} failed: {e}") from None
        finally:
            self._pending.pop(cmd.opaque, None)

    async def oneway(self, cmd: RemotingCommand) -> None:
        cmd.flag |= 0x2
        self.write(cmd)
        with contextlib.suppress(ConnectionError, OSError):
            await self.writer.drain()

    async def run(self) -> None:
        """Read frames until EOF or a malformed frame, then close."""
        try:
            while True:
                data = await self.reader.read(256 * 1024)
                if not data:
                    break
                for cmd in self._frames.feed(data):
                    if cmd.is_response:
                        fut = self._pending.pop(cmd.opaque, None)
                        if fut is not None and not fut.done():
                            fut.set_result(cmd)
                    else:
                        t = asyncio.create_task(self._handle(cmd))
                        self._tasks.add(t)
                        t.add_done_callback(self._tasks.discard)
        except FrameError as e:
            log.warning("closing %s: malformed frame: %s", self.peer, e)
        except (ConnectionError, OSError):
            pass
        finally:
            await self.close()

    async def _handle(self, cmd: RemotingCommand) -> None:
        if self.handler is None:
            resp = cmd.response(ResponseCode.REQUEST_CODE_NOT_SUPPORTED,
                                remark=f" request type {cmd.code} not supported")
        else:
            try:
                resp = await self.handler(cmd, self)
            except asyncio.CancelledError:
                raise
            except Exception as e:  # a handler bug answers SYSTEM_ERROR, the server stays up
                log.exception("handler failed for code %s", cmd.code)
                resp = cmd.response(ResponseCode.SYSTEM_ERROR, remark=f"{e.__class__.__name__}: {e}")
        if resp is not None and not cmd.is_oneway:
            resp.opaque = cmd.opaque
            resp.flag |= 0x1
            self.write(resp)
            with contextlib.suppress(ConnectionError, OSError):
                await self.writer.drain()

    async def close(self) -> None:
        if self.closed.is_set():
            return
        self.closed.set()
        for fut in self._pending.values():
            if not fut.done():
                fut.set_exception(RemotingError(f"connection to {self.peer} closed"))
        self._pending.clear()
        for t in list(self._tasks):
            t.cancel()
        with contextlib.suppress(Exception):
            self.writer.close()


class RemotingServer:
    """Accepts connections and serves each with `handler`."""

    def __init__(self, handler: Handler, host: str = "127.0.0.1", port: int = 0,
                 max_frame: int = MAX_FRAME_LENGTH,
                 on_close: Callable[[Connection], None] | None = None) -> None:
        self.handler, self.host, self.port, self.max_frame = handler, host, port, max_frame
        self.on_close = on_close
        self.connections: set[Connection] = set()
        self._server: asyncio.base_events.Server | None = None

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._accept, self.host, self.port, limit=1 << 20,
                                                  reuse_address=True)
        self.port = self._server.sockets[0].getsockname()[1]

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        conn = Connection(reader, writer, self.handler, self.max_frame)
        self.connections.add(conn)
        try:
            await conn.run()
        finally:
            self.connections.discard(conn)
            if self.on_close:
                self.on_close(conn)

    async def close(self) -> None:
        if self._server:
            self._server.close()
        for c in list(self.connections):
            await c.close()
        if self._server:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._server.wait_closed(), 2)


async def connect(addr: str | Host, handler: Handler | None = None, timeout: float = 3.0) -> Connection:
    """Open a channel to `host:port` and start reading it in the background."""
    host = addr if isinstance(addr, Host) else Host.parse(addr) if addr[:1] == "[" else _host(addr)
    try:
        reader, writer = await asyncio.wait_for(asyncio.open_connection(host.ip, host.port, limit=1 << 20), timeout)
    except (OSError, asyncio.TimeoutError) as e:
        raise RemotingError(f"cannot connect to {host}: {e or 'timeout'}") from None
    conn = Connection(reader, writer, handler)
    task = asyncio.create_task(conn.run())
    conn.attrs["reader_task"] = task
    return conn


def _host(addr: str) -> Host:
    ip, _, port = addr.rpartition(":")
    if not ip or not port.isdigit():
        raise RemotingError(f"bad address {addr!r}: expected HOST:PORT")
    return Host(ip, int(port))
