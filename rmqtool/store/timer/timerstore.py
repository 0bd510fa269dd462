"""TimerMessageStore: enqueue timer messages into the TimerLog and wheel, deliver due slots (formats.md §5.4-5.7).

RocketMQ 5.x `TimerMessageStore`, with its five service threads folded into one `run_due(now)`:
1. move the write time to `floor(now)`;
2. enqueue: walk ConsumeQueue `rmq_sys_wheel_timer/0` from `curr_queue_offset`; a message due
   before the write time goes straight to its topic (`TIMER_ENQUEUE_MS = Long.MAX_VALUE`),
   everything else gets a 52-byte TimerLog unit chained into its wheel slot (rolled when beyond
   the roll window, a delete marker when it carries TIMER_DEL_UNIQKEY);
3. dequeue every slot in [read time, write time): walk the chain from lastPos backwards, collect
   the delete keys, write the survivors back to their real topic (or back onto the timer topic
   when rolled);
4. record the progress in `config/timercheck`.

Crash safety is RocketMQ's: the TimerLog is the truth, the wheel is revised from it on load, the
queue offset is re-derived from the last unit, and the read time only moves after a whole slot
was delivered, so a crash repeats work (at-least-once) and never skips it.

This module is the facade (files, state, checkpoint, flush, the service thread); the work is in
its bases, one job each: recovery.py, enqueue.py, dequeue.py, with the pure rules in timerrules.py.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from rmqtool.errors import RmqError
from rmqtool.layouts.constants import TIMER_SLOTS_TOTAL, TIMER_TOPIC
from rmqtool.layouts.message import MessageExt
from rmqtool.store.timer.dequeue import TimerDequeueService
from rmqtool.store.timer.enqueue import TimerEnqueueService
from rmqtool.store.timer.hooks import snap_precision
from rmqtool.store.timer.recovery import TimerRecovery
from rmqtool.store.timer.timercheck import TimerCheckpoint
from rmqtool.store.timer.timerlog import TimerLog
from rmqtool.store.timer.timermetrics import TimerMetrics
from rmqtool.store.timer.timerrules import (
    DEFAULT_TIMERLOG_FILE_SIZE,
    LONG_MAX,
    build_delete_key,
    peek_timer_fields,
    roll_target,
    roll_window_slots,
)
from rmqtool.store.timer.timerwheel import TimerWheel

log = logging.getLogger(__name__)

__all__ = ["DEFAULT_TIMERLOG_FILE_SIZE", "LONG_MAX", "TimerMessageStore", "build_delete_key", "peek_timer_fields",
           "roll_target", "roll_window_slots"]


class TimerMessageStore(TimerRecovery, TimerEnqueueService, TimerDequeueService):
    """The timer store of one store root (`timerlog/`, `timerwheel`, `config/timercheck`)."""

    name = "timer-message-store"

    def __init__(self, store: Any, *, clock: Callable[[], int] | None = None, read_only: bool = False) -> None:
        self.store = store
        cfg = store.config
        self.root = Path(cfg.store_path_root_dir)
        self.clock = clock or getattr(store, "clock", None) or (lambda: int(time.time() * 1000))
        self.read_only = read_only
        self.precision_ms = snap_precision(int(getattr(cfg, "timer_precision_ms", 1000)))
        self.slots_total = TIMER_SLOTS_TOTAL
        self.timer_roll_window_slots = roll_window_slots(int(getattr(cfg, "timer_roll_window_slot", 172_800)),
                                                         self.slots_total)
        self.flush_interval_ms = int(getattr(cfg, "timer_flush_interval_ms", 1000))
        self._window_ms = self.timer_roll_window_slots * self.precision_ms
        self._warm: tuple[int, int, tuple[list[tuple[MessageExt, bool]], dict[str, int]]] | None = None
        self._warm_ahead_ms = 300
        self._closed = False
        self.timer_log = TimerLog(self.root / "timerlog",
                                  int(getattr(cfg, "mapped_file_size_timer_log", DEFAULT_TIMERLOG_FILE_SIZE)),
                                  read_only=read_only)
        self.timer_wheel = TimerWheel(self.root / "timerwheel", self.slots_total, self.precision_ms,
                                      read_only=read_only)
        self.timer_checkpoint = TimerCheckpoint(self.root / "config" / "timercheck", read_only=read_only)
        self.timer_metrics = TimerMetrics(self.root / "config", read_only=read_only)
        self.timer_metrics.load()
        self.curr_read_time_ms = 0
        self.curr_write_time_ms = 0
        self.commit_read_time_ms = 0
        self.curr_queue_offset = 0
        self.commit_queue_offset = 0
        self._last_commit = (-1, -1)
        self._last_flush = 0
        self._last_expire = 0
        self._failed_run = False  # the last run's put failed: retry after Java's idle wait
        self._lock = threading.RLock()
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()
        self._wake = threading.Event()
        self.enqueued = 0  # units written since open (for benchmarks and tests)
        self.delivered = 0
        self.timer_log.load()
        self.recover()

    # -- recovery --------------------------------------------------------------------------------

    def _format(self, time_ms: int) -> int:
        return time_ms // self.precision_ms * self.precision_ms

    def maybe_move_write_time(self, now_ms: int) -> None:
        if self.curr_write_time_ms < self._format(now_ms):
            self.curr_write_time_ms = self._format(now_ms)

    # -- reading the CommitLog -------------------------------------------------------------------
    def _look(self, offset_py: int, size_py: int) -> MessageExt | None:
        try:
            return self.store.look_message_by_offset(offset_py, size_py)
        except RmqError:
            return None

    # -- enqueue ---------------------------------------------------------------------------------

    # -- checkpoint ------------------------------------------------------------------------------
    def prepare_timer_checkpoint(self) -> None:
        """`prepareTimerCheckPoint` for a node that runs dequeue (a master)."""
        cp = self.timer_checkpoint
        cp.value.last_timer_log_flush_pos = self.timer_log.flushed_where
        cp.value.last_read_time_ms = self.commit_read_time_ms
        cp.value.master_timer_queue_offset = self.commit_queue_offset
        if (self.commit_read_time_ms, self.commit_queue_offset) != self._last_commit:
            cp.update_data_version(0, self.clock())
            self._last_commit = (self.commit_read_time_ms, self.commit_queue_offset)
        cp.value.last_timer_queue_offset = min(self.commit_queue_offset, cp.value.master_timer_queue_offset)

    def flush(self) -> None:
        """`TimerFlushService` body: timerlog, wheel, then the checkpoint that refers to them."""
        if self.read_only or self._closed:
            return
        with self._lock:
            self.prepare_timer_checkpoint()
            self.timer_log.flush()
            self.timer_wheel.flush()
            self.prepare_timer_checkpoint()
            self.timer_checkpoint.flush()
            self.timer_metrics.persist()

    # -- the service -----------------------------------------------------------------------------
    def run_due(self, now_ms: int | None = None) -> int:
        """Enqueue what is new, deliver what is due by `now_ms`; returns messages delivered."""
        if self.read_only or self._closed:
            return 0
        now = self.clock() if now_ms is None else now_ms
        with self._lock:
            if self._closed:
                return 0
            self.maybe_move_write_time(now)
            delivered = 0
            try:
                delivered += self.enqueue(now)
                delivered += self.dequeue(now)
                self.warm_next_slot(now)
                self._failed_run = False
            except RmqError as e:  # a put failed: the offsets did not move, the next run retries
                # at most one line per 10 s: a full disk fails every retry until space returns
                self._failed_run = True
                self._put_failures = getattr(self, "_put_failures", 0) + 1
                if now - getattr(self, "_put_failure_logged", -(1 << 62)) >= 10_000:
                    log.warning("timer service: %s; will retry (%d failed runs)", e, self._put_failures)
                    self._put_failure_logged = now
                    self._put_failures = 0
            self.prepare_timer_checkpoint()
            self.timer_checkpoint.write()  # a no-op unless the progress moved since the last write
            # both on multiples of their interval, so that at 1 s precision they share the run
            # that the slot boundary wakes rather than waking the thread once more
            if now - self._last_flush >= self.flush_interval_ms:
                self.flush()
                self._last_flush = now - now % max(1, self.flush_interval_ms)
            if now - self._last_expire >= 30_000:
                self._last_expire = now - now % 30_000
                min_phy = getattr(self.store, "min_phy_offset", None)
                if isinstance(min_phy, int):
                    self.timer_log.delete_expired_by_offset(min_phy)
        return delivered

    def wakeup(self, topic: str = TIMER_TOPIC, queue_id: int = 0) -> None:
        """Arrival listener: a message was parked on the timer topic; let the thread enqueue it now.

        Only records on `rmq_sys_wheel_timer` give the enqueue anything to do (delivery runs on
        the thread's own clock), so other queues never wake it: a wake-up per stored message
        made every send pay a thread switch and an idle `run_due`.
        """
        if topic != TIMER_TOPIC:
            return
        if not self._wake.is_set():  # set() takes the Event's lock even when already set
            self._wake.set()

    def start(self) -> None:
        if self._thread is not None or self.read_only:
            return
        self._stop.clear()
        self._thread = threading.Thread(target=self._loop, name="TimerMessageStore", daemon=True)
        self._thread.start()

    def next_run_ms(self, now_ms: int) -> int:
        """When the next `run_due` has work to do if no message arrives on the timer topic.

        Java's services poll: TimerEnqueueGetService and TimerDequeueGetService wait
        `100 * precisionMs / 1000` ms (100 ms at 1 s precision) whenever a round found nothing,
        TimerFlushService `timerFlushIntervalMs`. Here an arrival wakes the thread (`wakeup`), so
        without one the next work is known: the write time reaching the next slot boundary (the
        read-time slot becomes due), the warm-up of that slot shortly before it when it holds
        units, the flush interval, the 30 s TimerLog expiry; a failed put retries after Java's
        idle wait. Polling every 10 ms instead cost ~15 ms of CPU a second on an idle broker.
        """
        p = self.precision_ms
        if self._failed_run:
            return now_ms + max(1, p // 10)
        floor_now = self._format(now_ms)
        if self.curr_read_time_ms < floor_now:
            return now_ms  # a boundary passed while the last run went on
        due = floor_now + p
        t = self.curr_read_time_ms
        if (self._warm is None or self._warm[0] != t) and self.timer_wheel.slot_time_matches(t):
            due = min(due, max(now_ms, t + p - self._warm_ahead_ms))
        return min(due, self._last_flush + self.flush_interval_ms, self._last_expire + 30_000)

    def _loop(self) -> None:
        cap = max(self.precision_ms, 1) / 1000  # a clock that jumps never leaves the thread asleep long
        while not self._stop.is_set():
            now = self.clock()
            self._wake.wait(min(cap, max(0.001, (self.next_run_ms(now) - now) / 1000)))
            self._wake.clear()
            try:
                self.run_due()
            except Exception:  # noqa: BLE001 - Java holds a moment and goes on
                log.exception("timer service run failed")
                time.sleep(0.05)

    def stop(self) -> None:
        """Stop the thread, flush, and release the files (LocalBroker.close calls this)."""
        if self._thread is not None:
            self._stop.set()
            self._wake.set()
            self._thread.join(timeout=10)
            self._thread = None
        with self._lock:
            if self._closed:
                return
            self.flush()
            self._closed = True
            self.timer_wheel.close()
            self.timer_log.close()
            self.timer_checkpoint.close()

    close = stop

    # -- introspection ---------------------------------------------------------------------------
    def pending_count(self) -> int:
        """`getAllCongestNum`: messages waiting in the wheel from the read time on."""
        return self.timer_wheel.get_all_num(self.curr_read_time_ms)
