"""Answers that follow the config writes their request made.

Java's `TopicConfigManager` and `SubscriptionGroupManager` persist in the request thread: when a
client is told its topic or group exists, the file saying so is on disk. rmqtool writes config
files from a background thread (`ConfigWriter`, never an fsync on the event loop); the dispatch
collects, per request, the futures of the writes it asked for (`jsonconfig.durable_waits`) and
sends the answer once they are resolved. The loop serves other requests meanwhile, and requests
that arrive during a write share the next one.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from concurrent.futures import Future
from typing import Any

from rmqtool.remoting.command import RemotingCommand
from rmqtool.store.jsonconfig import durable_waits

log = logging.getLogger("rmqtool.broker")

DURABLE_WAIT_S = 10.0  # an answer waits at most this long for its write (a stuck disk answers anyway)


def call_collecting(fn: Callable[..., Any], *args: Any) -> tuple[Any, list[Future[bool]]]:
    """`fn(*args)` with the config writes it asks for collected: `(result, futures)`."""
    waits: list[Future[bool]] = []
    token = durable_waits.set(waits)
    try:
        return fn(*args), waits
    finally:
        durable_waits.reset(token)


async def answer_after(r: RemotingCommand | Awaitable[RemotingCommand | None] | None,
                       waits: list[Future[bool]]) -> RemotingCommand | None:
    """The response `r` (awaited if need be), once every write in `waits` is on disk.

    Writes asked for while `r` is awaited (the rest of an asynchronous handler) are collected
    too: this coroutine runs in its own task, whose context gets `waits`.
    """
    durable_waits.set(waits)
    if r is not None and not isinstance(r, RemotingCommand):
        r = await r
    i = 0
    while i < len(waits):  # the list may grow while earlier writes are awaited
        fut = waits[i]
        i += 1
        if fut.done():
            continue
        try:
            await asyncio.wait_for(asyncio.shield(asyncio.wrap_future(fut)), DURABLE_WAIT_S)
        except TimeoutError:
            log.warning("a config write took more than %g s; answering before it is on disk", DURABLE_WAIT_S)
            break
    return r
