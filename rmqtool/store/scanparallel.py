"""The recovery scan's record check on every core: forked processes check later stretches of the
CommitLog while this one checks the first.

Why: after a crash, recovery checks each record from the checkpoint's file on (Java's
`CommitLog.recoverAbnormally`, one thread); in Python that loop costs about 0.7 us a record, so a
1 GiB file takes most of a second on one core. Records never carry state from one to the next,
so a stretch that starts at a true record boundary can be checked on its own. A boundary is found
the way `inspect` finds one (`sync_point`): the magic code at +4 and the record's own
physicalOffset at +28. The stretches are joined only where the scan of one ended exactly at the
boundary the next began at; anywhere else (damage, a false sync point, a child that failed) the
offset reached so far is handed back and the caller goes on from it on this core, so the answer
is always the one-core answer. Only the stretch where nothing is dispatched is split: the records
handed to the dispatcher are scanned by the caller, in order.
"""

from __future__ import annotations

import os
import signal
import struct
import warnings
from typing import Any, Protocol

from rmqtool.layouts.constants import MESSAGE_MAGIC_CODE, MESSAGE_MAGIC_CODE_V2


class CommitLog(Protocol):
    """What is used of `commitlog.CommitLog` (named here so that this module needs nothing of it)."""

    mfq: Any
    file_size: int

    def scan_range(self, start: int, *, check_crc: bool, on_record: Any, stop: int | None = None) -> int: ...


# below this many bytes to check, a fork costs more than it saves
PARALLEL_SCAN_MIN = 64 << 20
MAX_JOBS = 4
SYNC_WINDOW = 16 << 20  # how far past a stretch's planned start a sync point is looked for
_Q = struct.Struct(">q")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_MAGICS = (struct.pack(">i", MESSAGE_MAGIC_CODE), struct.pack(">i", MESSAGE_MAGIC_CODE_V2))


def sync_point(buf, base: int, at: int, limit: int) -> int | None:
    """A position in [at, limit) of `buf` (a CommitLog file starting at offset `base`) that looks
    like a record's start: its magic code at +4 and its physicalOffset (+28) naming base + position.

    A record's physicalOffset names its own position, which makes any record a sync marker; a
    false match only costs the fallback to a sequential scan. `buf` needs `find` (mmap, bytes).
    """
    size = len(buf)
    limit = min(limit, size)
    for magic in _MAGICS:
        c = buf.find(magic, at + 4, limit + 4)
        while c >= 4:
            p = c - 4
            total = _I32.unpack_from(buf, p)[0]
            if p + 36 <= size and _I64.unpack_from(buf, p + 28)[0] == base + p and 91 <= total <= size - p:
                return p
            c = buf.find(magic, c + 1, limit + 4)
    return None


def scan_jobs() -> int:
    """The processes to check with: the cores this process may run on, at most MAX_JOBS."""
    try:
        n = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        n = os.cpu_count() or 1
    return max(1, min(MAX_JOBS, n))


def _split(cl: CommitLog, start: int, end: int, jobs: int) -> list[int]:
    """Sync points near start + k * (end - start) / jobs (scan_ahead keeps those inside (start, end))."""
    points: list[int] = []
    for k in range(1, jobs):
        target = start + (end - start) * k // jobs
        mf = cl.mfq.find(target)
        if mf is None:
            continue
        at = target - mf.from_offset
        # never past what the file holds: on tmpfs even reading a hole takes a page (SIGBUS when full)
        limit = min(cl.file_size, at + SYNC_WINDOW, mf.readable_end())
        if at >= limit:
            continue
        p = sync_point(mf.mm, mf.from_offset, at, limit)
        if p is not None:
            points.append(mf.from_offset + p)
    return points


def _fork_scan(cl: CommitLog, start: int, stop: int, check_crc: bool) -> tuple[int, int]:
    """A child checking [start, stop) (`scan_range` with `stop`): (pid, pipe it answers on)."""
    r, w = os.pipe()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # 3.12+: fork with threads alive
        pid = os.fork()
    if pid == 0:  # the child: answer on the pipe and leave without running any of the parent's code
        code = 1
        try:
            os.close(r)
            os.write(w, _Q.pack(cl.scan_range(start, check_crc=check_crc, on_record=None, stop=stop)))
            code = 0
        finally:
            os._exit(code)
    os.close(w)
    return pid, r


def _answer(pid: int, fd: int) -> int | None:
    """What a child found (None if it failed), once it has exited."""
    data = b""
    try:
        while len(data) < 8:
            chunk = os.read(fd, 8 - len(data))
            if not chunk:
                break
            data += chunk
    finally:
        os.close(fd)
        _reap(pid)
    return _Q.unpack(data)[0] if len(data) == 8 else None


def _reap(pid: int) -> None:
    try:
        os.waitpid(pid, 0)
    except ChildProcessError:
        pass


def scan_ahead(cl: CommitLog, start: int, end: int, check_crc: bool) -> int | None:
    """Check the records from `start` up to about `end` on every core; None when not worth it.

    Returns an offset the one-core scan from `start` passes through at a record boundary (at
    or past `end` when every stretch joined), or the offset where it ends: the caller goes on
    scanning from there, which costs one record when the log ends there.
    """
    jobs = scan_jobs()
    files = cl.mfq.files
    if files:  # the stretches are cut where records can be: not in the last file's unwritten tail
        end = min(end, files[-1].from_offset + files[-1].readable_end())
    if jobs < 2 or end - start < PARALLEL_SCAN_MIN or not hasattr(os, "fork"):
        return None
    points = sorted({p for p in _split(cl, start, end, jobs) if start < p < end})
    if not points:
        return None
    bounds = [*points, end]
    children: list[tuple[int, int]] = []
    try:
        for i, p in enumerate(points):
            try:
                children.append(_fork_scan(cl, p, bounds[i + 1], check_crc))
            except OSError:
                break  # no more processes: the stretches without one are scanned here after all
        reached = cl.scan_range(start, check_crc=check_crc, on_record=None, stop=points[0])
        for i, (pid, fd) in enumerate(children):
            if reached != points[i]:
                break  # the log ends before this stretch, or the sync point was false
            answer = _answer(pid, fd)
            children[i] = (0, -1)
            if answer is None:
                break
            reached = answer
        return reached
    finally:
        for pid, fd in children:
            if pid:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                os.close(fd)
                _reap(pid)
