"""Consistency checks of a store's timer files, for `verify` and the timer tests.

Pure functions over a store directory (nothing is written); each yields problem dicts
`{"file", "pos", "kind", "detail"}` with `file` relative to the store root and `pos` the byte
offset inside that file. What is checked:
* every TimerLog unit up to the end of the log is well-formed (size 52, magic flags only);
* every unit points at a real CommitLog record on `rmq_sys_wheel_timer` of exactly `sizePy`
  bytes (units below the CommitLog's first file are skipped: those files were expired);
* every written wheel slot sits at its index, and walking its chain from lastPos through prevPos
  stays in that slot, ends at firstPos, and counts to `num` (+1 per unit, -1 per delete marker);
* every unit whose slot still holds its time is reachable from that slot.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

from rmqtool.layouts.constants import (
    BLANK_MAGIC_CODE,
    DEFAULT_TIMERLOG_FILE_SIZE,
    TIMER_MAGIC_DELETE,
    TIMER_SLOT_SIZE,
    TIMER_SLOTS_TOTAL,
    TIMER_TOPIC,
    TIMERLOG_UNIT_SIZE,
)
from rmqtool.layouts.message import Blank, RecordError, decode_record
from rmqtool.layouts.timer import TIMER_SLOT, TIMERLOG_UNIT
from rmqtool.store.timer.timerlog import is_magic_ok

Problem = dict[str, object]
_WHEEL_CHUNK = 65536


def _problem(file: str, pos: int, kind: str, detail: str) -> Problem:
    return {"file": file, "pos": pos, "kind": kind, "detail": detail}


def _log_files(directory: Path) -> list[tuple[int, Path]]:
    if not directory.is_dir():
        return []
    out = []
    for p in sorted(directory.iterdir()):
        if p.is_file() and p.name.isdigit():
            out.append((int(p.name), p))
    return out


def scan_timerlog(root: Path, file_size: int = DEFAULT_TIMERLOG_FILE_SIZE) -> Iterator[tuple[int, tuple] | Problem]:
    """Yield (absolute position, unit tuple) for each valid unit, or a problem dict; stops at the log's end."""
    for from_offset, path in _log_files(Path(root) / "timerlog"):
        name = f"timerlog/{path.name}"
        size = path.stat().st_size
        if size != file_size:
            yield _problem(name, 0, "timerlog-file-size", f"{size} bytes, expected {file_size}")
            continue
        with open(path, "rb") as f:
            pos = 0
            while pos + 16 <= size:
                head = f.read(TIMERLOG_UNIT_SIZE) if pos + TIMERLOG_UNIT_SIZE <= size else f.read(16)
                unit_size, _prev, magic = TIMERLOG_UNIT.unpack_from(head.ljust(TIMERLOG_UNIT_SIZE, b"\0"))[:3]
                if magic == BLANK_MAGIC_CODE:
                    if unit_size != size - pos:
                        yield _problem(name, pos, "timerlog-bad-blank", f"blank says {unit_size} bytes left, {size - pos} are")
                    break
                if unit_size == 0 and magic == 0:
                    return  # end of the log: zeros follow
                if unit_size != TIMERLOG_UNIT_SIZE or not is_magic_ok(magic) or len(head) < TIMERLOG_UNIT_SIZE:
                    yield _problem(name, pos, "timerlog-bad-unit", f"size {unit_size}, magic {magic}: not a TimerLog unit")
                    return
                yield from_offset + pos, TIMERLOG_UNIT.unpack(head)
                pos += TIMERLOG_UNIT_SIZE


class _CommitLog:
    """Read-only random access to `commitlog/` by absolute offset."""

    def __init__(self, root: Path) -> None:
        self.files = _log_files(Path(root) / "commitlog")
        self.file_size = self.files[0][1].stat().st_size if self.files else 0
        self.min_offset = self.files[0][0] if self.files else 0
        self.max_offset = self.files[-1][0] + self.file_size if self.files else 0

    def read(self, offset: int, size: int) -> bytes | None:
        for base, path in self.files:
            if base <= offset < base + self.file_size:
                with open(path, "rb") as f:
                    f.seek(offset - base)
                    data = f.read(size)
                return data if len(data) == size else None
        return None


def check_timerlog_targets(root: Path, timerlog_file_size: int = DEFAULT_TIMERLOG_FILE_SIZE) -> Iterator[Problem]:
    """Every unit is well-formed and points at a real timer-topic record of `sizePy` bytes."""
    root = Path(root)
    commitlog = _CommitLog(root)
    for item in scan_timerlog(root, timerlog_file_size):
        if isinstance(item, dict):
            yield item
            continue
        pos, unit = item
        name, in_file = _timerlog_name(pos, timerlog_file_size)
        offset_py, size_py = unit[5], unit[6]
        if offset_py < commitlog.min_offset:
            continue
        raw = commitlog.read(offset_py, size_py) if size_py > 0 else None
        if raw is None:
            yield _problem(name, in_file, "timerlog-dangling",
                           f"offsetPy {offset_py} sizePy {size_py} is not inside the CommitLog (ends at {commitlog.max_offset})")
            continue
        try:
            msg = decode_record(raw, 0, read_body=False, check_crc=False)
        except (Blank, RecordError) as e:
            yield _problem(name, in_file, "timerlog-bad-target", f"offsetPy {offset_py}: no record there ({e})")
            continue
        if msg.total_size != size_py:
            yield _problem(name, in_file, "timerlog-bad-target", f"offsetPy {offset_py}: record is {msg.total_size} bytes, unit says {size_py}")
        elif msg.topic != TIMER_TOPIC:
            yield _problem(name, in_file, "timerlog-bad-target", f"offsetPy {offset_py}: record is on {msg.topic!r}, not {TIMER_TOPIC}")


def _timerlog_name(pos: int, file_size: int) -> tuple[str, int]:
    base = pos - pos % file_size
    return f"timerlog/{base:020d}", pos - base


def _read_unit(files: list[tuple[int, Path]], file_size: int, pos: int, cache: dict) -> tuple | None:
    base = pos - pos % file_size
    fd = cache.get(base)
    if fd is None:
        path = next((p for b, p in files if b == base), None)
        if path is None:
            return None
        fd = cache[base] = os.open(path, os.O_RDONLY)
    raw = os.pread(fd, TIMERLOG_UNIT_SIZE, pos - base)
    return TIMERLOG_UNIT.unpack(raw) if len(raw) == TIMERLOG_UNIT_SIZE else None


def check_timer_wheel(root: Path, precision_ms: int = 1000, timerlog_file_size: int = DEFAULT_TIMERLOG_FILE_SIZE,
                      slots_total: int = TIMER_SLOTS_TOTAL) -> Iterator[Problem]:
    """Every written slot matches its TimerLog chain (firstPos, lastPos, num); every unit is reachable."""
    root = Path(root)
    wheel_path = root / "timerwheel"
    if not wheel_path.exists():
        return
    ring = slots_total * 2
    expected = ring * TIMER_SLOT_SIZE
    size = wheel_path.stat().st_size
    if size != expected:
        yield _problem("timerwheel", 0, "timerwheel-size", f"{size} bytes, expected {expected}")
        return
    files = _log_files(root / "timerlog")
    log_min = files[0][0] if files else 0
    log_end = _log_end(root, timerlog_file_size)
    fds: dict[int, int] = {}
    reached: set[int] = set()
    live_times: set[int] = set()
    try:
        with open(wheel_path, "rb") as f:
            for chunk_start in range(0, ring, _WHEEL_CHUNK):
                chunk = f.read(_WHEEL_CHUNK * TIMER_SLOT_SIZE)
                if chunk.count(0) == len(chunk):
                    continue
                for i in range(len(chunk) // TIMER_SLOT_SIZE):
                    t, first, last, num, _magic = TIMER_SLOT.unpack_from(chunk, i * TIMER_SLOT_SIZE)
                    if t == 0 and first == 0 and last == 0 and num == 0:
                        continue
                    idx = chunk_start + i
                    pos = idx * TIMER_SLOT_SIZE
                    if t % ring != idx:
                        yield _problem("timerwheel", pos, "wheel-slot-misplaced", f"slot time {t} belongs at index {t % ring}, found at {idx}")
                        continue
                    if last == -1 and first == -1:
                        continue
                    if 0 <= first < log_min or 0 <= last < log_min:
                        continue  # its TimerLog file was expired
                    live_times.add(t)
                    yield from _check_chain(t, first, last, num, pos, precision_ms, timerlog_file_size, files, fds,
                                            log_end, reached)
        for item in scan_timerlog(root, timerlog_file_size):
            if isinstance(item, dict):
                continue
            upos, unit = item
            slot_t = (unit[3] + unit[4]) // precision_ms
            if slot_t in live_times and upos not in reached:
                name, in_file = _timerlog_name(upos, timerlog_file_size)
                yield _problem(name, in_file, "timerlog-unit-not-in-slot",
                               f"unit for slot {slot_t} is not on that slot's chain")
    finally:
        for fd in fds.values():
            os.close(fd)


def _log_end(root: Path, file_size: int) -> int:
    end = 0
    for item in scan_timerlog(root, file_size):
        if not isinstance(item, dict):
            end = item[0] + TIMERLOG_UNIT_SIZE
    return end


def _check_chain(t: int, first: int, last: int, num: int, pos: int, precision_ms: int, file_size: int,
                 files: list[tuple[int, Path]], fds: dict, log_end: int, reached: set[int]) -> Iterator[Problem]:
    count, cur, tail, steps = 0, last, -1, 0
    limit = log_end // TIMERLOG_UNIT_SIZE + 1
    while cur != -1:
        if cur >= log_end or cur < 0:
            yield _problem("timerwheel", pos, "wheel-slot-beyond-timerlog", f"slot {t}: chain reaches {cur}, the TimerLog ends at {log_end}")
            return
        unit = _read_unit(files, file_size, cur, fds)
        if unit is None or unit[0] != TIMERLOG_UNIT_SIZE or not is_magic_ok(unit[2]):
            yield _problem("timerwheel", pos, "wheel-chain-broken", f"slot {t}: no valid TimerLog unit at {cur}")
            return
        if (unit[3] + unit[4]) // precision_ms != t:
            yield _problem("timerwheel", pos, "wheel-chain-wrong-slot",
                           f"slot {t}: unit at {cur} belongs to slot {(unit[3] + unit[4]) // precision_ms}")
            return
        steps += 1
        if steps > limit:
            yield _problem("timerwheel", pos, "wheel-chain-loop", f"slot {t}: prevPos chain does not end")
            return
        reached.add(cur)
        count += -1 if unit[2] & TIMER_MAGIC_DELETE else 1
        tail, cur = cur, unit[1]
    if tail != first:
        yield _problem("timerwheel", pos, "wheel-slot-first-mismatch", f"slot {t}: firstPos {first}, chain ends at {tail}")
    if count != num:
        yield _problem("timerwheel", pos, "wheel-slot-num-mismatch", f"slot {t}: num {num}, chain counts {count}")


def check_timer_store(root: Path, precision_ms: int = 1000,
                      timerlog_file_size: int = DEFAULT_TIMERLOG_FILE_SIZE) -> Iterator[Problem]:
    """Everything above, in one pass for `verify`."""
    yield from check_timerlog_targets(root, timerlog_file_size)
    yield from check_timer_wheel(root, precision_ms, timerlog_file_size)
