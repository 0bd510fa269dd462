"""`ProcessQueue`: the messages pulled from one queue and not yet consumed.

The committed offset can never pass a message still held here (at-least-once): `remove` returns
the smallest offset still cached, or one past the largest ever put when the cache is empty.
"""

from __future__ import annotations

import heapq
import time

from rmqtool.layouts.message import MessageExt

REBALANCE_LOCK_MAX_LIVE_TIME = 30.0  # s, ProcessQueue.REBALANCE_LOCK_MAX_LIVE_TIME


class ProcessQueue:
    def __init__(self) -> None:
        self.msgs: dict[int, MessageExt] = {}
        self._heap: list[int] = []
        self.queue_offset_max = -1
        self.dropped = False
        self.locked = False
        self.last_lock_timestamp = 0.0
        self.caught_up = False  # the last pull reached the queue's max offset
        self.consuming: dict[int, MessageExt] = {}  # orderly: taken but not committed
        self.consumed_count = 0
        self.last_pull_ms = 0  # ProcessQueueInfo's lastPullTimestamp / lastConsumeTimestamp
        self.last_consume_ms = int(time.time() * 1000)

    @property
    def msg_count(self) -> int:
        return len(self.msgs) + len(self.consuming)

    def put(self, msgs: list[MessageExt]) -> None:
        self.last_pull_ms = int(time.time() * 1000)
        for m in msgs:
            if m.queue_offset not in self.msgs:
                self.msgs[m.queue_offset] = m
                heapq.heappush(self._heap, m.queue_offset)
            if m.queue_offset > self.queue_offset_max:
                self.queue_offset_max = m.queue_offset

    def _first(self) -> int | None:
        while self._heap and self._heap[0] not in self.msgs:
            heapq.heappop(self._heap)
        return self._heap[0] if self._heap else None

    def max_span(self) -> int:
        first = self._first()
        return 0 if first is None else self.queue_offset_max - first

    def remove(self, msgs: list[MessageExt]) -> int:
        """Drop consumed messages; the offset to commit, -1 if nothing was cached."""
        self.last_consume_ms = int(time.time() * 1000)
        if not self.msgs:
            return -1
        for m in msgs:
            if self.msgs.pop(m.queue_offset, None) is not None:
                self.consumed_count += 1
        first = self._first()
        return self.queue_offset_max + 1 if first is None else first

    # ---- orderly ---------------------------------------------------------------------------------
    def take(self, n: int) -> list[MessageExt]:
        self.last_consume_ms = int(time.time() * 1000)
        out = []
        while len(out) < n:
            first = self._first()
            if first is None:
                break
            m = self.msgs.pop(first)
            self.consuming[first] = m
            out.append(m)
        return out

    def commit(self) -> int:
        """Orderly success: one past the last message taken; -1 if none."""
        if not self.consuming:
            return -1
        off = max(self.consuming) + 1
        self.consumed_count += len(self.consuming)
        self.consuming.clear()
        return off

    def make_again(self, msgs: list[MessageExt]) -> None:
        for m in msgs:
            self.consuming.pop(m.queue_offset, None)
            self.msgs[m.queue_offset] = m
            heapq.heappush(self._heap, m.queue_offset)

    def lock_expired(self) -> bool:
        return time.monotonic() - self.last_lock_timestamp > REBALANCE_LOCK_MAX_LIVE_TIME
