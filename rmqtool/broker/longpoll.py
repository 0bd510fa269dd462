"""Held pulls: `PullRequestHoldService` + `NotifyMessageArrivingListener` (protocol.md §4.5).

A pull that found nothing new waits here, keyed by (topic, queueId), until a message is
dispatched to that queue or its hold time ends. The store's dispatch listener runs on the
writer's thread; it only wakes the loop when someone is waiting on that queue.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable

Key = tuple[str, int]


class PullHoldService:
    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.waiters: dict[Key, set[asyncio.Future[None]]] = {}
        # the topics of `waiters`' keys, with how many of them: what the store asks before it
        # calls the arrival listener at all (a put on a topic nobody waits on calls nothing)
        self.topics: dict[str, int] = {}
        self._pending: set[Key] = set()
        self._lock = threading.Lock()
        self._scheduled = False

    @property
    def held(self) -> int:
        return sum(len(s) for s in self.waiters.values())

    async def wait(self, topic: str, queue_id: int, timeout: float,
                   arrived: Callable[[], bool] | None = None) -> bool:
        """Wait up to `timeout` s for an arrival on the queue; True when woken by one.

        `arrived` is checked after registering, closing the race with a message that was
        stored between the caller's pull and this wait.
        """
        key = (topic, queue_id)
        fut: asyncio.Future[None] = self.loop.create_future()
        held = self.waiters.get(key)
        if held is None:
            held = self.waiters[key] = set()
            self.topics[topic] = self.topics.get(topic, 0) + 1
        held.add(fut)
        try:
            if arrived is not None and arrived():
                return True
            await asyncio.wait_for(fut, timeout)
            return True
        except asyncio.TimeoutError:
            return False
        finally:
            s = self.waiters.get(key)
            if s is not None:
                s.discard(fut)
                if not s:
                    del self.waiters[key]
                    left = self.topics[topic] - 1
                    if left:
                        self.topics[topic] = left
                    else:
                        del self.topics[topic]

    def notify(self, topic: str, queue_id: int) -> None:
        """Wake the pulls held on (topic, queueId); must run on the loop's thread."""
        for fut in self.waiters.get((topic, queue_id), ()):
            if not fut.done():
                fut.set_result(None)

    def notify_threadsafe(self, topic: str, queue_id: int) -> None:
        """From the store's dispatch thread: coalesce wake-ups into one loop callback."""
        key = (topic, queue_id)
        if key not in self.waiters:
            return
        with self._lock:
            self._pending.add(key)
            if self._scheduled:
                return
            self._scheduled = True
        try:
            self.loop.call_soon_threadsafe(self._drain)
        except RuntimeError:  # loop closed during shutdown
            pass

    def _drain(self) -> None:
        with self._lock:
            keys, self._pending = self._pending, set()
            self._scheduled = False
        for topic, qid in keys:
            self.notify(topic, qid)

    def wake_all(self) -> None:
        for s in list(self.waiters.values()):
            for fut in s:
                if not fut.done():
                    fut.set_result(None)
