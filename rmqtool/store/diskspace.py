"""Disk space: blocks reserved before a file is mapped for writing, hole-safe read mappings, usage.

A store file is written through a shared mmap. If its blocks are not allocated (a file only
truncated to size is sparse), the first store into a hole makes the kernel allocate a block in
the page fault, and on a full file system that fault is SIGBUS: the process dies without an
error anyone can catch. RocketMQ's MappedFile has the same hazard and its warm-up
(`warmMappedFile`, off by default) writes every page to make them real; here every file that is
created or reopened for writing gets its blocks with `posix_fallocate` first (`reserve_blocks`),
so a full disk is an ENOSPC before the write, raised as `DiskFull`. Append-only files (CommitLog,
ConsumeQueue, TimerLog, index entries) are reserved in chunks just ahead of their write position
(`reserve_blocks(start=...)`, `create_reserved(reserve=...)`) rather than in full at creation:
a new store then takes tens of MB, not its files' 1.5 GB, and still no write lands in a hole.

On tmpfs even *reading* a hole through a mapping allocates a page, so a read-only mapping of a
sparse file on a full tmpfs faults as well; `map_read_only` copies such a file's data regions
into anonymous memory instead (holes stay zero pages that cost nothing).

`disk_used_ratio` is `UtilAll.getDiskPartitionSpaceUsedPercent`, which CleanCommitLogService
compares with `diskSpaceWarningLevelRatio` and the other ratios.
"""

from __future__ import annotations

import ctypes
import errno
import mmap
import os
import sys
from pathlib import Path

from rmqtool.errors import StoreError

TMPFS_MAGIC = 0x01021994  # linux/magic.h: shmem, where a read fault on a hole allocates
_ZEROS = bytes(1 << 20)
_COPY_CHUNK = 8 << 20


class DiskFull(StoreError):
    """A file could not get its blocks: the file system is full (ENOSPC / EDQUOT)."""


def reserve_blocks(fd: int, size: int, label: str, *, start: int = 0) -> None:
    """Allocate every block of `fd`'s bytes [start, size) (the file grows to `size` if shorter),
    or raise DiskFull / StoreError.

    `posix_fallocate` allocates without writing (unwritten extents on ext4/xfs, pages on tmpfs);
    on a file system that cannot do it (EOPNOTSUPP) every block is written instead, each with
    the bytes it holds (a hole reads as zeros), so the content stays what it was. Blocks already
    allocated are left alone by fallocate, so this is cheap (and succeeds on a full disk) over a
    range that was reserved before.
    """
    if size <= start:
        return
    try:
        os.posix_fallocate(fd, start, size - start)
        return
    except OSError as e:
        if e.errno in (errno.ENOSPC, errno.EDQUOT):
            raise DiskFull(f"cannot reserve {size - start} bytes for {label}: {e.strerror}") from None
        if e.errno not in (errno.EOPNOTSUPP, errno.EINVAL, errno.ENOSYS):
            raise StoreError(f"cannot reserve {size - start} bytes for {label}: {e.strerror}") from None
    try:
        if os.fstat(fd).st_size < size:
            os.ftruncate(fd, size)
        pos = start
        while pos < size:
            n = min(len(_ZEROS), size - pos)
            data = os.pread(fd, n, pos)
            os.pwrite(fd, data + _ZEROS[: n - len(data)], pos)
            pos += n
        os.fsync(fd)
    except OSError as e:
        cls = DiskFull if e.errno in (errno.ENOSPC, errno.EDQUOT) else StoreError
        raise cls(f"cannot reserve {size - start} bytes for {label}: {e.strerror}") from None


def reserve_ahead_of(fd: int, reserved: int, end: int, ahead: int, size: int, label: str) -> int:
    """Blocks for the bytes below `end` of a file whose first `reserved` bytes have them; returns
    the new reserved point.

    Asks for `ahead` bytes more (rounded up to pages, at most `size`) so that one fallocate
    serves many writes. When that fails on a full disk, only up to `end`: a reopened file whose
    blocks were reserved past its writes before (its reserved point is not known, 0) has them,
    and fallocate over existing blocks succeeds on a full disk too. DiskFull when even that fails.
    """
    page = mmap.PAGESIZE
    target = min(size, -(-(end + ahead) // page) * page)
    try:
        reserve_blocks(fd, target, label, start=reserved)
        return target
    except DiskFull:
        target = min(size, -(-end // page) * page)
        reserve_blocks(fd, target, label, start=reserved)
        return target


def create_reserved(path: Path, size: int, label: str | None = None, *, exclusive: bool = True,
                    reserve: int | None = None) -> int:
    """Create `path`, `size` bytes long, with its first `reserve` bytes (all by default) reserved;
    returns its fd (O_RDWR).

    On failure a file this call created is removed again. Without `exclusive` an existing file
    is opened and reserved instead (and kept, whatever happens).
    """
    created = True
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o644)
    except FileExistsError:
        if exclusive:
            raise StoreError(f"cannot create {label or path.name}: it exists already") from None
        created = False
        try:
            fd = os.open(path, os.O_RDWR)
        except OSError as e:
            raise StoreError(f"cannot open {label or path.name}: {e.strerror}") from None
    except OSError as e:
        cls = DiskFull if e.errno in (errno.ENOSPC, errno.EDQUOT) else StoreError
        raise cls(f"cannot create {label or path.name}: {e.strerror}") from None
    try:
        if reserve is not None and reserve < size:
            if os.fstat(fd).st_size < size:
                os.ftruncate(fd, size)  # full size logically, as Java's files are: no blocks taken
            reserve_blocks(fd, reserve, label or path.name)
        else:
            reserve_blocks(fd, size, label or path.name)
    except OSError as e:
        os.close(fd)
        if created:
            path.unlink(missing_ok=True)
        cls = DiskFull if e.errno in (errno.ENOSPC, errno.EDQUOT) else StoreError
        raise cls(f"cannot create {label or path.name}: {e.strerror}") from None
    except BaseException:
        os.close(fd)
        if created:
            path.unlink(missing_ok=True)
        raise
    return fd


_fstatfs = None


def _fs_type(fd: int) -> int | None:
    """`fstatfs(fd).f_type` (Linux), None where it cannot be asked."""
    global _fstatfs
    if _fstatfs is None:
        try:
            _fstatfs = ctypes.CDLL(None, use_errno=True).fstatfs
        except (OSError, AttributeError):
            return None
    fstatfs = _fstatfs
    buf = ctypes.create_string_buffer(512)  # struct statfs is 120 bytes on 64-bit Linux
    if fstatfs(fd, buf) != 0:
        return None
    width = ctypes.sizeof(ctypes.c_long)  # f_type is __fsword_t, a long
    return int.from_bytes(buf.raw[:width], sys.byteorder, signed=True)


def has_hole(fd: int, size: int) -> bool:
    """Does the file have a hole below `size`? (SEEK_HOLE finds one before the end.)"""
    try:
        return os.lseek(fd, 0, os.SEEK_HOLE) < size
    except OSError:
        return False


def written_end(fd: int, size: int, start: int = 0) -> int:
    """Where the first hole at or after `start` begins (`size` when none): the end of the bytes written.

    An append-only file is written from its start, so nothing but zeros lies past this point;
    blocks reserved but never written count as a hole too (SEEK_HOLE on ext4 and tmpfs), which
    only makes this an upper bound of the data that is cheap to read without faulting.
    """
    try:
        return min(size, os.lseek(fd, start, os.SEEK_HOLE))
    except OSError:
        return size


def hole_reads_allocate(fd: int) -> bool:
    """True on tmpfs, where faulting a hole in, even to read it, takes a page from the file system."""
    return _fs_type(fd) == TMPFS_MAGIC


def map_read_only(fd: int, size: int) -> mmap.mmap:
    """A read-only view of the file's first `size` bytes that cannot fault on a full file system.

    Normally an ACCESS_READ mapping. A sparse file on tmpfs is copied instead, data region by
    data region (SEEK_DATA / SEEK_HOLE), into an anonymous mapping of the same size: its holes
    read as zeros without allocating anything, and a full tmpfs cannot fault the reader. The
    copy is a snapshot, which is what a reader of a live store sees anyway (a zero tail ends it).
    """
    if size and has_hole(fd, size) and hole_reads_allocate(fd):
        return _copy_data(fd, size)
    return mmap.mmap(fd, size, access=mmap.ACCESS_READ)


def _copy_data(fd: int, size: int) -> mmap.mmap:
    mm = mmap.mmap(-1, size)
    view = memoryview(mm)
    try:
        pos = 0
        while pos < size:
            try:
                data = os.lseek(fd, pos, os.SEEK_DATA)
            except OSError:  # ENXIO: nothing but a hole from here on
                break
            if data >= size:
                break
            end = min(size, os.lseek(fd, data, os.SEEK_HOLE))
            while data < end:
                n = os.preadv(fd, [view[data : min(end, data + _COPY_CHUNK)]], data)
                if n <= 0:
                    break
                data += n
            pos = end
    finally:
        view.release()
    return mm


def disk_used_ratio(path: Path) -> float:
    """`UtilAll.getDiskPartitionSpaceUsedPercent`: used / (used + usable), rounded up to 0.01; -1 on error.

    Java's File.getFreeSpace / getUsableSpace are statvfs's f_bfree / f_bavail: the blocks
    reserved for root count as used, as they do in `df`.
    """
    try:
        st = os.statvfs(path)
    except OSError:
        return -1.0
    total = st.f_blocks * st.f_frsize
    if total <= 0:
        return -1.0
    used = total - st.f_bfree * st.f_frsize
    entire = used + st.f_bavail * st.f_frsize
    if entire <= 0:
        return -1.0
    return (used * 100 // entire + (1 if used * 100 % entire else 0)) / 100


def disk_util(root: Path) -> str:
    """`SendMessageProcessor.diskUtil`: the used ratios of the CommitLog, ConsumeQueue and index paths."""
    root = Path(root)
    ratios = [disk_used_ratio(p if p.exists() else root) for p in (root / "commitlog", root / "consumequeue",
                                                                   root / "index")]
    return "CL: {:5.2f} CQ: {:5.2f} INDEX: {:5.2f}".format(*ratios)
