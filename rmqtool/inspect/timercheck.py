"""Timer store checks: TimerLog units against their CommitLog records, wheel slots against chains.

Library functions (also used by the timer service's tests):

- `check_timerlog_units(root, reader=None, cfg=None)`: every 52-byte unit has size 52, a valid
  magic, points (offsetPy/sizePy) at a good record on `rmq_sys_wheel_timer` whose `TIMER_OUT_MS`
  equals the unit's delayed time (rolled units excepted) and whose REAL_TOPIC hash matches, and
  a `prevPos` that is -1 or an earlier unit of the same slot time.
- `check_wheel_slots(root, cfg=None)`: every non-empty slot sits at the index of its time, its
  lastPos -> prevPos chain stays inside the TimerLog, each unit on it belongs to the slot's time,
  it ends at -1 after passing firstPos, and `num` matches the chain; and every unit whose slot
  still holds its time is on that slot's chain.

Both yield `rmqtool.inspect.problems.Problem`s (`timerlog-unit-bad`, `wheel-slot-mismatch`).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from rmqtool.inspect.commitlog import CommitLogReader
from rmqtool.inspect.files import QueueFile, ReadOnlyFile, queue_files, relpath
from rmqtool.inspect.layoutconfig import LayoutConfig, load_layout_config
from rmqtool.inspect.problems import Problem
from rmqtool.layouts import properties as P
from rmqtool.layouts.constants import (
    BLANK_MAGIC_CODE,
    TIMER_MAGIC_DELETE,
    TIMER_MAGIC_ROLL,
    TIMER_SLOT_SIZE,
    TIMER_TOPIC,
    TIMERLOG_UNIT_SIZE,
)
from rmqtool.layouts.javahash import java_string_hash
from rmqtool.layouts.message import Blank, RecordError
from rmqtool.layouts.timer import TIMER_SLOT, TIMERLOG_UNIT

WHEEL_SLOTS = 604_800 * 2
MAX_CHAIN = 1_000_000


@dataclass(frozen=True, slots=True)
class TimerUnit:
    file: QueueFile
    pos: int  # in the file
    offset: int  # TimerLog offset = file base + pos
    size: int
    prev_pos: int
    magic: int
    curr_write_time: int
    delay_time: int
    offset_py: int
    size_py: int
    hash_code_of_real_topic: int

    @property
    def delayed_time(self) -> int:
        return self.curr_write_time + self.delay_time


@dataclass
class TimerLogEnd:
    offset: int = 0  # end of the valid units (recovery's processOffset)
    bad: Problem | None = None


def iter_timerlog(files: list[QueueFile], root: Path | None = None, end: TimerLogEnd | None = None,
                  problems: list[Problem] | None = None) -> Iterator[TimerUnit]:
    """Units in TimerLog order; a blank moves to the next file, zeros end a file.

    A unit with a bad size or magic ends the scan (recovery with `checkTimerLog`); it is added to
    `problems` when given.
    """
    unpack = TIMERLOG_UNIT.unpack_from
    for qf in files:
        with ReadOnlyFile(qf.path) as rof:
            buf, fsize = rof.buf, rof.size
            pos = 0
            while pos + 16 <= fsize:
                size, prev, magic = unpack_head(buf, pos)
                if size == 0 and magic == 0 and prev == 0:
                    break
                tail_magic = int.from_bytes(buf[pos + 12 : pos + 16], "big", signed=True)
                if tail_magic == BLANK_MAGIC_CODE and size == fsize - pos:
                    break
                if pos + TIMERLOG_UNIT_SIZE > fsize or size != TIMERLOG_UNIT_SIZE or (magic | 0xF) != 0xF:
                    p = Problem(relpath(qf.path, root), pos, "timerlog-unit-bad",
                                f"unit size {size} / magic {magic} is not a TimerLog unit; recovery stops here")
                    if problems is not None:
                        problems.append(p)
                    if end is not None:
                        end.bad = p
                    return
                f = unpack(buf, pos)
                yield TimerUnit(qf, pos, qf.base + pos, f[0], f[1], f[2], f[3], f[4], f[5], f[6], f[7])
                pos += TIMERLOG_UNIT_SIZE
                if end is not None:
                    end.offset = qf.base + pos


def unpack_head(buf, pos: int) -> tuple[int, int, int]:
    return (int.from_bytes(buf[pos : pos + 4], "big", signed=True),
            int.from_bytes(buf[pos + 4 : pos + 12], "big", signed=True),
            int.from_bytes(buf[pos + 12 : pos + 16], "big", signed=True))


def check_timerlog_units(root: Path, reader: CommitLogReader | None = None,
                         cfg: LayoutConfig | None = None) -> Iterator[Problem]:
    """TimerLog units against their CommitLog records (see module doc)."""
    root = Path(root)
    cfg = cfg or load_layout_config(root)
    own = reader is None
    reader = reader or CommitLogReader(queue_files(root / "commitlog"))
    problems: list[Problem] = []
    seen_slot_time: dict[int, int] = {}
    try:
        for u in iter_timerlog(queue_files(root / "timerlog"), root, problems=problems):
            yield from problems
            problems.clear()
            rel = relpath(u.file.path, root)
            t = u.delayed_time // cfg.timer_precision_ms
            if u.prev_pos != -1:
                if u.prev_pos < 0 or u.prev_pos >= u.offset:
                    yield Problem(rel, u.pos, "timerlog-unit-bad",
                                  f"prevPos {u.prev_pos} is not an earlier unit (unit at {u.offset})")
                elif seen_slot_time.get(u.prev_pos, t) != t:
                    yield Problem(rel, u.pos, "timerlog-unit-bad",
                                  f"prevPos {u.prev_pos} is a unit of another slot time")
            seen_slot_time[u.offset] = t
            try:
                msg = reader.read(u.offset_py, check_crc=False, read_body=False)
            except (RecordError, Blank) as e:
                yield Problem(rel, u.pos, "timerlog-unit-bad",
                              f"offsetPy {u.offset_py} is not a CommitLog record: {e}")
                continue
            if msg.total_size != u.size_py:
                yield Problem(rel, u.pos, "timerlog-unit-bad",
                              f"sizePy {u.size_py} but the record at {u.offset_py} has totalSize {msg.total_size}")
                continue
            if msg.topic != TIMER_TOPIC:
                yield Problem(rel, u.pos, "timerlog-unit-bad",
                              f"the record at {u.offset_py} is on {msg.topic!r}, not {TIMER_TOPIC}")
                continue
            out = msg.properties.get(P.TIMER_OUT_MS)
            if not u.magic & TIMER_MAGIC_ROLL and out is not None and out.lstrip("-").isdigit():
                if int(out) // cfg.timer_precision_ms != t:
                    yield Problem(rel, u.pos, "timerlog-unit-bad",
                                  f"delayed time {u.delayed_time} but the record's TIMER_OUT_MS is {out}")
            real = msg.properties.get(P.REAL_TOPIC)
            want = java_string_hash(real) if real else 0
            if u.hash_code_of_real_topic != want:
                yield Problem(rel, u.pos, "timerlog-unit-bad",
                              f"REAL_TOPIC hash {u.hash_code_of_real_topic}, the record's REAL_TOPIC {real!r} "
                              f"hashes to {want}")
        yield from problems
    finally:
        if own:
            reader.close()


def iter_wheel_slots(path: Path) -> Iterator[tuple[int, tuple[int, int, int, int, int]]]:
    """(index, (timeSecs, firstPos, lastPos, num, magic)) for every non-zero slot."""
    with ReadOnlyFile(path) as rof:
        buf, size = rof.buf, rof.size
        pos = 0
        while pos + TIMER_SLOT_SIZE <= size:
            nz = rof.first_nonzero(pos, size)
            if nz < 0:
                return
            pos = nz - nz % TIMER_SLOT_SIZE
            if pos + TIMER_SLOT_SIZE > size:
                return
            yield pos // TIMER_SLOT_SIZE, TIMER_SLOT.unpack_from(buf, pos)
            pos += TIMER_SLOT_SIZE


def check_wheel_slots(root: Path, cfg: LayoutConfig | None = None) -> Iterator[Problem]:
    """Wheel slots against the TimerLog chains (see module doc)."""
    root = Path(root)
    cfg = cfg or load_layout_config(root)
    wheel = root / "timerwheel"
    if not wheel.is_file():
        return
    size = wheel.stat().st_size
    if size not in (0, WHEEL_SLOTS * TIMER_SLOT_SIZE):
        yield Problem("timerwheel", 0, "timerwheel-size-bad",
                      f"timerwheel is {size} bytes, not {WHEEL_SLOTS * TIMER_SLOT_SIZE}; a broker refuses to start")
    units: dict[int, TimerUnit] = {}
    for u in iter_timerlog(queue_files(root / "timerlog"), root):
        units[u.offset] = u
    prec = cfg.timer_precision_ms
    on_chain: set[int] = set()
    slot_times: dict[int, int] = {}
    for idx, (tsecs, first, last, num, _magic) in iter_wheel_slots(wheel):
        spos = idx * TIMER_SLOT_SIZE
        slot_times[idx] = tsecs
        if tsecs % WHEEL_SLOTS != idx:
            yield Problem("timerwheel", spos, "wheel-slot-mismatch",
                          f"slot {idx} holds time {tsecs}, which belongs in slot {tsecs % WHEEL_SLOTS}")
            continue
        if last == -1 and first == -1:
            continue
        pos, seen, count, reached_first, bad = last, 0, 0, False, None
        while pos != -1:
            u = units.get(pos)
            if u is None:
                bad = f"chain reaches TimerLog offset {pos}, which is not a valid unit"
                break
            if u.delayed_time // prec != tsecs:
                bad = f"unit at TimerLog offset {pos} is for time {u.delayed_time // prec}, the slot for {tsecs}"
                break
            on_chain.add(pos)
            count += -1 if (u.magic & TIMER_MAGIC_DELETE and not u.magic & TIMER_MAGIC_ROLL) else 1
            if pos == first:
                reached_first = True
            seen += 1
            if seen > MAX_CHAIN or u.prev_pos >= pos:
                bad = f"prevPos chain does not go backwards at {pos}"
                break
            pos = u.prev_pos
        if bad is None and not reached_first:
            bad = f"firstPos {first} is not on the chain from lastPos {last}"
        if bad is None and num != count:
            bad = f"num is {num}, the chain holds {count}"
        if bad is not None:
            yield Problem("timerwheel", spos, "wheel-slot-mismatch", f"slot {idx} (time {tsecs}): {bad}")
    for off, u in sorted(units.items()):
        t = u.delayed_time // prec
        idx = t % WHEEL_SLOTS
        if slot_times.get(idx) == t and off not in on_chain:
            yield Problem(relpath(u.file.path, root), u.pos, "wheel-slot-mismatch",
                          f"unit is not on the chain of its slot {idx} (time {t})")
        elif idx not in slot_times:
            yield Problem(relpath(u.file.path, root), u.pos, "wheel-slot-mismatch",
                          f"its slot {idx} (time {t}) is empty in the wheel")
