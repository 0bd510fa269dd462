"""Queue locks for orderly consumers: `RebalanceLockManager` (protocol.md §4.11).

A queue is held by (group, clientId); the lock lapses 60 s after the holder last locked it.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from rmqtool.remoting.bodies import MessageQueue

LOCK_MAX_LIVE_TIME_MS = 60_000


class RebalanceLockManager:
    def __init__(self, clock: Callable[[], int] | None = None, max_live_ms: int = LOCK_MAX_LIVE_TIME_MS) -> None:
        self.clock = clock or (lambda: int(time.time() * 1000))
        self.max_live_ms = max_live_ms
        self.table: dict[str, dict[MessageQueue, tuple[str, int]]] = {}

    def _held_by(self, group: str, mq: MessageQueue, now: int) -> str | None:
        entry = self.table.get(group, {}).get(mq)
        if entry is None or now - entry[1] > self.max_live_ms:
            return None
        return entry[0]

    def try_lock_batch(self, group: str, mqs: list[MessageQueue], client_id: str) -> list[MessageQueue]:
        """Lock what is free, expired or already ours (refreshing it); return the queues we now hold."""
        now = self.clock()
        locks = self.table.setdefault(group, {})
        out = []
        for mq in mqs:
            holder = self._held_by(group, mq, now)
            if holder is None or holder == client_id:
                locks[mq] = (client_id, now)
                out.append(mq)
        return out

    def unlock_batch(self, group: str, mqs: list[MessageQueue], client_id: str) -> None:
        locks = self.table.get(group)
        if not locks:
            return
        for mq in mqs:
            entry = locks.get(mq)
            if entry is not None and entry[0] == client_id:
                del locks[mq]
        if not locks:
            del self.table[group]
