"""Mapped files and the queue of them (RocketMQ's MappedFile / MappedFileQueue, formats.md §0).

A logical byte stream (CommitLog, one ConsumeQueue, TimerLog) is split into fixed-size files
named by the 20-digit offset of their first byte. Files are created at full size (their
names and sizes are Java's) and written through a shared mmap, so a write is a memcpy and
survives the death of the process; `flush` makes it durable with fdatasync (which releases the
GIL, unlike msync in CPython).

A store into a hole of a sparse mapping on a full disk is SIGBUS, so no write may land on a
block that is not allocated (`diskspace.reserve_blocks`). Blocks are reserved in chunks ahead
of the write position (`reserve_ahead` bytes past the end of each write, `ensure_reserved`):
a full disk is a DiskFull before the write, never a signal, and a new store takes a few chunks
instead of its files' full size. A file reopened for writing has its blocks reserved from its
start up to where the next write goes, which costs nothing (and works on a full disk) where
they are there already. On tmpfs even reading a hole through a writable mapping allocates, so
recovery reads a reopened file no further than its written end (`diskspace.written_end`).
"""

from __future__ import annotations

import mmap
import os
import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from rmqtool.errors import StoreError
from rmqtool.store.diskspace import create_reserved, map_read_only, reserve_ahead_of, written_end

# flushed CommitLog bytes kept mapped in RSS behind the write position: consumers that keep up read
# them without a fault; older pages refault from the page cache (no I/O) when read
RELEASE_BEHIND = 4 << 20
# the same for a ConsumeQueue: its 20-byte units are read by tailing consumers just behind the
# write position only; 32 MiB would keep whole 6 MB files resident (20 MB per million messages)
CQ_RELEASE_BEHIND = 64 << 10
# blocks reserved past the end of each write (rounded to pages): one fallocate per chunk appended
RESERVE_AHEAD = 32 << 20  # CommitLog (and the default): a batch is at most a few MB
CQ_RESERVE_AHEAD = 1 << 20  # ConsumeQueue: 52,428 units; thousands of queues stay small
# how often pages that reads faulted back in (consumers, the timer's enqueue scan) are dropped
# again: at 300,000 timer enqueues/s a 2 s period let the scan pull ~130 MB back into RSS
RELEASE_READ_BACK_EVERY_S = 0.5

OFFSET_NAME = re.compile(r"^\d{20}$")  # UtilAll.offset2FileName
_ZERO_CHUNK = bytes(1 << 20)


def offset_to_file_name(offset: int) -> str:
    """`UtilAll.offset2FileName`: 20 digits, zero-padded."""
    return f"{offset:020d}"


@dataclass(frozen=True)
class OffsetFile:
    """One file of a mapped-file queue: its name is the offset of its first byte (`base`)."""

    path: Path
    base: int

    @property
    def name(self) -> str:
        return self.path.name


def offset_files(directory: Path) -> list[OffsetFile]:
    """The files of a mapped-file queue's directory, in offset order, without opening them.

    Only regular files with a 20-digit name count, as `MappedFileQueue.load` takes them; anything
    else (a short or long digit name, a temp file, a subdirectory) is left out. A directory that
    does not exist has none.
    """
    directory = Path(directory)
    if not directory.is_dir():
        return []
    out = [OffsetFile(p, int(p.name)) for p in directory.iterdir() if OFFSET_NAME.match(p.name) and p.is_file()]
    return sorted(out, key=lambda f: f.base)


def load_listing(directory: Path, file_size: int, *, read_only: bool = False, label: Callable[[Path], str] = str,
                 suffix: str = "") -> list[Path]:
    """The files `MappedFileQueue.doLoad` opens, in name order; a store it would refuse raises StoreError.

    Java lists every entry of the directory, sorted by name, and skips only subdirectories: an
    empty file that sorts last is deleted (here: skipped when `read_only`), any other file of the
    wrong size fails the load, and one of the right size whose name is not a number throws from
    `Long.parseLong`, which fails the store's load too. So a stray file (`junk.txt`, a copy, a
    temp file) makes a broker refuse to start unless it is empty and last. A file of the right
    size named by a number that is not 20 digits Java would load at that offset, out of order;
    rmqtool refuses it. Errors read `"{label(path)} is N bytes, expected M{suffix}"`.
    """
    entries = sorted(directory.iterdir(), key=lambda p: p.name)
    out = []
    for i, path in enumerate(entries):
        if path.is_dir():
            continue
        try:
            size = path.stat().st_size
        except OSError:
            size = 0  # a dangling link: Java's File.length() is 0
        if size == 0 and i == len(entries) - 1:
            if not read_only:
                path.unlink(missing_ok=True)
            continue
        if size != file_size:
            raise StoreError(f"{label(path)} is {size} bytes, expected {file_size}{suffix}")
        if not OFFSET_NAME.match(path.name):
            raise StoreError(f"{label(path)}: the name is not a 20-digit offset{suffix}")
        out.append(path)
    return out


def open_mapped(path: Path, size: int, *, create: bool = False, read_only: bool = False,
                label: str | None = None, reserve: int | None = None) -> tuple[int, mmap.mmap]:
    """Open `path` and map all its `size` bytes: `(fd, mapping)`, both the caller's to close.

    With `create` the file must not exist yet and is made `size` bytes long with its first
    `reserve` bytes (default: all) reserved (DiskFull, and no file left behind, when the disk
    has no room); otherwise it must
    already be `size` bytes. A read-only mapping is `map_read_only` (no fault on a full tmpfs).
    If anything after the open fails, the fd is closed. Errors name the file `label`, by
    default its name when it cannot be opened and its path when its size is wrong.
    """
    if create:
        fd = create_reserved(path, size, label, reserve=reserve)
    else:
        try:
            fd = os.open(path, os.O_RDONLY if read_only else os.O_RDWR)
        except OSError as e:
            raise StoreError(f"cannot open {label or path.name}: {e.strerror}") from None
    try:
        actual = os.fstat(fd).st_size
        if actual != size:
            raise StoreError(f"{label or path} is {actual} bytes, expected {size}")
        mm = map_read_only(fd, size) if read_only else mmap.mmap(fd, size, access=mmap.ACCESS_WRITE)
    except BaseException:
        os.close(fd)
        if create:
            path.unlink(missing_ok=True)
        raise
    return fd, mm


def close_mapped(fd: int, mm: mmap.mmap) -> None:
    """Unmap and close what `open_mapped` returned."""
    try:
        mm.close()
    except BufferError:
        pass  # a memoryview still alive; the mapping goes away with it
    os.close(fd)


class MappedFile:
    """One fixed-size file of a stream, mapped in full."""

    def __init__(self, path: Path, file_size: int, *, create: bool = False, read_only: bool = False,
                 release_behind: int | None = None, reserve_ahead: int | None = None) -> None:
        self.path = path
        self.file_size = file_size
        self.from_offset = int(path.name)
        self.read_only = read_only
        # positions are relative to the file start; recovery sets them, appends move them
        self.wrote_position = 0
        self.flushed_position = 0
        self.released_position = 0  # pages below this were dropped from RSS after a flush
        self._released_at = 0.0
        self.release_behind = release_behind  # None: the module's RELEASE_BEHIND
        self.reserve_ahead = RESERVE_AHEAD if reserve_ahead is None else reserve_ahead
        first = min(file_size, self.reserve_ahead)
        self.fd, self.mm = open_mapped(path, file_size, create=create, read_only=read_only, reserve=first)
        # bytes from the file start whose blocks are allocated: stores below it cannot fault
        # (0 for a reopened file until `ensure_reserved` asks for its blocks)
        self.reserved_until = first if create else 0
        self.closed = False

    # -- positions ----------------------------------------------------------------------------
    @property
    def remaining(self) -> int:
        return self.file_size - self.wrote_position

    def is_full(self) -> bool:
        return self.wrote_position >= self.file_size

    # -- I/O ----------------------------------------------------------------------------------
    def append(self, data: bytes | bytearray | memoryview) -> int:
        """Copy `data` at the write position; returns the position it was written at."""
        pos = self.wrote_position
        end = pos + len(data)
        if end > self.reserved_until:
            self.ensure_reserved(end)
        self.mm[pos:end] = data
        self.wrote_position = end
        return pos

    def ensure_reserved(self, end: int) -> None:
        """Make bytes [0, end) safe to store into: reserve up to `reserve_ahead` past `end`.

        DiskFull (nothing written, the reserved point unchanged) when the file system has no
        room for the blocks up to `end`. A reopened file is reserved from its start, a no-op
        (also on a full disk) where its blocks exist.
        """
        if end <= self.reserved_until or self.read_only:
            return
        self.reserved_until = reserve_ahead_of(self.fd, self.reserved_until, end, self.reserve_ahead,
                                               self.file_size, str(self.path))

    def reserve_for_recovery(self) -> None:
        """Reserve a reopened last file a page past its written end (a chunk more where the disk
        has room), before recovery reads it.

        Recovery reads a little past the last record (the next header); on tmpfs a read there
        would allocate. A file this store wrote has its blocks past every write, so this succeeds
        on a full disk too.
        """
        if not self.read_only:
            self.ensure_reserved(min(self.file_size, written_end(self.fd, self.file_size) + mmap.PAGESIZE))

    def readable_end(self) -> int:
        """How far a scan of this file through its mapping may read without faulting on a full disk.

        What is reserved, or else what was written (a reopened file): past that, only zeros.
        """
        if self.read_only or self.reserved_until >= self.file_size:
            return self.file_size
        return max(self.reserved_until, written_end(self.fd, self.file_size))

    def write_at(self, pos: int, data: bytes | bytearray | memoryview) -> None:
        end = pos + len(data)
        if end > self.reserved_until:
            self.ensure_reserved(end)
        self.mm[pos:end] = data

    def read(self, pos: int, size: int) -> bytes:
        return self.mm[pos : pos + size]

    def flush(self) -> int:
        """Make everything written so far durable; returns the flushed position."""
        pos = self.wrote_position
        if pos > self.flushed_position and not self.read_only and not self.closed:
            os.fdatasync(self.fd)
            self.flushed_position = pos
        if not self.read_only and not self.closed:
            self._release_behind(self.flushed_position)
        return pos

    def _release_behind(self, pos: int) -> None:
        """Drop flushed pages older than the newest RELEASE_BEHIND bytes from this process's RSS.

        MADV_DONTNEED on a shared file mapping only unmaps the pages: they stay in the page
        cache (and were just made durable), so a later read refaults them without I/O. Without
        it every page ever appended counts in RSS, hundreds of MB on a busy store. A file
        written and flushed to its end is released whole: nothing appends to it again.
        """
        behind = RELEASE_BEHIND if self.release_behind is None else self.release_behind
        upto = self.file_size if pos >= self.file_size else (pos - behind) & ~(mmap.PAGESIZE - 1)
        now = time.monotonic()
        # new flushed bytes: release them; every RELEASE_READ_BACK_EVERY_S also the pages reads brought back
        start = 0 if now - self._released_at >= RELEASE_READ_BACK_EVERY_S else self.released_position
        if upto > start:
            try:
                self.mm.madvise(mmap.MADV_DONTNEED, start, upto - start)
            except (OSError, ValueError, AttributeError):  # no madvise here: RSS just stays higher
                pass
            self.released_position = max(self.released_position, upto)
            if start == 0:
                self._released_at = now

    def zero_from(self, pos: int) -> None:
        """Clear bytes from `pos` to the end of the data, so a torn tail cannot be read again.

        Scans in 1 MiB chunks and stops at the first all-zero chunk past the dirty bytes
        (a file's unwritten tail is a hole), which keeps this cheap on 1 GiB files. Nothing
        past the written end is read or written: it is zeros already, and may be a hole.
        """
        end = self.readable_end()
        p = pos
        while p < end:
            n = min(len(_ZERO_CHUNK), end - p)
            chunk = self.mm[p : p + n]
            if chunk == _ZERO_CHUNK[:n]:
                break
            self.ensure_reserved(p + n)  # about to store into the mapping: no hole may be under it
            self.mm[p : p + n] = _ZERO_CHUNK[:n]
            p += n

    def last_modified_ms(self) -> int:
        return int(os.stat(self.path).st_mtime * 1000)

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            close_mapped(self.fd, self.mm)

    def destroy(self) -> None:
        self.close()
        self.path.unlink(missing_ok=True)


class MappedFileQueue:
    """The ordered files of one stream in one directory."""

    def __init__(self, directory: Path, file_size: int, *, read_only: bool = False,
                 reserve_on_load: bool = True, release_behind: int | None = None,
                 reserve_ahead: int | None = None) -> None:
        self.directory = directory
        self.file_size = file_size
        self.read_only = read_only
        # the last file of a loaded queue gets its blocks at load (the CommitLog), or before the
        # first write into it (ConsumeQueues: thousands of queues of an older store, most never
        # written again, would otherwise all be allocated in full at open)
        self.reserve_on_load = reserve_on_load
        self.release_behind = release_behind  # flushed bytes each file keeps resident (MappedFile)
        self.reserve_ahead = reserve_ahead  # blocks each file reserves past its writes (MappedFile)
        self.files: list[MappedFile] = []
        self.flushed_where = 0
        # files made ahead of need (`preallocate`), not part of the stream until `new_file` takes them
        self.pending: list[MappedFile] = []

    def load(self) -> None:
        """`MappedFileQueue.doLoad` (`load_listing`): empty last file deleted, a wrong size or a stray file = error."""
        if not self.directory.exists():
            return
        if not self.directory.is_dir():
            raise StoreError(f"{self.directory} is not a directory")
        for path in load_listing(self.directory, self.file_size, read_only=self.read_only,
                                 suffix="; the store does not load"):
            mf = MappedFile(path, self.file_size, read_only=self.read_only, release_behind=self.release_behind,
                            reserve_ahead=self.reserve_ahead)
            mf.wrote_position = mf.flushed_position = self.file_size  # fixed later by recovery
            self.files.append(mf)
        if self.files and not self.read_only and self.reserve_on_load:
            try:
                self.files[-1].reserve_for_recovery()  # appends go on in it; recovery reads to its end
            except BaseException:
                self.close()
                self.files = []
                raise

    # -- lookup -------------------------------------------------------------------------------
    @property
    def last(self) -> MappedFile | None:
        return self.files[-1] if self.files else None

    @property
    def first(self) -> MappedFile | None:
        return self.files[0] if self.files else None

    def min_offset(self) -> int:
        return self.files[0].from_offset if self.files else 0

    def max_offset(self) -> int:
        last = self.last
        return last.from_offset + last.wrote_position if last else 0

    def find(self, offset: int) -> MappedFile | None:
        """The file holding `offset` (files are contiguous, so this is arithmetic)."""
        files = self.files
        if not files:
            return None
        first = files[0].from_offset
        i = (offset - first) // self.file_size
        if 0 <= i < len(files):
            mf = files[i]
            if mf.from_offset <= offset < mf.from_offset + self.file_size:
                return mf
        for mf in files:  # a gap (never written by us): fall back to a scan
            if mf.from_offset <= offset < mf.from_offset + self.file_size:
                return mf
        return None

    def _next_base(self, start_offset: int) -> int:
        last = self.last
        return last.from_offset + self.file_size if last else start_offset - start_offset % self.file_size

    def new_file(self, start_offset: int = 0) -> MappedFile:
        """Create the next file: at last.from + size, or at the aligned `start_offset` if empty.

        DiskFull when the file system has no room for its blocks (no file is left behind).
        """
        if self.read_only:
            raise StoreError("store opened read-only")
        base = self._next_base(start_offset)
        if self.pending and self.pending[0].from_offset == base:
            mf = self.pending.pop(0)
        else:
            self._drop_pending()
            try:
                self.directory.mkdir(parents=True, exist_ok=True)
            except OSError as e:
                raise StoreError(f"cannot create {self.directory}: {e.strerror}") from None
            mf = MappedFile(self.directory / offset_to_file_name(base), self.file_size, create=True,
                            release_behind=self.release_behind, reserve_ahead=self.reserve_ahead)
        self.files.append(mf)
        return mf

    def preallocate(self, count: int, start_offset: int = 0) -> None:
        """Make sure the next `count` files exist, reserved, before an append needs them.

        The role of Java's AllocateMappedFileService (which makes the next file ahead of time):
        here it lets a put learn that the disk is full before it writes anything. A file made
        here and never used is empty; recovery deletes it like any file past the valid end.
        """
        if count <= 0:
            return
        base = self._next_base(start_offset)
        if self.pending and self.pending[0].from_offset != base:
            self._drop_pending()
        while len(self.pending) < count:
            nxt = self.pending[-1].from_offset + self.file_size if self.pending else base
            if self.read_only:
                raise StoreError("store opened read-only")
            try:
                self.directory.mkdir(parents=True, exist_ok=True)
            except OSError as e:
                raise StoreError(f"cannot create {self.directory}: {e.strerror}") from None
            self.pending.append(MappedFile(self.directory / offset_to_file_name(nxt), self.file_size, create=True,
                                           release_behind=self.release_behind, reserve_ahead=self.reserve_ahead))

    def reserve_for_append(self, nbytes: int, slack: int = 0) -> None:
        """Blocks for appends of `nbytes` in all (plus `slack`): in the last file, and in each file
        made ahead (`preallocate`) as much as could go there. DiskFull before anything is written.
        """
        size = self.file_size
        last = self.files[-1] if self.files else None
        if last is not None and last.wrote_position < size:
            end = min(size, last.wrote_position + nbytes + slack)
            if end > last.reserved_until:  # reserved already: no call (every single put asks this)
                last.ensure_reserved(end)
        for mf in self.pending:
            mf.ensure_reserved(min(size, nbytes + slack))

    def _drop_pending(self) -> None:
        for mf in self.pending:
            mf.destroy()
        self.pending = []

    def last_writable(self, start_offset: int = 0) -> MappedFile:
        last = self.last
        if last is None or last.is_full():
            return self.new_file(start_offset)
        return last

    # -- recovery and cleanup ------------------------------------------------------------------
    def set_positions(self, offset: int) -> None:
        """After recovery: every file below `offset` is full, the one holding it ends there."""
        for mf in self.files:
            if mf.from_offset + self.file_size <= offset:
                mf.wrote_position = mf.flushed_position = self.file_size
            elif mf.from_offset <= offset:
                mf.wrote_position = mf.flushed_position = offset - mf.from_offset
        self.flushed_where = offset

    def truncate_dirty_files(self, offset: int, *, zero: bool = True) -> None:
        """`truncateDirtyFiles`: cut the stream at `offset`; later files are deleted."""
        keep = []
        for mf in self.files:
            end = mf.from_offset + self.file_size
            if end <= offset:
                keep.append(mf)
            elif mf.from_offset <= offset:
                pos = offset - mf.from_offset
                mf.wrote_position = mf.flushed_position = pos
                if zero and not self.read_only:
                    mf.zero_from(pos)
                keep.append(mf)
            elif self.read_only:
                mf.close()
            else:
                mf.destroy()
        self.files = keep
        self.flushed_where = min(self.flushed_where, offset)
        if not self.read_only:
            self._drop_pending()

    def flush(self) -> int:
        """Flush every file with unflushed data; returns the stream offset now durable.

        The target is read before flushing: bytes appended meanwhile may not be durable yet,
        and a SYNC_FLUSH putter must never be told they are.
        """
        target = self.max_offset()
        for mf in list(self.files):
            if mf.from_offset + mf.file_size <= self.flushed_where and mf.flushed_position >= mf.wrote_position:
                continue
            mf.flush()
        self.flushed_where = max(self.flushed_where, target)
        return target

    def delete_expired_by_time(self, expired_ms: int, now_ms: int, *, immediately: bool, batch_max: int,
                               interval_s: float = 0.0, on_delete: Callable[[MappedFile], None] | None = None) -> int:
        """`deleteExpiredFileByTime`: oldest first, never the last, stop at the first young file."""
        deleted = 0
        for mf in list(self.files[:-1]):
            if not (immediately or mf.last_modified_ms() + expired_ms <= now_ms):
                break
            if on_delete:
                on_delete(mf)
            mf.destroy()
            self.files.remove(mf)
            deleted += 1
            if deleted >= batch_max:
                break
            if interval_s:
                time.sleep(interval_s)
        return deleted

    def delete_expired_by_offset(self, keep_from: Callable[[MappedFile], bool]) -> int:
        """`deleteExpiredFileByOffset`: drop leading files (never the last) that `keep_from` rejects."""
        deleted = 0
        for mf in list(self.files[:-1]):
            if keep_from(mf):
                break
            mf.destroy()
            self.files.remove(mf)
            deleted += 1
        return deleted

    def close(self) -> None:
        for mf in self.files:
            mf.close()
        self._drop_pending()  # as AllocateMappedFileService.shutdown deletes the files made ahead

    def destroy(self) -> None:
        for mf in self.files + self.pending:
            mf.destroy()
        self.files = []
        self.pending = []
