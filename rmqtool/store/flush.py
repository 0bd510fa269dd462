"""Flushing: a background thread that makes appended data durable (FlushRealTimeService / GroupCommitService).

ASYNC_FLUSH: the thread flushes every `interval_ms`. SYNC_FLUSH: a putter calls `wait_flushed`
with the end offset of its records and sleeps until the thread has flushed that far; the thread
flushes once up to everything appended so far and wakes every waiter, so many concurrent
putters share one fdatasync (group commit).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable


class FlushService:
    """One flusher thread; `flush_fn()` flushes everything appended and returns the durable offset."""

    def __init__(self, flush_fn: Callable[[], int], idle_fn: Callable[[], None], interval_ms: int,
                 idle_interval_ms: int = 1000) -> None:
        self.flush_fn = flush_fn
        self.idle_fn = idle_fn  # ConsumeQueue/index/checkpoint flush, at most every idle_interval_ms
        self.interval = interval_ms / 1000
        self.idle_interval = idle_interval_ms / 1000
        self.cond = threading.Condition()
        self.requested = 0
        self.flushed = 0
        self.error: BaseException | None = None
        self._stop = False
        self._thread = threading.Thread(target=self._run, name="rmqtool-flush", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def wait_flushed(self, offset: int, timeout_s: float) -> bool:
        """Block until `offset` is durable; False on timeout (FLUSH_DISK_TIMEOUT)."""
        with self.cond:
            if self.flushed >= offset:
                return True
            if offset > self.requested:
                self.requested = offset
                self.cond.notify_all()
            deadline = time.monotonic() + timeout_s
            while self.flushed < offset:
                left = deadline - time.monotonic()
                if left <= 0 or self._stop:
                    return self.flushed >= offset
                self.cond.wait(left)
            return True

    def _run(self) -> None:
        last_idle = time.monotonic()
        while True:
            with self.cond:
                if not self._stop and self.requested <= self.flushed:
                    self.cond.wait(self.interval)
                stop = self._stop
            try:
                done = self.flush_fn()
                now = time.monotonic()
                if stop or now - last_idle >= self.idle_interval:
                    self.idle_fn()
                    last_idle = now
            except BaseException as e:  # noqa: BLE001 - reported to putters, never lost silently
                self.error = e
                done = self.flushed
            with self.cond:
                self.flushed = max(self.flushed, done)
                self.cond.notify_all()
            if stop:
                return

    def stop(self) -> None:
        with self.cond:
            self._stop = True
            self.cond.notify_all()
        if self._thread.is_alive():
            self._thread.join()
