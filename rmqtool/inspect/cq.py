"""ConsumeQueue reading: units of one queue across its files, and the queue's offset range.

A unit is valid while `offset >= 0 and size > 0` (`ConsumeQueue.recover`); pre-fill blanks
`(0, 0x7FFFFFFF, 0)` come before the first real unit of a queue that started above offset 0.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from rmqtool.inspect.files import QueueFile, ReadOnlyFile, queue_files
from rmqtool.layouts.constants import CQ_STORE_UNIT_SIZE
from rmqtool.layouts.consumequeue import CQ_UNIT

BLANK_SIZE = 0x7FFFFFFF


@dataclass(frozen=True, slots=True)
class CqEntry:
    file: QueueFile
    pos: int  # byte position in the file
    queue_offset: int
    commit_log_offset: int
    size: int
    tags_code: int

    @property
    def is_blank(self) -> bool:
        return self.size == BLANK_SIZE and self.commit_log_offset == 0 and self.tags_code == 0


@dataclass
class CqEnd:
    """Where the valid units of a queue end, and what follows."""

    file: QueueFile | None = None
    pos: int = 0
    trailing_nonzero: int = -1  # first non-zero byte after the end in that file, or -1


def iter_units(files: list[QueueFile], end: CqEnd | None = None) -> Iterator[CqEntry]:
    """Valid units in order; stops at the first invalid one (recorded in `end`)."""
    unpack = CQ_UNIT.unpack_from
    for qf in files:
        with ReadOnlyFile(qf.path) as rof:
            buf, size = rof.buf, rof.size
            pos = 0
            while pos + CQ_STORE_UNIT_SIZE <= size:
                off, sz, tags = unpack(buf, pos)
                if off < 0 or sz <= 0:
                    if end is not None:
                        end.file, end.pos = qf, pos
                        end.trailing_nonzero = rof.first_nonzero(pos + CQ_STORE_UNIT_SIZE) if (
                            off != 0 or sz != 0 or tags != 0) else rof.first_nonzero(pos)
                    return
                yield CqEntry(qf, pos, (qf.base + pos) // CQ_STORE_UNIT_SIZE, off, sz, tags)
                pos += CQ_STORE_UNIT_SIZE
    if end is not None and files:
        end.file, end.pos = files[-1], files[-1].path.stat().st_size


@dataclass
class QueueRange:
    min_offset: int = 0
    max_offset: int = 0
    max_phys_end: int = -1  # lastUnit.offset + size, as CQ recovery computes maxPhyOffsetInCQ


def queue_range(directory: Path, commitlog_min: int = 0) -> QueueRange:
    """[min, max) of a queue: max = units written; min = first unit at or above the CommitLog min."""
    files = queue_files(directory)
    r = QueueRange()
    if not files:
        return r
    r.min_offset = files[0].base // CQ_STORE_UNIT_SIZE
    found_min = False
    last = None
    for u in iter_units(files):
        last = u
        if not found_min:
            if u.is_blank or u.commit_log_offset < commitlog_min:
                r.min_offset = u.queue_offset + 1
            else:
                found_min = True
                r.min_offset = u.queue_offset
    if last is not None:
        r.max_offset = last.queue_offset + 1
        if not last.is_blank:
            r.max_phys_end = last.commit_log_offset + last.size
    else:
        r.max_offset = r.min_offset
    if not found_min:
        r.min_offset = r.max_offset
    return r


def queue_dirs(cq_root: Path) -> Iterator[tuple[str, int, Path]]:
    """(topic, queueId, directory) for every queue under consumequeue/."""
    if not cq_root.is_dir():
        return
    for tdir in sorted(cq_root.iterdir()):
        if not tdir.is_dir():
            continue
        for qdir in sorted(tdir.iterdir(), key=lambda p: (len(p.name), p.name)):
            if qdir.is_dir() and qdir.name.lstrip("-").isdigit():
                yield tdir.name, int(qdir.name), qdir
