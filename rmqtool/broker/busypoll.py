"""Busy polling after a request: serve's loop polls for the next request instead of sleeping.

A synchronous producer or a puller sends its next request a few hundred microseconds after
the answer to its last. A loop that slept in `epoll_wait` meanwhile is woken by the kernel when
the request lands, and starts on it late and on cold caches, often on the core the client has
just used. Under `benchmarks/serve.py`'s Java clients on two cores that wake-up cost one
producer's sends and pulls about a quarter of their rate (2026-12-05: single sends and batches
from one producer 1.3-1.5x with polling, pulls 1.2-1.4x; from 4 and 16 producers, when the loop
is rarely idle anyway, within the machine's noise).

So for `budget_s` after the broker last had work, the loop keeps a callback ready
(`call_soon`), which makes each of its passes poll the sockets without waiting (uvloop and
asyncio alike) and run this check again. Once the budget has passed with no request the
callback stops and the loop sleeps as before: an idle broker costs no CPU. The budget counts
from the first pass after the work, not from the request's start, so a request that took long
to handle still gets the whole budget to wait for its successor.

Linux's socket busy polling (SO_BUSY_POLL, net.core.busy_poll) does the same in the kernel for
network devices with NAPI, which loopback is not; Netty's epoll transport has no equivalent and
Apache's broker keeps a thread per stage instead, which this one-thread loop cannot.
"""

from __future__ import annotations

import asyncio
import time

DEFAULT_BUDGET_US = 500  # serve's --busy-poll: longer than a synchronous client's turn, short when idle


class BusyPoll:
    """Keeps `loop` polling for `budget_s` after the last `touch()` (a request handled)."""

    __slots__ = ("_loop", "_budget", "_touched", "_idle_since", "_spinning", "passes")

    def __init__(self, loop: asyncio.AbstractEventLoop, budget_s: float) -> None:
        self._loop = loop
        self._budget = budget_s
        self._touched = False  # a request since the last pass
        self._idle_since = 0.0
        self._spinning = False
        self.passes = 0  # loop passes spent polling (tests, diagnostics)

    @property
    def spinning(self) -> bool:
        return self._spinning

    def touch(self) -> None:
        """A request arrived: poll from its end for the next one."""
        self._touched = True
        if not self._spinning:
            self._spinning = True
            self._loop.call_soon(self._spin)

    def _spin(self) -> None:
        now = time.monotonic()
        if self._touched:  # the first pass after the work: the idle time starts here
            self._touched = False
            self._idle_since = now
        elif now - self._idle_since >= self._budget:
            self._spinning = False
            return
        self.passes += 1
        self._loop.call_soon(self._spin)
