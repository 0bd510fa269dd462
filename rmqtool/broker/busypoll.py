"""Busy polling after a request: serve's loop polls for the next request instead of sleeping.

A synchronous producer or a puller sends its next request a few hundred microseconds after
the answer to its last. A loop that slept in `epoll_wait` meanwhile is woken by the kernel when
the request lands, and starts on it late and on cold caches, often on the core the client has
just used. Under `benchmarks/serve.py`'s Java clients on two cores, five interleaved runs on
2026-12-05 gave one producer's single sends 1.16-1.85x their rate without polling, its batches
1.19-1.52x, pulls 1.01-1.39x.

So for `budget_s` after the broker last had work, the loop keeps a callback ready
(`call_soon`), which makes each of its passes poll the sockets without waiting (uvloop and
asyncio alike) and run this check again. Once the budget has passed with no request the
callback stops and the loop sleeps as before: an idle broker costs no CPU. The budget counts
from the first pass after the work, not from the request's start, so a request that took long
to handle still gets the whole budget to wait for its successor.

It polls only while requests come from at most two connections (in 10 ms): with more, the
loop is rarely idle, and what it would spin away is the CPU the clients themselves need on a
machine they share (polling always, three runs gave 4 and 16 producers 0.83-1.19 of the rate
without it, below 1.0 in eight of their twelve cases). A window with more connections stops the
polling at once; the first window with few again lets it resume.

Polling also pauses when it is in vain: a client whose turn is longer than the budget (a test,
a script between its requests) would only lose the budget's CPU after each request. Each request
that arrives while the loop polls scores one, each budget polled to its end costs two (at most
eight banked); when the score would fall below zero polling pauses for 100 ms, after which the
next request gets one budget to try again. So polling goes on while at least two idle spells in
three end with a request, and a slow client costs one budget per 100 ms.

Linux's socket busy polling (SO_BUSY_POLL, net.core.busy_poll) does the same in the kernel for
network devices with NAPI, which loopback is not. Apache's broker waits in epoll_wait too, but
with a thread per stage its next request rarely finds every thread asleep; this loop is one.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the CLI reads DEFAULT_BUDGET_US for its help without loading asyncio
    import asyncio

DEFAULT_BUDGET_US = 500  # serve's --busy-poll: longer than a synchronous client's turn, short when idle
MAX_CONNECTIONS = 2  # polling only while requests come from at most this many connections...
WINDOW_S = 0.01  # ...in a window of this long
SCORE_MAX = 8  # a caught request scores 1, a vain budget costs 2: polling goes on while 2 in 3 catch one
PAUSE_S = 0.1  # after budgets polled in vain, no polling for this long (then one budget to try again)


class BusyPoll:
    """Keeps `loop` polling for `budget_s` after the last `touch()` (a request handled), while
    requests come from at most `max_connections` connections (within `WINDOW_S`) and polling
    has been catching them."""

    __slots__ = ("_loop", "_budget", "_max", "_touched", "_idle_since", "_spinning", "_window_end", "_conns",
                 "_many", "_score", "_off_until", "passes", "hits", "misses")

    def __init__(self, loop: asyncio.AbstractEventLoop, budget_s: float,
                 max_connections: int = MAX_CONNECTIONS) -> None:
        self._loop = loop
        self._budget = budget_s
        self._max = max_connections
        self._touched = False  # a request since the last pass
        self._idle_since = 0.0
        self._spinning = False
        self._window_end = 0.0
        self._conns: set[int] = set()  # ids of the connections that sent requests in this window
        self._many = False  # more than _max of them, in this window or the last
        self._score = 0  # a request caught while polling: +1; a budget polled in vain: -2
        self._off_until = 0.0  # polling paused until then (a vain budget took the score below 0)
        self.passes = 0  # loop passes spent polling (tests, diagnostics)
        self.hits = 0  # requests that came while polling
        self.misses = 0  # budgets polled in vain

    @property
    def spinning(self) -> bool:
        return self._spinning

    def touch(self, conn: object = None) -> None:
        """A request arrived on `conn`: poll from its end for the next one, unless many
        connections are sending (the loop is then rarely idle, and the cores are the clients')
        or polling has lately been in vain (a client slower than the budget)."""
        now = time.monotonic()
        conns = self._conns
        if now >= self._window_end:
            self._many = len(conns) > self._max
            conns.clear()
            self._window_end = now + WINDOW_S
        conns.add(id(conn))
        if len(conns) > self._max:
            self._many = True
        if self._many:
            return
        if self._spinning:
            if not self._touched:  # the loop was polling for it
                self.hits += 1
                if self._score < SCORE_MAX:
                    self._score += 1
            self._touched = True
            return
        if now < self._off_until:
            return
        self._touched = True
        self._spinning = True
        self._loop.call_soon(self._spin)

    def _spin(self) -> None:
        now = time.monotonic()
        if self._many:
            self._spinning = False
            return
        if self._touched:  # the first pass after the work: the idle time starts here
            self._touched = False
            self._idle_since = now
        elif now - self._idle_since >= self._budget:
            self._spinning = False
            self.misses += 1
            self._score -= 2
            if self._score < 0:
                self._score = 0
                self._off_until = now + PAUSE_S
            return
        self.passes += 1
        self._loop.call_soon(self._spin)
