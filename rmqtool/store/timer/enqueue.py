"""The timer store's enqueue: what is new on rmq_sys_wheel_timer/0 goes into the TimerLog and wheel
(`TimerEnqueueGetService`, `TimerEnqueuePutService`, `doEnqueue`), or straight to its topic when
already due.
"""

from __future__ import annotations

from rmqtool.layouts import properties as P
from rmqtool.layouts.constants import (
    TIMER_MAGIC_DEFAULT,
    TIMER_MAGIC_DELETE,
    TIMER_MAGIC_ROLL,
    TIMER_TOPIC,
    TIMERLOG_UNIT_SIZE,
)
from rmqtool.layouts.javahash import java_string_hash
from rmqtool.layouts.message import MessageExt
from rmqtool.layouts.timer import TIMERLOG_UNIT
from rmqtool.store.timer.timerlog import pack_unit
from rmqtool.store.timer.timerrules import LONG_MAX, peek_timer_fields, roll_target


class TimerEnqueueService:
    """The enqueue half of `TimerMessageStore` (a base of it, timerstore.py).

    The files (`timer_log`, `timer_wheel`, `timer_metrics`), the store and the read/write times
    and queue offsets are the facade's attributes; this class holds no state of its own.
    """

    def enqueue(self, now_ms: int) -> int:
        """`enqueue(0)` + `TimerEnqueuePutService`: everything new on rmq_sys_wheel_timer/0.

        Returns how many messages were already due and went straight to their topic. Units are
        read straight from the ConsumeQueue and only the properties of each record are parsed
        (the hot path); a store without those internals is read through `get_message`.
        """
        cqs, commitlog = getattr(self.store, "cqs", None), getattr(self.store, "commitlog", None)
        if cqs is None or commitlog is None or not hasattr(commitlog, "read_bytes"):
            return self._enqueue_via_get_message(now_ms)
        cq = cqs.find(TIMER_TOPIC, 0)
        if cq is None:
            return 0
        done = 0
        if self.curr_queue_offset < cq.min_offset_in_queue:
            self.curr_queue_offset = cq.min_offset_in_queue
        read_bytes = commitlog.read_bytes
        write_time = self.curr_write_time_ms
        while self.curr_queue_offset < cq.max_offset_in_queue:
            units = cq.read_units(self.curr_queue_offset, 4096)
            if not units:
                break
            start = self.curr_queue_offset
            pending: dict[int, list[int]] = {}  # slot time -> [first, last, num, magic], applied after the log write
            self.timer_log.begin_batch()
            try:
                for phys, size, _tags in units:
                    raw = read_bytes(phys, size) if 0 < size != 0x7FFFFFFF else None
                    fields = peek_timer_fields(raw) if raw is not None else None  # None: record gone
                    if fields is not None:
                        delayed, real_topic, is_delete = fields
                        if delayed < write_time:
                            msg = self._look(phys, size)
                            if msg is not None:
                                done += self._enqueue_one(msg, now_ms)
                        else:
                            self._enqueue_unit(phys, size, delayed, real_topic, is_delete, pending)
                    self.curr_queue_offset += 1
                self.timer_log.commit_batch()
            except BaseException:
                # nothing of this chunk reached the log or the wheel: the next run redoes it
                self.timer_log.abort_batch()
                self.curr_queue_offset = start
                raise
            wheel = self.timer_wheel
            for slot_time, (first, last, num, smagic) in pending.items():
                wheel.put_slot(slot_time, first, last, num, smagic)
            self.commit_queue_offset = self.curr_queue_offset
        self.commit_queue_offset = self.curr_queue_offset
        return done

    def _enqueue_unit(self, offset_py: int, size_py: int, delayed_time: int, real_topic: str | None,
                      is_delete: bool, pending: dict[int, list[int]]) -> None:
        """`doEnqueue` inside a batch: the slot comes from `pending` when this batch touched it."""
        write_time = self.curr_write_time_ms
        if delayed_time - write_time >= self._window_ms:
            delayed_time, _ = roll_target(delayed_time, write_time, self.timer_roll_window_slots, self.precision_ms)
            magic = TIMER_MAGIC_DEFAULT | TIMER_MAGIC_ROLL
        else:
            magic = TIMER_MAGIC_DEFAULT
        if is_delete:
            magic |= TIMER_MAGIC_DELETE
        slot_time = delayed_time // self.precision_ms * self.precision_ms
        slot = pending.get(slot_time)
        if slot is None:
            t, first, last, num, smagic = self.timer_wheel.raw_slot_tuple(delayed_time)
            slot = [first, last, num, smagic] if t == delayed_time // self.precision_ms else [-1, -1, 0, 0]
            pending[slot_time] = slot
        pos = self.timer_log.append(TIMERLOG_UNIT.pack(TIMERLOG_UNIT_SIZE, slot[1], magic, write_time,
                                                       delayed_time - write_time, offset_py, size_py,
                                                       java_string_hash(real_topic) if real_topic else 0, 0))
        if slot[0] == -1:
            slot[0] = pos
        slot[1] = pos
        slot[2] += -1 if is_delete else 1
        self.timer_metrics.add(real_topic, -1 if is_delete else 1, write_time)
        self.enqueued += 1

    def _enqueue_via_get_message(self, now_ms: int) -> int:
        done = 0
        while True:
            res = self.store.get_message(TIMER_TOPIC, 0, self.curr_queue_offset, 256)
            if res.status == "OFFSET_TOO_SMALL" and res.min_offset > self.curr_queue_offset:
                self.curr_queue_offset = res.min_offset
                continue
            if not res.messages:
                break
            for msg in res.messages:
                done += self._enqueue_one(msg, now_ms)
                self.curr_queue_offset = max(self.curr_queue_offset, msg.queue_offset + 1)
            self.curr_queue_offset = max(self.curr_queue_offset, getattr(res, "next_begin_offset", 0))
            self.commit_queue_offset = self.curr_queue_offset
        self.commit_queue_offset = self.curr_queue_offset
        return done

    def _enqueue_one(self, msg: MessageExt, now_ms: int) -> bool:
        try:
            delayed = int(msg.properties[P.TIMER_OUT_MS])
        except (KeyError, ValueError):
            delayed = -1  # cannot be scheduled: hand it over now rather than lose it
        if delayed < self.curr_write_time_ms:
            msg.properties[P.TIMER_ENQUEUE_MS] = str(LONG_MAX)  # never enqueued, mark it
            return self._dequeue_put(msg, LONG_MAX, TIMER_MAGIC_DEFAULT, now_ms)
        self.do_enqueue(msg.commit_log_offset, msg.total_size, delayed, msg)
        return False

    def do_enqueue(self, offset_py: int, size_py: int, delayed_time: int, msg: MessageExt) -> int:
        """`doEnqueue`: append the unit, then point the slot at it. Returns the unit's position."""
        write_time = self.curr_write_time_ms
        delayed_time, rolled = roll_target(delayed_time, write_time, self.timer_roll_window_slots, self.precision_ms)
        magic = TIMER_MAGIC_DEFAULT | (TIMER_MAGIC_ROLL if rolled else 0)
        is_delete = P.TIMER_DEL_UNIQKEY in msg.properties
        if is_delete:
            magic |= TIMER_MAGIC_DELETE
        real_topic = msg.properties.get(P.REAL_TOPIC)
        slot = self.timer_wheel.get_slot(delayed_time)
        pos = self.timer_log.append(pack_unit(slot.last_pos, magic, write_time, delayed_time - write_time, offset_py,
                                              size_py, java_string_hash(real_topic) if real_topic else 0))
        self.timer_wheel.put_slot(delayed_time, pos if slot.first_pos == -1 else slot.first_pos, pos,
                                  slot.num - 1 if is_delete else slot.num + 1, slot.magic)
        self.timer_metrics.add(real_topic, -1 if is_delete else 1, write_time)
        self.enqueued += 1
        return pos
