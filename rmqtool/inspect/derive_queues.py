"""Writers of the BatchConsumeQueue and ConsumeQueueExt files, as a 5.x broker's dispatch writes them.

`BatchConsumeQueue.putBatchMessagePositionInfo` appends one 46-byte unit per record of a BatchCQ
topic; `ConsumeQueueExt.put` appends a variable-length unit and returns the address the
ConsumeQueue unit then stores in place of the tagsCode. The fixture generator uses them to make
stores that hold these files; verify reads what they describe (`batch_unit_of`).
"""

from __future__ import annotations

import os
from pathlib import Path

from rmqtool.inspect.derive import _create_sparse, offset_name
from rmqtool.layouts import properties as P
from rmqtool.layouts.batchcq import BCQ_UNIT, INVALID_POS
from rmqtool.layouts.constants import BCQ_STORE_UNIT_SIZE
from rmqtool.layouts.cqext import (
    CQ_EXT_HEAD,
    END_BLANK_DATA_LENGTH,
    MAX_EXT_UNIT_SIZE,
    MIN_EXT_UNIT_SIZE,
    decorate,
)
from rmqtool.layouts.message import MessageExt


def batch_unit_of(msg: MessageExt) -> tuple[int, int]:
    """(msgBaseOffset, batchSize) the dispatch gives a record: INNER_BASE and INNER_NUM when the
    record has both (`CommitLog.setBatchSizeIfNeeded`), else its queue offset and 1 (`DispatchRequest`)."""
    base, num = msg.properties.get(P.INNER_BASE), msg.properties.get(P.INNER_NUM)
    if base is not None and num is not None:
        try:
            return int(base), int(num)
        except ValueError:
            pass
    return msg.queue_offset, 1


class _Appender:
    """Appends bytes to an offset-named mapped-file queue of fixed-size files."""

    def __init__(self, directory: Path, file_size: int) -> None:
        self.dir = directory
        self.file_size = file_size
        self.offset = 0  # the stream's write position

    def write(self, data: bytes) -> int:
        """Write `data` at the write position (which must leave it inside one file); its offset."""
        at = self.offset
        fbase = at - at % self.file_size
        path = self.dir / offset_name(fbase)
        if not path.exists():
            _create_sparse(path, self.file_size)
        with open(path, "r+b") as fh:
            os.pwrite(fh.fileno(), data, at - fbase)
        self.offset += len(data)
        return at


class BatchConsumeQueueWriter:
    """`putBatchMessagePositionInfo`: units back to back; a file holds whole units only."""

    def __init__(self, directory: Path, file_size: int) -> None:
        if file_size % BCQ_STORE_UNIT_SIZE:
            raise ValueError(f"BatchConsumeQueue file size {file_size} is not a multiple of {BCQ_STORE_UNIT_SIZE}")
        self.out = _Appender(directory, file_size)

    def put(self, phys: int, size: int, tags: int, store_timestamp: int, msg_base_offset: int,
            batch_size: int) -> int:
        return self.out.write(BCQ_UNIT.pack(phys, size, tags, store_timestamp, msg_base_offset, batch_size,
                                            INVALID_POS, 0))


class ConsumeQueueExtWriter:
    """`ConsumeQueueExt.put`: returns the decorated address, or None when the unit is too big (the
    broker then stores the plain tagsCode). A unit that does not fit before the file's last
    END_BLANK_DATA_LENGTH bytes makes the writer put int16 -1 there and go on in the next file."""

    def __init__(self, directory: Path, file_size: int) -> None:
        self.out = _Appender(directory, file_size)

    def put(self, tags: int, msg_store_time: int, bit_map: bytes = b"") -> int | None:
        size = MIN_EXT_UNIT_SIZE + len(bit_map)
        if size > MAX_EXT_UNIT_SIZE:
            return None
        fs = self.out.file_size
        wrote = self.out.offset % fs
        if size > fs - wrote - END_BLANK_DATA_LENGTH:  # fullFillToEnd
            self.out.write((-1).to_bytes(2, "big", signed=True))
            self.out.offset += fs - wrote - 2
        return decorate(self.out.write(CQ_EXT_HEAD.pack(size, tags, msg_store_time, len(bit_map)) + bit_map))
