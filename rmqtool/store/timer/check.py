"""Consistency checks of a store's timer files: the one implementation, for the timer tests and `verify`.

Pure functions over a store directory (nothing is written); problems are dicts
`{"file", "pos", "kind", "detail"}` with `file` relative to the store root and `pos` the byte
offset inside that file. `rmqtool.inspect` adapts them to its own `Problem` kinds. What is checked:
* every TimerLog file has the configured size, and every unit up to the end of the log is
  well-formed (size 52, magic flags only); a bad unit ends the scan, as recovery's checkTimerLog;
* every unit's `prevPos` is -1 or an earlier unit of the same slot time;
* every unit points at a real CommitLog record on `rmq_sys_wheel_timer` of exactly `sizePy`
  bytes, whose `TIMER_OUT_MS` agrees with the unit's slot (rolled units excepted) and whose
  REAL_TOPIC hashes to `hashCodeOfRealTopic` (units below the CommitLog's first file are
  skipped: those files were expired);
* every written wheel slot sits at its index, and walking its chain from lastPos through prevPos
  goes backwards over valid units of that slot, passes firstPos, and counts to `num` (+1 per
  unit, -1 per delete marker, as `doEnqueue`);
* every unit whose slot still holds its time is on that slot's chain, and no unit's slot is empty.

Nothing here raises on garbage bytes: damage is reported, never thrown.
"""

from __future__ import annotations

import mmap
import os
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rmqtool.layouts import properties as P
from rmqtool.layouts.constants import (
    BLANK_MAGIC_CODE,
    DEFAULT_TIMERLOG_FILE_SIZE,
    TIMER_MAGIC_DELETE,
    TIMER_MAGIC_ROLL,
    TIMER_SLOT_SIZE,
    TIMER_SLOTS_TOTAL,
    TIMER_TOPIC,
    TIMERLOG_UNIT_SIZE,
)
from rmqtool.layouts.javahash import java_string_hash
from rmqtool.layouts.message import Blank, RecordError, decode_record
from rmqtool.layouts.timer import TIMER_SLOT, TIMERLOG_UNIT
from rmqtool.store.diskspace import map_read_only
from rmqtool.store.mappedfile import OffsetFile, offset_files
from rmqtool.store.timer.timerlog import TimerUnit, is_magic_ok

Problem = dict[str, object]
WHEEL_SLOTS = TIMER_SLOTS_TOTAL * 2
_WHEEL_CHUNK = 65536 * TIMER_SLOT_SIZE
_MAX_RECORD = 1 << 30


def _problem(file: str, pos: int, kind: str, detail: str) -> Problem:
    return {"file": file, "pos": pos, "kind": kind, "detail": detail}


@dataclass
class ScanEnd:
    """Where a scan stopped: `offset` is the end of the valid units (recovery's processOffset)."""

    offset: int = 0
    bad: Problem | None = None


def _default_rel(path: Path) -> str:
    return f"timerlog/{Path(path).name}"


def _read_all(path: Path) -> bytes | mmap.mmap:
    with open(path, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        if size == 0:
            return b""
        return map_read_only(f.fileno(), size)


def iter_timerlog(files: Iterable[Any], rel: Callable[[Path], str] = _default_rel, end: ScanEnd | None = None,
                  problems: list[Problem] | None = None) -> Iterator[TimerUnit]:
    """Units in TimerLog order: the one scanner (checks, `inspect timerlog`, repair).

    A blank moves to the next file, zeros end a file. A unit with a bad size or magic ends the
    scan (recovery with `checkTimerLog`); it is appended to `problems` and set as `end.bad`.
    """
    unpack = TIMERLOG_UNIT.unpack_from
    for qf in files:
        buf = _read_all(qf.path)
        try:
            fsize = len(buf)
            pos = 0
            while pos + 16 <= fsize:
                size = int.from_bytes(buf[pos : pos + 4], "big", signed=True)
                prev = int.from_bytes(buf[pos + 4 : pos + 12], "big", signed=True)
                magic = int.from_bytes(buf[pos + 12 : pos + 16], "big", signed=True)
                if size == 0 and magic == 0 and prev == 0:
                    break
                if magic == BLANK_MAGIC_CODE and size == fsize - pos:
                    break
                if pos + TIMERLOG_UNIT_SIZE > fsize or size != TIMERLOG_UNIT_SIZE or not is_magic_ok(magic):
                    p = _problem(rel(qf.path), pos, "timerlog-bad-unit",
                                 f"unit size {size} / magic {magic} is not a TimerLog unit; recovery stops here")
                    if problems is not None:
                        problems.append(p)
                    if end is not None:
                        end.bad = p
                    return
                yield TimerUnit(qf.base + pos, *unpack(buf, pos), qf)
                pos += TIMERLOG_UNIT_SIZE
                if end is not None:
                    end.offset = qf.base + pos
        finally:
            if isinstance(buf, mmap.mmap):
                buf.close()


class _UnitReader:
    """Random access to the units a scan found valid: `(base, end of valid units)` per file."""

    def __init__(self, files: list[OffsetFile], ranges: dict[int, int]) -> None:
        self.files = {f.base: f for f in files}
        self.ranges = ranges
        self.bases = sorted(ranges)
        self.fds: dict[int, int] = {}

    def read(self, offset: int) -> tuple | None:
        """The unit at `offset` if the scan found a valid unit there, else None."""
        base = next((b for b in reversed(self.bases) if b <= offset), None)
        if base is None or offset >= self.ranges[base] or (offset - base) % TIMERLOG_UNIT_SIZE:
            return None
        fd = self.fds.get(base)
        if fd is None:
            fd = self.fds[base] = os.open(self.files[base].path, os.O_RDONLY)
        raw = os.pread(fd, TIMERLOG_UNIT_SIZE, offset - base)
        return TIMERLOG_UNIT.unpack(raw) if len(raw) == TIMERLOG_UNIT_SIZE else None

    def close(self) -> None:
        for fd in self.fds.values():
            os.close(fd)
        self.fds.clear()


def _scan_ranges(files: list[OffsetFile]) -> dict[int, int]:
    """For each file base, the end offset of its valid units (one cheap pass)."""
    ranges: dict[int, int] = {}
    for u in iter_timerlog(files):
        ranges[u.file.base] = u.offset + TIMERLOG_UNIT_SIZE
    return ranges


class _CommitLog:
    """Read-only random access to `commitlog/` by absolute offset."""

    def __init__(self, root: Path) -> None:
        self.files = offset_files(Path(root) / "commitlog")
        self.sizes = [f.path.stat().st_size for f in self.files]
        self.min_offset = self.files[0].base if self.files else 0
        self.max_offset = self.files[-1].base + self.sizes[-1] if self.files else 0
        self.fds: dict[int, int] = {}

    def read(self, offset: int, size: int) -> bytes | None:
        for f, fsize in zip(self.files, self.sizes, strict=True):
            if f.base <= offset < f.base + fsize:
                fd = self.fds.get(f.base)
                if fd is None:
                    fd = self.fds[f.base] = os.open(f.path, os.O_RDONLY)
                data = os.pread(fd, size, offset - f.base)
                return data if len(data) == size else None
        return None

    def close(self) -> None:
        for fd in self.fds.values():
            os.close(fd)
        self.fds.clear()


def check_timerlog_targets(root: Path, timerlog_file_size: int = DEFAULT_TIMERLOG_FILE_SIZE,
                           precision_ms: int = 1000) -> Iterator[Problem]:
    """Every unit is well-formed, chains backwards within its slot time, and points at its real record."""
    root = Path(root)
    files = offset_files(root / "timerlog")
    for f in files:
        size = f.path.stat().st_size
        if size != timerlog_file_size:
            yield _problem(_default_rel(f.path), 0, "timerlog-file-size",
                           f"TimerLog file is {size} bytes, expected {timerlog_file_size}")
    commitlog = _CommitLog(root)
    units = _UnitReader(files, _scan_ranges(files))
    problems: list[Problem] = []
    try:
        for u in iter_timerlog(files, problems=problems):
            rel = _default_rel(u.file.path)
            t = u.delayed_time // precision_ms
            if u.prev_pos != -1:
                prev = units.read(u.prev_pos) if 0 <= u.prev_pos < u.offset else None
                if prev is None:
                    yield _problem(rel, u.pos, "timerlog-bad-prev",
                                   f"prevPos {u.prev_pos} is not an earlier unit (unit at {u.offset})")
                elif (prev[3] + prev[4]) // precision_ms != t:
                    yield _problem(rel, u.pos, "timerlog-bad-prev", f"prevPos {u.prev_pos} is a unit of another slot time")
            yield from _check_target(u, rel, t, commitlog, precision_ms)
        yield from problems
    finally:
        units.close()
        commitlog.close()


def _check_target(u: TimerUnit, rel: str, t: int, commitlog: _CommitLog, precision_ms: int) -> Iterator[Problem]:
    off = u.offset_py
    if off < commitlog.min_offset:
        return  # its CommitLog file was expired
    head = commitlog.read(off, 8)
    if head is None:
        yield _problem(rel, u.pos, "timerlog-dangling",
                       f"offsetPy {off} sizePy {u.size_py} is not inside the CommitLog (ends at {commitlog.max_offset})")
        return
    total = int.from_bytes(head[:4], "big", signed=True)
    raw = commitlog.read(off, total) if 8 < total <= _MAX_RECORD else None
    try:
        msg = decode_record(raw if raw is not None else head, 0, read_body=False, check_crc=False)
    except (Blank, RecordError) as e:
        yield _problem(rel, u.pos, "timerlog-bad-target", f"offsetPy {off} is not a CommitLog record: {e}")
        return
    except Exception as e:  # noqa: BLE001 - garbage bytes must be reported, never raised
        yield _problem(rel, u.pos, "timerlog-bad-target", f"offsetPy {off} is not a CommitLog record: {e!r}")
        return
    if msg.total_size != u.size_py:
        yield _problem(rel, u.pos, "timerlog-bad-target",
                       f"sizePy {u.size_py} but the record at {off} has totalSize {msg.total_size}")
        return
    if msg.topic != TIMER_TOPIC:
        yield _problem(rel, u.pos, "timerlog-bad-target", f"the record at {off} is on {msg.topic!r}, not {TIMER_TOPIC}")
        return
    out = msg.properties.get(P.TIMER_OUT_MS)
    if not u.magic & TIMER_MAGIC_ROLL and out is not None and out.lstrip("-").isdigit():
        if int(out) // precision_ms != t:
            yield _problem(rel, u.pos, "timerlog-bad-target",
                           f"delayed time {u.delayed_time} but the record's TIMER_OUT_MS is {out}")
    real = msg.properties.get(P.REAL_TOPIC)
    want = java_string_hash(real) if real else 0
    if u.hash_code_of_real_topic != want:
        yield _problem(rel, u.pos, "timerlog-bad-target",
                       f"REAL_TOPIC hash {u.hash_code_of_real_topic}, the record's REAL_TOPIC {real!r} hashes to {want}")


def iter_wheel_slots(path: Path) -> Iterator[tuple[int, tuple[int, int, int, int, int]]]:
    """(index, (timeSecs, firstPos, lastPos, num, magic)) for every slot with a non-zero byte."""
    zero = bytes(_WHEEL_CHUNK)
    with open(path, "rb") as f:
        start = 0
        while True:
            chunk = f.read(_WHEEL_CHUNK)
            if len(chunk) < TIMER_SLOT_SIZE:
                return
            if chunk != zero[: len(chunk)]:
                for i in range(len(chunk) // TIMER_SLOT_SIZE):
                    at = i * TIMER_SLOT_SIZE
                    if chunk.count(0, at, at + TIMER_SLOT_SIZE) != TIMER_SLOT_SIZE:
                        yield start + i, TIMER_SLOT.unpack_from(chunk, at)
            start += len(chunk) // TIMER_SLOT_SIZE


def check_timer_wheel(root: Path, precision_ms: int = 1000, timerlog_file_size: int = DEFAULT_TIMERLOG_FILE_SIZE,
                      slots_total: int = TIMER_SLOTS_TOTAL) -> Iterator[Problem]:
    """Every written slot matches its TimerLog chain (firstPos, lastPos, num); every unit is reachable."""
    del timerlog_file_size  # units are found by scanning; kept for callers passing it
    root = Path(root)
    wheel_path = root / "timerwheel"
    if not wheel_path.is_file():
        return
    ring = slots_total * 2
    expected = ring * TIMER_SLOT_SIZE
    size = wheel_path.stat().st_size
    if size not in (0, expected):
        yield _problem("timerwheel", 0, "timerwheel-size",
                       f"timerwheel is {size} bytes, not {expected}; a broker refuses to start")
    files = offset_files(root / "timerlog")
    log_min = files[0].base if files else 0
    units = _UnitReader(files, _scan_ranges(files))
    on_chain: set[int] = set()
    slot_times: dict[int, int] = {}
    try:
        for idx, (t, first, last, num, _magic) in iter_wheel_slots(wheel_path):
            spos = idx * TIMER_SLOT_SIZE
            slot_times[idx] = t
            if t % ring != idx:
                yield _problem("timerwheel", spos, "wheel-slot-misplaced",
                               f"slot {idx} holds time {t}, which belongs in slot {t % ring}")
                continue
            if last == -1 and first == -1:
                continue
            if 0 <= first < log_min or 0 <= last < log_min:
                continue  # its TimerLog file was expired
            kind, bad = _walk_chain(units, t, first, last, num, precision_ms, on_chain)
            if bad is not None:
                yield _problem("timerwheel", spos, kind, f"slot {idx} (time {t}): {bad}")
        for u in iter_timerlog(files):
            t = u.delayed_time // precision_ms
            idx = t % ring
            if slot_times.get(idx) == t and u.offset not in on_chain:
                yield _problem(_default_rel(u.file.path), u.pos, "timerlog-unit-not-in-slot",
                               f"unit is not on the chain of its slot {idx} (time {t})")
            elif idx not in slot_times:
                yield _problem(_default_rel(u.file.path), u.pos, "timerlog-unit-slot-empty",
                               f"its slot {idx} (time {t}) is empty in the wheel")
    finally:
        units.close()


def _walk_chain(units: _UnitReader, t: int, first: int, last: int, num: int, precision_ms: int,
                on_chain: set[int]) -> tuple[str, str | None]:
    """(kind, what is wrong) for one slot's chain, or (..., None) when it matches."""
    pos, count, reached_first = last, 0, False
    while pos != -1:
        unit = units.read(pos)
        if unit is None:
            return "wheel-chain-broken", f"chain reaches TimerLog offset {pos}, which is not a valid unit"
        ut = (unit[3] + unit[4]) // precision_ms
        if ut != t:
            return "wheel-chain-wrong-slot", f"unit at TimerLog offset {pos} is for time {ut}, the slot for {t}"
        on_chain.add(pos)
        count += -1 if unit[2] & TIMER_MAGIC_DELETE else 1
        if pos == first:
            reached_first = True
        if unit[1] >= pos:
            return "wheel-chain-loop", f"prevPos chain does not go backwards at {pos}"
        pos = unit[1]
    if not reached_first:
        return "wheel-slot-first-mismatch", f"firstPos {first} is not on the chain from lastPos {last}"
    if num != count:
        return "wheel-slot-num-mismatch", f"num is {num}, the chain holds {count}"
    return "", None


def check_timer_store(root: Path, precision_ms: int = 1000,
                      timerlog_file_size: int = DEFAULT_TIMERLOG_FILE_SIZE) -> Iterator[Problem]:
    """Everything above, in one pass for `verify` and the tests."""
    yield from check_timerlog_targets(root, timerlog_file_size, precision_ms)
    yield from check_timer_wheel(root, precision_ms, timerlog_file_size)
