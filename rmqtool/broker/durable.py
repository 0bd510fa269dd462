"""Answers that follow the config writes their request made.

Java's `TopicConfigManager` and `SubscriptionGroupManager` persist in the request thread: when a
client is told its topic or group exists, the file saying so is on disk. rmqtool writes config
files from a background thread (`ConfigWriter`, never an fsync on the event loop); the dispatch
collects, per request, the futures of the writes it asked for (`jsonconfig.durable_waits`) and
sends the answer once they are resolved. The loop serves other requests meanwhile, and requests
that arrive during a write share the next one.

Collecting costs nothing on the hot path: `serve` sets `durable_waits` once, before its
listeners start, to `REQUEST_SINK`, one list every connection's callbacks then see. A request
that completes in the read callback (a send, a pull: nearly every request) leaves it empty
unless it created a topic or group, so `call_collecting` reads it, calls the processor and reads
it again, without a contextvar set and reset per request. Where the sink is not visible (a
controller driven without `serve`) each request gets a list of its own, set and reset, as before.

A request that has to wait (an `async def` processor, a store call on the pool, a held pull)
is answered by one coroutine, `answer_later`: the processor is called, or its `Later` awaited,
inside it, with a list of the request's own in the contextvar. Nothing is created before that
coroutine's task runs, so a task cancelled before its first step (its connection closed) leaves
no coroutine that was never awaited.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Generator, Sequence
from concurrent.futures import Future
from typing import Any

from rmqtool.remoting.command import RemotingCommand
from rmqtool.store.jsonconfig import durable_waits

log = logging.getLogger("rmqtool.broker")

DURABLE_WAIT_S = 10.0  # an answer waits at most this long for its write (a stuck disk answers anyway)

class _Sink(list):
    """The list `serve` puts in `durable_waits` for its connections (see the module's docstring).

    It keeps a future only while `call_collecting` runs a processor: writes asked for elsewhere
    in contexts that see it (a periodic job, the gRPC front's tasks) are not kept, as nobody
    waited for them before the sink either, so it cannot grow without requests to empty it.
    """

    __slots__ = ("open",)

    def __init__(self) -> None:
        super().__init__()
        self.open = False

    def append(self, fut: Future[bool]) -> None:
        if self.open:
            super().append(fut)


REQUEST_SINK = _Sink()
_NO_WAITS: tuple[Future[bool], ...] = ()


def install_sink() -> None:
    """Make `REQUEST_SINK` the collector of the current context (and of those copied from it:
    listeners started afterwards, their connections' callbacks)."""
    durable_waits.set(REQUEST_SINK)


class Later:
    """An awaitable that builds its coroutine only when awaited.

    Processors that answer synchronously most of the time return one of these when they have to
    wait (`Later(self._hold_pull, ...)`): a coroutine object made at once would be left never
    awaited if the request's task were cancelled before its first step.
    """

    __slots__ = ("fn", "args")

    def __init__(self, fn: Callable[..., Awaitable[Any]], *args: Any) -> None:
        self.fn, self.args = fn, args

    def __await__(self) -> Generator[Any, None, Any]:
        return self.fn(*self.args).__await__()


def call_collecting(fn: Callable[..., Any], *args: Any) -> tuple[Any, Sequence[Future[bool]]]:
    """`fn(*args)` with the config writes it asks for collected: `(result, futures)`."""
    sink = durable_waits.get()
    if sink is REQUEST_SINK:
        sink.open = True
        try:
            r = fn(*args)
        except BaseException:
            sink.open = False
            sink.clear()
            raise
        sink.open = False
        if not sink:
            return r, _NO_WAITS
        waits = sink[:]
        sink.clear()
        return r, waits
    own: list[Future[bool]] = []
    token = durable_waits.set(own)
    try:
        return fn(*args), own
    finally:
        durable_waits.reset(token)


async def answer_later(call: Callable[..., Any] | None, args: tuple[Any, ...],
                       r: RemotingCommand | Awaitable[RemotingCommand | None] | None,
                       waits: Sequence[Future[bool]],
                       on_error: Callable[[Exception], RemotingCommand | None] | None = None,
                       errors: tuple[type[Exception], ...] = ()) -> RemotingCommand | None:
    """The response of a request that waits, once every write it asked for is on disk.

    With `call`, the processor `call(*args)` runs here (an `async def` one); else `r` is what the
    synchronous part returned (a `Later`, or a response whose writes are still in flight).
    `errors` raised meanwhile are answered by `on_error` (the dispatch's error mapping). Writes
    asked for while this runs are collected too: its task's context gets a list of its own.
    """
    own: list[Future[bool]] = list(waits)
    durable_waits.set(own)
    try:
        if call is not None:
            r = call(*args)
        if r is not None and not isinstance(r, RemotingCommand):
            r = await r
    except errors as e:
        if on_error is None:
            raise
        r = on_error(e)
    i = 0
    while i < len(own):  # the list may grow while earlier writes are awaited
        fut = own[i]
        i += 1
        if fut.done():
            continue
        try:
            await asyncio.wait_for(asyncio.shield(asyncio.wrap_future(fut)), DURABLE_WAIT_S)
        except TimeoutError:
            log.warning("a config write took more than %g s; answering before it is on disk", DURABLE_WAIT_S)
            break
    return r
