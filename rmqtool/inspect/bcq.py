"""BatchConsumeQueue reading: the units of one queue across its files, and its queue offset range.

A unit is valid while `commitLogOffset >= 0 and size > 0 and msgBaseOffset >= 0 and batchSize > 0`
(`BatchConsumeQueue.recover`); the first that is not ends the queue. There are no pre-fill blanks:
the queue offset is the unit's `msgBaseOffset`, not its position, so nothing needs padding.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from rmqtool.inspect.cq import CqEnd
from rmqtool.inspect.files import QueueFile, ReadOnlyFile, queue_files
from rmqtool.layouts.batchcq import BCQ_UNIT
from rmqtool.layouts.constants import BCQ_STORE_UNIT_SIZE

BCQ_DIR = "batchconsumequeue"  # StorePathConfigHelper.getStorePathBatchConsumeQueue


@dataclass(frozen=True, slots=True)
class BcqEntry:
    file: QueueFile
    pos: int  # byte position in the file
    commit_log_offset: int
    size: int
    tags_code: int
    store_timestamp: int
    msg_base_offset: int
    batch_size: int
    compacted_offset: int
    reserved: int

    @property
    def end_offset(self) -> int:
        """The queue offset after the unit's last message (`maxOffsetInQueue` when it is the last)."""
        return self.msg_base_offset + self.batch_size


def iter_bcq_units(files: list[QueueFile], end: CqEnd | None = None) -> Iterator[BcqEntry]:
    """Valid units in order; stops at the first invalid one (recorded in `end`)."""
    unpack = BCQ_UNIT.unpack_from
    for qf in files:
        with ReadOnlyFile(qf.path) as rof:
            buf, size = rof.buf, rof.size
            pos = 0
            while pos + BCQ_STORE_UNIT_SIZE <= size:
                off, sz, tags, ts, base, num, compacted, reserved = unpack(buf, pos)
                if off < 0 or sz <= 0 or base < 0 or num <= 0:
                    if end is not None:
                        end.file, end.pos = qf, pos
                        zero = bytes(buf[pos : pos + BCQ_STORE_UNIT_SIZE]) == bytes(BCQ_STORE_UNIT_SIZE)
                        end.trailing_nonzero = rof.first_nonzero(pos) if zero else pos
                    return
                yield BcqEntry(qf, pos, off, sz, tags, ts, base, num, compacted, reserved)
                pos += BCQ_STORE_UNIT_SIZE
    if end is not None and files:
        end.file, end.pos = files[-1], files[-1].path.stat().st_size


@dataclass
class BcqRange:
    """[min, max) of a BatchConsumeQueue in queue offsets (messages), and how it is stored."""

    min_offset: int = 0
    max_offset: int = 0
    max_phys_end: int = -1  # lastUnit.commitLogOffset + size
    units: int = 0
    files: int = 0


def bcq_range(directory: Path, commitlog_min: int = 0) -> BcqRange:
    """max = the last unit's msgBaseOffset + batchSize (`reviseMaxOffsetInQueue`); min = the
    msgBaseOffset of the first unit whose record is at or above the CommitLog min (as verify)."""
    files = queue_files(directory)
    r = BcqRange(files=len(files))
    found_min = False
    last = None
    for u in iter_bcq_units(files):
        last = u
        r.units += 1
        if not found_min and u.commit_log_offset >= commitlog_min:
            found_min, r.min_offset = True, u.msg_base_offset
    if last is not None:
        r.max_offset = last.end_offset
        r.max_phys_end = last.commit_log_offset + last.size
    if not found_min:
        r.min_offset = r.max_offset
    return r
