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
"""

from __future__ import annotations

import logging
import struct
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from rmqtool.errors import InvalidInput, RmqError
from rmqtool.layouts import properties as P
from rmqtool.layouts.constants import (
    BLANK_MAGIC_CODE,
    MESSAGE_MAGIC_CODE_V2,
    TIMER_BLANK_SLOTS,
    TIMER_MAGIC_DEFAULT,
    TIMER_MAGIC_DELETE,
    TIMER_MAGIC_ROLL,
    TIMER_SLOTS_TOTAL,
    TIMER_TOPIC,
    TIMERLOG_UNIT_SIZE,
)
from rmqtool.layouts.javahash import java_string_hash
from rmqtool.layouts.message import MessageExt
from rmqtool.layouts.timer import TIMERLOG_UNIT
from rmqtool.store.timer.hooks import snap_precision
from rmqtool.store.timer.timercheck import TimerCheckpoint
from rmqtool.store.timer.timerlog import TimerLog, TimerUnit, pack_unit
from rmqtool.store.timer.timermetrics import TimerMetrics
from rmqtool.store.timer.timerwheel import TimerWheel

log = logging.getLogger(__name__)

LONG_MAX = 2**63 - 1
DEFAULT_TIMERLOG_FILE_SIZE = 100 * 1024 * 1024
_RECOVER_CHUNK_UNITS = 16384
_PUT_OK = ("PUT_OK", "FLUSH_DISK_TIMEOUT", "FLUSH_SLAVE_TIMEOUT", "SLAVE_NOT_AVAILABLE")
_HEAD = struct.Struct(">iqi")  # size, prevPos, magic


_I32 = struct.Struct(">i")
_I16 = struct.Struct(">h")
_KEY_OUT = "\x02" + P.TIMER_OUT_MS + "\x01"
_KEY_REAL_TOPIC = "\x02" + P.REAL_TOPIC + "\x01"
_KEY_DEL = "\x02" + P.TIMER_DEL_UNIQKEY + "\x01"


def _prop(text: str, key: str) -> str | None:
    i = text.find(key)
    if i < 0:
        return None
    i += len(key)
    j = text.find("\x02", i)
    return text[i:] if j < 0 else text[i:j]


def peek_timer_fields(raw: bytes) -> tuple[int, str | None, bool] | None:
    """(TIMER_OUT_MS, REAL_TOPIC, has TIMER_DEL_UNIQKEY) of a record, parsing nothing else.

    Returns TIMER_OUT_MS = -1 when it is missing or not a number (the message is then handed
    over at once rather than lost), None when the bytes are not a record.
    """
    try:
        magic = _I32.unpack_from(raw, 4)[0]
        sys_flag = _I32.unpack_from(raw, 36)[0]
        p = 48 + (20 if sys_flag & 0x10 else 8) + 8 + (20 if sys_flag & 0x20 else 8) + 12
        p += 4 + _I32.unpack_from(raw, p)[0]
        if magic == MESSAGE_MAGIC_CODE_V2:
            p += 2 + _I16.unpack_from(raw, p)[0]
        else:
            p += 1 + raw[p]
        props_len = _I16.unpack_from(raw, p)[0]
        text = "\x02" + bytes(raw[p + 2: p + 2 + props_len]).decode("utf-8", "replace")
    except (struct.error, IndexError):
        return None
    out = _prop(text, _KEY_OUT)
    try:
        delayed = int(out) if out is not None else -1
    except ValueError:
        delayed = -1
    return delayed, _prop(text, _KEY_REAL_TOPIC), _KEY_DEL in text


def build_delete_key(real_topic: str | None, uniq_key: str) -> str:
    """`TimerMessageStore.buildDeleteKey`: what TIMER_DEL_UNIQKEY must hold to cancel a message."""
    return f"{real_topic}+{uniq_key}"


def roll_window_slots(configured: int, slots_total: int = TIMER_SLOTS_TOTAL) -> int:
    """`timerRollWindowSlots`: the configured value unless it is < 2 or > slotsTotal - 60."""
    if configured > slots_total - TIMER_BLANK_SLOTS or configured < 2:
        return slots_total - TIMER_BLANK_SLOTS
    return configured


def roll_target(delayed_time: int, write_time: int, window_slots: int, precision_ms: int) -> tuple[int, bool]:
    """`doEnqueue`'s roll rule: (slot time to use, rolled?)."""
    window = window_slots * precision_ms
    if delayed_time - write_time < window:
        return delayed_time, False
    if delayed_time - write_time - window < window_slots // 3 * precision_ms:
        return write_time + (window_slots // 2) * precision_ms, True  # give the next roll room
    return write_time + window, True


class TimerMessageStore:
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
        self._lock = threading.RLock()
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()
        self._wake = threading.Event()
        self.enqueued = 0  # units written since open (for benchmarks and tests)
        self.delivered = 0
        self.timer_log.load()
        self.recover()

    # -- recovery --------------------------------------------------------------------------------
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

    # -- dequeue ---------------------------------------------------------------------------------
    def dequeue(self, now_ms: int) -> int:
        """`dequeue()` for every slot before the write time; returns messages sent to real topics."""
        delivered = 0
        p = self.precision_ms
        wheel = self.timer_wheel
        while self.curr_read_time_ms < self.curr_write_time_ms:
            if not wheel.slot_time_matches(self.curr_read_time_ms):
                # slots before the write time take no new units, so empty ones can be skipped at once
                nxt = wheel.first_live_time(self.curr_read_time_ms, self.curr_write_time_ms)
                self.curr_read_time_ms = self.curr_write_time_ms if nxt is None else nxt
                self.commit_read_time_ms = self.curr_read_time_ms
                continue
            delivered += self._dequeue_slot(self.curr_read_time_ms, now_ms)
            self.curr_read_time_ms += p
            self.commit_read_time_ms = self.curr_read_time_ms
            self.prepare_timer_checkpoint()
            self.timer_checkpoint.write()
        return delivered

    def read_chain(self, slot_last_pos: int) -> list[TimerUnit]:
        """The units of one slot, newest first (walking prevPos from lastPos)."""
        out: list[TimerUnit] = []
        pos, limit = slot_last_pos, self._max_units()
        while pos != -1 and len(out) <= limit:
            unit = self.timer_log.read_unit(pos)
            if unit is None:
                break
            out.append(unit)
            pos = unit.prev_pos
        return out

    def _dequeue_slot(self, read_time: int, now_ms: int) -> int:
        slot = self.timer_wheel.get_slot(read_time)
        warm, self._warm = self._warm, None
        if warm is not None and warm[0] == read_time and warm[1] == slot.last_pos:
            batch, deltas = warm[2]
            dequeue_ms = str(now_ms)
            for inner, _rolled in batch:
                inner.properties[P.TIMER_DEQUEUE_MS] = dequeue_ms  # same key, same place in the map
        else:
            batch, deltas = self._read_slot(slot.last_pos, now_ms)
        delivered = self._put_all(batch)
        for topic, delta in deltas.items():
            if delta:
                self.timer_metrics.add(topic, delta, now_ms)
        return delivered

    def warm_next_slot(self, now_ms: int) -> None:
        """Read and convert the next slot's messages shortly before it is due (Java's
        TimerDequeueWarmService idea), so delivery at the boundary is only the put. The result
        is used only if the slot's chain did not change in between."""
        t = self.curr_read_time_ms
        if self._warm is not None and self._warm[0] == t:
            return
        if t + self.precision_ms - now_ms > self._warm_ahead_ms:
            return
        slot = self.timer_wheel.get_slot(t)
        if slot.time_ms == -1:
            return
        self._warm = (t, slot.last_pos, self._read_slot(slot.last_pos, now_ms))

    def _read_slot(self, last_pos: int, now_ms: int) -> tuple[list[tuple[MessageExt, bool]], dict[str, int]]:
        """The dequeue of one slot up to the put: walk the chain, apply delete markers, convert.

        Also returns what the put changes in timermetrics, per real topic.
        """
        normal: list[TimerUnit] = []
        deletes: list[TimerUnit] = []
        for unit in self.read_chain(last_pos):
            if unit.magic & TIMER_MAGIC_DELETE and not unit.magic & TIMER_MAGIC_ROLL:
                deletes.append(unit)
            else:
                normal.append(unit)
        normal.reverse()  # oldest first, as `normalMsgStack.addFirst` leaves them
        delete_keys: set[str] = set()
        for unit in deletes:
            msg = self._look(unit.offset_py, unit.size_py)
            if msg is not None and msg.properties.get(P.TIMER_DEL_UNIQKEY) is not None:
                delete_keys.add(msg.properties[P.TIMER_DEL_UNIQKEY])
        batch: list[tuple[MessageExt, bool]] = []
        unmatched = set(delete_keys)
        deltas: dict[str, int] = {}  # timermetrics changes, applied once the put succeeded
        for unit in normal:
            msg = self._look(unit.offset_py, unit.size_py)
            if msg is None:
                continue
            uniq = msg.properties.get(P.UNIQ_KEY)
            if uniq is not None and delete_keys:
                key = build_delete_key(msg.properties.get(P.REAL_TOPIC), uniq)
                if key in delete_keys:
                    unmatched.discard(key)
                    continue
            real_topic = msg.properties.get(P.REAL_TOPIC)
            if real_topic and msg.properties.get(P.TIMER_ENQUEUE_MS) != str(LONG_MAX):
                deltas[real_topic] = deltas.get(real_topic, 0) - 1
            inner = self._prepare_put(msg, unit.curr_write_time, unit.magic, now_ms)
            if inner is not None:
                batch.append((inner, bool(unit.magic & TIMER_MAGIC_ROLL)))
        for key in unmatched:
            # a delete marker that cancelled nothing here took one off at enqueue: give it back
            # (the broker's `avoidDeleteLose`)
            topic = key.rpartition("+")[0]
            deltas[topic] = deltas.get(topic, 0) + 1
        return batch, deltas

    def convert(self, msg: MessageExt, enqueue_time: int, need_roll: bool, now_ms: int) -> MessageExt:
        """`convert` + `convertMessage`: the record that goes back to the real topic (or rolls).

        The properties string is built from the full map, REAL_TOPIC and REAL_QID included, as the
        broker does (it removes them from the map only after building the string).
        """
        props = dict(msg.properties)
        if enqueue_time != -1:
            props[P.TIMER_ENQUEUE_MS] = str(enqueue_time)
        if need_roll:
            props[P.TIMER_ROLL_TIMES] = str(int(props[P.TIMER_ROLL_TIMES]) + 1) if P.TIMER_ROLL_TIMES in props else "1"
        props[P.TIMER_DEQUEUE_MS] = str(now_ms)
        props = P.broker_order(props)
        if need_roll:
            topic, queue_id = msg.topic, msg.queue_id
        else:
            topic, queue_id = props[P.REAL_TOPIC], int(props[P.REAL_QID])
        return MessageExt(topic=topic, queue_id=queue_id, body=msg.body, flag=msg.flag, properties=props,
                          sys_flag=msg.sys_flag, born_timestamp=msg.born_timestamp, born_host=msg.born_host,
                          store_host=msg.store_host, reconsume_times=msg.reconsume_times)

    def _prepare_put(self, msg: MessageExt, enqueue_time: int, magic: int, now_ms: int) -> MessageExt | None:
        """`convert`, or None for what `doPut` never puts (a delete marker, a message with no real topic)."""
        need_roll = bool(magic & TIMER_MAGIC_ROLL)
        if P.REAL_TOPIC not in msg.properties or P.REAL_QID not in msg.properties:
            return None
        inner = self.convert(msg, enqueue_time, need_roll, now_ms)
        if not need_roll and P.TIMER_DEL_UNIQKEY in inner.properties:
            return None  # PUT_NO_RETRY: a delete marker is never delivered
        return inner

    def _dequeue_put(self, msg: MessageExt, enqueue_time: int, magic: int, now_ms: int) -> bool:
        """`TimerDequeuePutMessageService` for one message; True when it reached its real topic."""
        inner = self._prepare_put(msg, enqueue_time, magic, now_ms)
        if inner is None:
            return False
        return self._put_all([(inner, bool(magic & TIMER_MAGIC_ROLL))]) == 1

    def _put_all(self, batch: list[tuple[MessageExt, bool]]) -> int:
        """`doPut` for a slot's messages in one store call; returns how many reached their real topic.

        A message the store refuses for good (invalid) is skipped as the broker skips it; a put
        that fails for a runtime reason raises, so the slot is not marked done and is tried again
        on the next run (at-least-once, never lost).
        """
        if not batch:
            return 0
        put_many = getattr(self.store, "put_messages", None)
        try:
            results = put_many([m for m, _ in batch]) if put_many else [self.store.put_message(m) for m, _ in batch]
        except InvalidInput:
            results = []
            for m, _ in batch:
                try:
                    results.append(self.store.put_message(m))
                except InvalidInput as e:
                    log.warning("timer message skipped, the store refused it: %s", e)
                    results.append(None)
        delivered = 0
        for (_, rolled), result in zip(batch, results, strict=True):
            if result is None:
                continue
            status = getattr(result, "status", "PUT_OK")
            if status in _PUT_OK:
                if not rolled:
                    delivered += 1
            elif status not in ("MESSAGE_ILLEGAL", "PROPERTIES_SIZE_EXCEEDED", "WHEEL_TIMER_NOT_ENABLE",
                                "WHEEL_TIMER_MSG_ILLEGAL"):
                raise RmqError(f"timer delivery put failed with {status}; will retry")
        self.delivered += delivered
        return delivered

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
            except RmqError as e:  # a put failed: the offsets did not move, the next run retries
                # at most one line per 10 s: a full disk fails every run (each 10 ms) until space returns
                self._put_failures = getattr(self, "_put_failures", 0) + 1
                if now - getattr(self, "_put_failure_logged", -(1 << 62)) >= 10_000:
                    log.warning("timer service: %s; will retry (%d failed runs)", e, self._put_failures)
                    self._put_failure_logged = now
                    self._put_failures = 0
            self.prepare_timer_checkpoint()
            self.timer_checkpoint.write()
            if now - self._last_flush >= self.flush_interval_ms:
                self.flush()
                self._last_flush = now
            if now - self._last_expire >= 30_000:
                self._last_expire = now
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

    def _loop(self) -> None:
        interval = max(0.01, self.precision_ms / 100_000)  # 10 ms at 1 s precision
        while not self._stop.is_set():
            self._wake.wait(interval)
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
