"""Recovery of the timer store on load (`TimerMessageStore.recover`, formats.md §5.7).

The TimerLog is the truth: the wheel is revised from the units found after the last flushed
position, and the timer topic's queue offset is re-derived from the last unit, so a crash
repeats work (at-least-once) and never skips it.
"""

from __future__ import annotations

import logging
import struct

from rmqtool.errors import RmqError
from rmqtool.layouts.constants import (
    BLANK_MAGIC_CODE,
    TIMER_BLANK_SLOTS,
    TIMER_MAGIC_DELETE,
    TIMER_TOPIC,
    TIMERLOG_UNIT_SIZE,
)
from rmqtool.layouts.timer import TIMERLOG_UNIT

log = logging.getLogger("rmqtool.store.timer.timerstore")

_RECOVER_CHUNK_UNITS = 16384
_HEAD = struct.Struct(">iqi")  # size, prevPos, magic


class TimerRecovery:
    """`recover` / `recoverAndRevise` of `TimerMessageStore` (a base of it, timerstore.py).

    The files (`timer_log`, `timer_wheel`, `timer_metrics`), the store and the read/write times
    and queue offsets are the facade's attributes; this class holds no state of its own.
    """

    def recover(self) -> None:
        """`TimerMessageStore.recover` (formats.md §5.7)."""
        cp = self.timer_checkpoint.value
        last_flush_pos = cp.last_timer_log_flush_pos
        if self.timer_log.files:
            last_flush_pos -= self.timer_log.file_size
        last_flush_pos = max(last_flush_pos, 0)
        process_offset, last_unit_pos = self._recover_and_revise(last_flush_pos, check_timer_log=True)
        self.timer_log.flushed_where = process_offset

        queue_offset = self._revise_queue_offset(last_unit_pos)
        curr = cp.last_timer_queue_offset if queue_offset == -1 else queue_offset + 1
        curr = min(curr, cp.master_timer_queue_offset)
        if TIMER_TOPIC in self._topic_queues():
            lo = self.store.get_min_offset_in_queue(TIMER_TOPIC, 0)
            hi = self.store.get_max_offset_in_queue(TIMER_TOPIC, 0)
            curr = lo if curr < lo else hi if curr > hi else curr
        self.curr_queue_offset = curr

        now = self._format(self.clock())
        self.curr_read_time_ms = max(cp.last_read_time_ms,
                                     now - self.slots_total * self.precision_ms + TIMER_BLANK_SLOTS * self.precision_ms)
        self.curr_write_time_ms = max(self.curr_write_time_ms, self.curr_read_time_ms)
        if not self.read_only:
            min_first = self.timer_wheel.check_phy_pos(self.curr_read_time_ms, process_offset)
            if min_first < process_offset:
                log.warning("timer recheck because of minFirst:%d processOffset:%d", min_first, process_offset)
                self._recover_and_revise(min_first, check_timer_log=False)
        self.commit_read_time_ms = self.curr_read_time_ms
        self.commit_queue_offset = self.curr_queue_offset
        self.prepare_timer_checkpoint()

    def _topic_queues(self) -> dict[str, list[int]]:
        try:
            return self.store.topic_queues()
        except AttributeError:
            return {TIMER_TOPIC: [0]}

    def _recover_and_revise(self, begin_offset: int, check_timer_log: bool) -> tuple[int, int | None]:
        """`recoverAndRevise`: make the wheel point at every unit found from `begin_offset` on.

        Returns (end of the valid units, position of the last valid unit). Slots whose pointers
        had to change also get `num` recounted from their chain, so the wheel matches the log
        after a crash between a TimerLog append and its slot update.
        """
        files = self.timer_log.files
        if not files:
            return 0, None
        index = len(files) - 1
        while index > 0 and begin_offset < files[index].from_offset:
            index -= 1
        check_offset = files[index].from_offset
        last_unit_pos: int | None = None
        # slot time -> [first unit position seen, last unit position seen], in log order
        seen: dict[int, list[int]] = {}
        fs = self.timer_log.file_size
        stop_all = False
        for f in files[index:]:
            limit = fs if check_timer_log else min(fs, max(0, self.timer_log.wrote_position - f.from_offset))
            position = 0
            done_file = False
            while position < limit and not done_file:
                chunk_len = min(limit - position, _RECOVER_CHUNK_UNITS * TIMERLOG_UNIT_SIZE)
                chunk = self.timer_log.read_raw(f.from_offset + position, chunk_len) or b""
                whole = len(chunk) - len(chunk) % TIMERLOG_UNIT_SIZE
                base = f.from_offset + position
                off = 0
                for size, _prev, magic, cwt, delay, _opy, _spy, _h, _r in TIMERLOG_UNIT.iter_unpack(chunk[:whole]):
                    if magic == BLANK_MAGIC_CODE:
                        done_file = True
                        break
                    if check_timer_log and (size != TIMERLOG_UNIT_SIZE or (magic | 0xF) != 0xF):
                        stop_all = done_file = True
                        break
                    if size == TIMERLOG_UNIT_SIZE and (magic | 0xF) == 0xF:
                        pos = base + off
                        entry = seen.get(cwt + delay)
                        if entry is None:
                            seen[cwt + delay] = [pos, pos]
                        else:
                            entry[1] = pos
                        last_unit_pos = pos
                    off += TIMERLOG_UNIT_SIZE
                if not done_file and whole < len(chunk):
                    # a blank in the last bytes of the file (fewer than 52 left)
                    if _HEAD.unpack_from(chunk, whole)[2] == BLANK_MAGIC_CODE:
                        done_file = True
                    elif check_timer_log:
                        stop_all = done_file = True
                position += off
                if off == 0 and not done_file:
                    break
            check_offset = f.from_offset + position
            if stop_all:
                break
        if check_timer_log and not self.read_only:
            self.timer_log.truncate_dirty_files(check_offset)
        # The same as reviseSlot(t, IGNORE, pos, force=True) for each unit in order, one slot at a time.
        wheel = self.timer_wheel
        p = self.precision_ms
        for delayed, (first_pos, last_pos) in seen.items():
            stored, s_first, s_last, _num, _magic = wheel.raw_slot_tuple(delayed)
            if stored != delayed // p:
                new = (first_pos, last_pos)
            else:
                new = (s_first, last_pos)
            if new != (s_first, s_last) or stored != delayed // p:
                if not self.read_only:
                    wheel.put_slot(delayed, new[0], new[1])
                    self._recount_slot(delayed)
        return check_offset, last_unit_pos

    def _recount_slot(self, delayed: int) -> None:
        slot = self.timer_wheel.get_slot(delayed)
        if slot.time_ms == -1:
            return
        num, first = 0, slot.last_pos
        pos, seen = slot.last_pos, 0
        while pos != -1 and seen <= self._max_units():
            unit = self.timer_log.read_unit(pos)
            if unit is None or unit.size != TIMERLOG_UNIT_SIZE:
                break
            num += -1 if unit.magic & TIMER_MAGIC_DELETE else 1
            first, pos, seen = pos, unit.prev_pos, seen + 1
        self.timer_wheel.put_slot(delayed, first, slot.last_pos, num, slot.magic)

    def _max_units(self) -> int:
        return max(1, self.timer_log.wrote_position // TIMERLOG_UNIT_SIZE + 1)

    def _revise_queue_offset(self, last_unit_pos: int | None) -> int:
        """`reviseQueueOffset`: the CQ offset of the message behind the last unit, checked against the CQ."""
        if last_unit_pos is None:
            return -1
        unit = self.timer_log.read_unit(last_unit_pos)
        if unit is None:
            return -1
        msg = self._look(unit.offset_py, unit.size_py)
        if msg is None:
            return -1
        cq_offset = tmp = msg.queue_offset
        for _ in range(20_000):
            if tmp < 0:
                break
            try:
                phy = self.store.get_commit_log_offset_in_queue(TIMER_TOPIC, 0, tmp)
            except (AttributeError, RmqError, IndexError):
                phy = None
            if phy == unit.offset_py:
                cq_offset = tmp
                break
            tmp -= 1
        return cq_offset

    # -- time ------------------------------------------------------------------------------------
