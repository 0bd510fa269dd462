"""TimerLog: a mapped-file queue of 52-byte units, one per enqueued timer message (formats.md §5.2).

RocketMQ 5.x `TimerLog` on top of `MappedFileQueue`: offset-named, full-size files; a unit that
would leave fewer than 16 bytes at the end of a file is preceded by a 16-byte blank
`[remaining][0L][BLANK_MAGIC_CODE]` and goes to the next file.

Units are written with `os.pwrite` rather than through a mapping, so a SIGKILL never loses an
appended unit (it sits in the page cache) and the process does not keep the whole log resident.
Files are full-size; their blocks are reserved in chunks ahead of the writes (`_write`), so a full
disk is a DiskFull before a unit is taken.
"""

from __future__ import annotations

import os
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rmqtool.errors import StoreError
from rmqtool.layouts.constants import BLANK_MAGIC_CODE, TIMERLOG_BLANK_SIZE, TIMERLOG_UNIT_SIZE
from rmqtool.layouts.timer import TIMERLOG_UNIT
from rmqtool.store.diskspace import create_reserved, reserve_ahead_of
from rmqtool.store.mappedfile import load_listing

UNIT_PRE_SIZE_FOR_MSG = 28  # offsetPy sits at unit + 28
UNIT_PRE_SIZE_FOR_METRIC = 40
_BLANK = TIMERLOG_BLANK_SIZE
TIMERLOG_BLANK = struct.Struct(">iqi")  # struct twin of layouts.timer.TimerLogBlank


def offset_to_file_name(offset: int) -> str:
    """`UtilAll.offset2FileName`: 20 zero-padded decimal digits."""
    return f"{offset:020d}"


def is_magic_ok(magic: int) -> bool:
    """`TimerMessageStore.isMagicOK`: only the four low flag bits may be set."""
    return (magic | 0xF) == 0xF


@dataclass(slots=True)
class TimerUnit:
    """One decoded unit. `offset` is its TimerLog offset; `delayed_time` is the slot time it was put into.

    A scan (`check.iter_timerlog`) also says where it found the unit: `file` is what the scan was
    given (has `.path` and `.base`) and `pos` the unit's position inside that file.
    `TimerLog.read_unit` leaves `file` None.
    """

    offset: int
    size: int
    prev_pos: int
    magic: int
    curr_write_time: int
    delay_time: int
    offset_py: int
    size_py: int
    hash_code_of_real_topic: int
    reserved: int
    file: Any = None

    @property
    def pos(self) -> int:
        """The position inside `file` (a scan's units only)."""
        return self.offset - self.file.base

    @property
    def delayed_time(self) -> int:
        return self.curr_write_time + self.delay_time


def pack_unit(prev_pos: int, magic: int, curr_write_time: int, delay_time: int, offset_py: int, size_py: int,
              topic_hash: int) -> bytes:
    return TIMERLOG_UNIT.pack(TIMERLOG_UNIT_SIZE, prev_pos, magic, curr_write_time, delay_time, offset_py,
                              size_py, topic_hash, 0)


TIMERLOG_RESERVE_AHEAD = 4 << 20  # blocks reserved past each write (80,659 units), as MappedFile does


class _File:
    __slots__ = ("from_offset", "path", "fd", "reserved")

    def __init__(self, from_offset: int, path: Path, fd: int, reserved: int = 0) -> None:
        self.from_offset = from_offset
        self.path = path
        self.fd = fd
        self.reserved = reserved  # bytes from the start with their blocks allocated (0: not known)


class TimerLog:
    """The `timerlog/` directory. `wrote_position` is the absolute end of the valid units."""

    def __init__(self, directory: Path, file_size: int, *, read_only: bool = False) -> None:
        if file_size < TIMERLOG_UNIT_SIZE + _BLANK:
            raise StoreError(f"timerlog file size {file_size} cannot hold one unit")
        self.directory = Path(directory)
        self.file_size = file_size
        self.read_only = read_only
        self.files: list[_File] = []
        self.wrote_position = 0
        self.flushed_where = 0
        self._dirty: set[int] = set()
        self._batch: list[tuple[_File, int, bytearray]] | None = None
        self._batch_start = 0

    # -- loading -------------------------------------------------------------------------------
    def load(self) -> None:
        """`MappedFileQueue.doLoad`, as Java's TimerLog.load is: the same `load_listing` as every queue.

        A zero-length last file is dropped; any other file of the wrong size, or a stray name, fails.
        """
        if not self.directory.exists():
            if self.read_only:
                return
            self.directory.mkdir(parents=True, exist_ok=True)
        for path in load_listing(self.directory, self.file_size, read_only=self.read_only,
                                 label=lambda p: f"timerlog file {p.name}"):
            fd = os.open(path, os.O_RDONLY if self.read_only else os.O_RDWR)
            # appends going on in the last file reserve its blocks from its start first (`_write`)
            self.files.append(_File(int(path.name), path, fd))
        # After loading every file counts as full; recovery sets the real end.
        self.wrote_position = self.files[-1].from_offset + self.file_size if self.files else 0
        self.flushed_where = self.wrote_position

    def close(self) -> None:
        self.flush()
        for f in self.files:
            os.close(f.fd)
        self.files.clear()

    # -- positions -----------------------------------------------------------------------------
    @property
    def min_offset(self) -> int:
        return self.files[0].from_offset if self.files else 0

    def _find(self, pos: int) -> _File | None:
        if not self.files:
            return None
        first = self.files[0].from_offset
        i = (pos - first) // self.file_size
        if 0 <= i < len(self.files) and self.files[i].from_offset <= pos < self.files[i].from_offset + self.file_size:
            return self.files[i]
        for f in self.files:  # files are contiguous in practice; this covers the odd gap
            if f.from_offset <= pos < f.from_offset + self.file_size:
                return f
        return None

    def offset_for_last_unit(self) -> int:
        """`TimerLog.getOffsetForLastUnit`: where the last unit of a full file starts."""
        fs = self.file_size
        return fs - (fs - _BLANK) % TIMERLOG_UNIT_SIZE - _BLANK - TIMERLOG_UNIT_SIZE

    # -- writing -------------------------------------------------------------------------------
    def _new_file(self, from_offset: int) -> _File:
        path = self.directory / offset_to_file_name(from_offset)
        first = min(self.file_size, TIMERLOG_RESERVE_AHEAD)
        fd = create_reserved(path, self.file_size, f"timerlog/{path.name}", exclusive=False, reserve=first)
        f = _File(from_offset, path, fd, first)
        self.files.append(f)
        return f

    def _last_writable(self) -> _File:
        if self.files:
            last = self.files[-1]
            if self.wrote_position < last.from_offset + self.file_size:
                return last
            return self._new_file(last.from_offset + self.file_size)
        start = self.wrote_position - self.wrote_position % self.file_size
        self.wrote_position = start
        return self._new_file(start)

    def append(self, data: bytes) -> int:
        """`TimerLog.append`: write one unit, blank-padding the file end; returns its position."""
        f = self._last_writable()
        in_file = self.wrote_position - f.from_offset
        if len(data) + _BLANK > self.file_size - in_file:
            remaining = self.file_size - in_file
            self._write(f, TIMERLOG_BLANK.pack(remaining, 0, BLANK_MAGIC_CODE), in_file)
            self.wrote_position = f.from_offset + self.file_size
            f = self._last_writable()
            in_file = 0
        pos = self.wrote_position
        self._write(f, data, in_file)
        self.wrote_position = pos + len(data)
        return pos

    def _write(self, f: _File, data: bytes, in_file: int) -> None:
        end = in_file + len(data)
        if end > f.reserved:  # DiskFull here, before the unit is taken (or written), on a full disk
            f.reserved = reserve_ahead_of(f.fd, f.reserved, end, TIMERLOG_RESERVE_AHEAD, self.file_size,
                                          f"timerlog/{f.path.name}")
        batch = self._batch
        if batch is None:
            os.pwrite(f.fd, data, in_file)
            self._dirty.add(f.fd)
            return
        if batch and batch[-1][0] is f and batch[-1][1] + len(batch[-1][2]) == in_file:
            batch[-1][2].extend(data)
        else:
            batch.append((f, in_file, bytearray(data)))

    # A batch collects appended units in memory and writes them with one pwrite per file. The
    # caller updates the wheel only after `commit_batch`, so the wheel never points past the log.
    def begin_batch(self) -> None:
        self._batch = []
        self._batch_start = self.wrote_position

    def commit_batch(self) -> None:
        batch, self._batch = self._batch, None
        for f, in_file, data in batch or ():
            os.pwrite(f.fd, data, in_file)
            self._dirty.add(f.fd)

    def abort_batch(self) -> None:
        """Forget the uncommitted units (files created meanwhile stay, zero-filled)."""
        if self._batch is not None:
            self._batch = None
            self.wrote_position = self._batch_start

    def flush(self) -> None:
        for fd in self._dirty:
            os.fsync(fd)
        self._dirty.clear()
        self.flushed_where = self.wrote_position

    def truncate_dirty_files(self, offset: int) -> None:
        """`MappedFileQueue.truncateDirtyFiles`: drop everything at and after `offset`."""
        keep: list[_File] = []
        for f in self.files:
            end = f.from_offset + self.file_size
            if end <= offset:
                keep.append(f)
            elif f.from_offset <= offset:
                # zero what follows, so a later scan stops where recovery stopped; the region
                # past the last write is already zero, so stop at the first all-zero block
                in_file = offset - f.from_offset
                if not self.read_only:
                    self._zero_tail(f, in_file)
                keep.append(f)
            else:
                os.close(f.fd)
                if not self.read_only:
                    f.path.unlink()
        self.files = keep
        self.wrote_position = offset
        self.flushed_where = min(self.flushed_where, offset)

    def _zero_tail(self, f: _File, in_file: int) -> None:
        block = 65536
        while in_file < self.file_size:
            n = min(block, self.file_size - in_file)
            if os.pread(f.fd, n, in_file).count(0) == n:
                return
            os.pwrite(f.fd, bytes(n), in_file)
            in_file += n

    def delete_expired_by_offset(self, min_commit_log_offset: int) -> int:
        """`deleteExpiredFileByOffsetForTimerLog`: drop leading full files whose last unit points
        below the CommitLog's min offset (their messages are gone anyway). Returns files deleted."""
        deleted = 0
        last_unit = self.offset_for_last_unit()
        while len(self.files) > 1:
            f = self.files[0]
            raw = os.pread(f.fd, TIMERLOG_UNIT_SIZE, last_unit)
            if len(raw) < TIMERLOG_UNIT_SIZE:
                break
            offset_py = TIMERLOG_UNIT.unpack(raw)[5]
            if offset_py >= min_commit_log_offset:
                break
            os.close(f.fd)
            f.path.unlink()
            self.files.pop(0)
            deleted += 1
        return deleted

    # -- reading -------------------------------------------------------------------------------
    def read_raw(self, pos: int, size: int = TIMERLOG_UNIT_SIZE) -> bytes | None:
        f = self._find(pos)
        if f is None:
            return None
        in_file = pos - f.from_offset
        data = os.pread(f.fd, min(size, self.file_size - in_file), in_file)
        return data if len(data) == size else None

    def read_unit(self, pos: int) -> TimerUnit | None:
        raw = self.read_raw(pos)
        if raw is None:
            return None
        return TimerUnit(pos, *TIMERLOG_UNIT.unpack(raw))

    def read_file(self, f: _File, length: int | None = None) -> bytes:
        return os.pread(f.fd, self.file_size if length is None else length, 0)

