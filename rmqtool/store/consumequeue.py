"""ConsumeQueues: per topic/queue arrays of 20-byte units pointing into the CommitLog (formats.md §3.1).

Unit k (logical queue offset k) sits at byte k*20 of the queue's stream. Mirrors RocketMQ's
`ConsumeQueue` (putMessagePositionInfo, fillPreBlank, recover, correctMinOffset,
truncateDirtyLogicFiles) and `ConsumeQueueStore` (one queue per topic/queueId directory).
"""

from __future__ import annotations

import struct
from pathlib import Path

from rmqtool.layouts.constants import CQ_STORE_UNIT_SIZE
from rmqtool.layouts.consumequeue import CQ_BLANK_UNIT, CQ_UNIT
from rmqtool.store.mappedfile import CQ_RELEASE_BEHIND, CQ_RESERVE_AHEAD, MappedFile, MappedFileQueue

UNIT = CQ_STORE_UNIT_SIZE
BLANK_SIZE = 0x7FFFFFFF
_pack_unit = CQ_UNIT.pack_into
_unpack_unit = CQ_UNIT.unpack_from
_Q = struct.Struct(">q")


def cq_file_size(configured: int) -> int:
    """`getMappedFileSizeConsumeQueue`: rounded up to a whole number of units."""
    return -(-configured // UNIT) * UNIT


_HIGH_BIT = bytes(1 if b >= 0x80 else 0 for b in range(256))


def valid_unit_count(buf: bytes | bytearray | memoryview | object, units: int) -> int:
    """How many leading units have commitLogOffset >= 0 and size > 0 (the `recover` loop condition).

    Done column-wise in C instead of one Python step per unit: strided slices pick the sign
    byte of every offset and size, and OR-ing the four size-byte columns finds size == 0.
    """
    end = units * UNIT
    first = units
    for col in (0, 8):  # sign bytes of commitLogOffset and size
        hit = bytes(buf[col:end:UNIT]).translate(_HIGH_BIT).find(1)  # type: ignore[index]
        if 0 <= hit < first:
            first = hit
    ored = 0
    for col in (8, 9, 10, 11):
        ored |= int.from_bytes(bytes(buf[col:end:UNIT]), "big")  # type: ignore[index]
    zero = ored.to_bytes(units, "big").find(0)
    if 0 <= zero < first:
        first = zero
    return first


class ConsumeQueue:
    """One topic/queue: `consumequeue/<topic>/<queueId>/`."""

    def __init__(self, root: Path, topic: str, queue_id: int, file_size: int, *, read_only: bool = False) -> None:
        self.topic = topic
        self.queue_id = queue_id
        self.file_size = file_size
        self.mfq = MappedFileQueue(root / topic / str(queue_id), file_size, read_only=read_only, reserve_on_load=False,
                                   release_behind=CQ_RELEASE_BEHIND, reserve_ahead=CQ_RESERVE_AHEAD)
        self.max_physic_offset = -1  # end (offset + size) of the last unit written
        self.min_logic_offset = 0  # byte position of the first valid unit
        self.last_store_timestamp = 0

    def load(self) -> None:
        self.mfq.load()

    # -- write ------------------------------------------------------------------------------------
    def put(self, offset: int, size: int, tags_code: int, cq_offset: int) -> bool:
        """`putMessagePositionInfo`: append the unit for logical offset `cq_offset`.

        Skipped when the CommitLog range is already covered (re-dispatch after recovery) or
        when the unit exists. The first unit of a new queue at k > 0 pre-fills blanks.
        """
        if offset + size <= self.max_physic_offset:
            return True
        expected = cq_offset * UNIT
        mfq = self.mfq
        files = mfq.files
        if not files:
            mf = mfq.new_file(expected)
            if expected > mf.from_offset:
                self._fill_pre_blank(mf, expected - mf.from_offset)
            self.min_logic_offset = expected
        else:
            mf = files[-1]
            if mf.wrote_position >= self.file_size:
                mf = mfq.new_file()
        current = mf.from_offset + mf.wrote_position
        if cq_offset != 0 and expected < current:
            return True  # already there ("[BUG] maybe try to build consume queue repeatedly")
        pos = mf.wrote_position
        if pos + UNIT > mf.reserved_until:
            mf.ensure_reserved(pos + UNIT)  # the next chunk, or a reopened file's blocks: no hole under the unit
        _pack_unit(mf.mm, pos, offset, size, tags_code)
        mf.wrote_position = pos + UNIT
        self.max_physic_offset = offset + size
        return True

    def put_batch(self, units: list[tuple[int, int, int, int]]) -> None:
        """`put(offset, size, tagsCode, cqOffset)` for each unit, in order.

        A live append hands over consecutive queue offsets and growing CommitLog offsets, so
        when the first unit is the next one and all fit in the last file they are packed and
        copied in one go; anything else (a new queue, a file boundary, a re-dispatch) goes
        unit by unit through `put`.
        """
        files = self.mfq.files
        if files:
            mf = files[-1]
            pos = mf.wrote_position
            first, last = units[0], units[-1]
            if (pos + len(units) * UNIT <= self.file_size and first[0] + first[1] > self.max_physic_offset
                    and first[3] * UNIT == mf.from_offset + pos and last[3] - first[3] == len(units) - 1):
                if pos + len(units) * UNIT > mf.reserved_until:
                    mf.ensure_reserved(pos + len(units) * UNIT)
                pack = CQ_UNIT.pack
                data = b"".join([pack(offset, size, tags_code) for offset, size, tags_code, _ in units])
                mf.mm[pos : pos + len(data)] = data
                mf.wrote_position = pos + len(data)
                self.max_physic_offset = last[0] + last[1]
                return
        put = self.put
        for offset, size, tags_code, cq_offset in units:
            put(offset, size, tags_code, cq_offset)

    def put_columns(self, offsets: list[int], sizes: list[int], tags_codes: list[int], first_cq_offset: int) -> None:
        """`put_batch` of units given column by column, with consecutive logical offsets from
        `first_cq_offset`: what one append's run of records to one queue hands over, packed in
        one `map` without a tuple per unit."""
        n = len(offsets)
        files = self.mfq.files
        if files and n:
            mf = files[-1]
            pos = mf.wrote_position
            if (pos + n * UNIT <= self.file_size and offsets[0] + sizes[0] > self.max_physic_offset
                    and first_cq_offset * UNIT == mf.from_offset + pos):
                if pos + n * UNIT > mf.reserved_until:
                    mf.ensure_reserved(pos + n * UNIT)
                data = b"".join(map(CQ_UNIT.pack, offsets, sizes, tags_codes))
                mf.mm[pos : pos + len(data)] = data
                mf.wrote_position = pos + len(data)
                self.max_physic_offset = offsets[-1] + sizes[-1]
                return
        put = self.put
        for i, (offset, size, tags_code) in enumerate(zip(offsets, sizes, tags_codes, strict=True)):
            put(offset, size, tags_code, first_cq_offset + i)

    def _fill_pre_blank(self, mf: MappedFile, until: int) -> None:
        mf.write_at(0, CQ_BLANK_UNIT * (until // UNIT))
        mf.wrote_position = until

    # -- read -------------------------------------------------------------------------------------
    @property
    def max_offset_in_queue(self) -> int:
        return self.mfq.max_offset() // UNIT

    @property
    def min_offset_in_queue(self) -> int:
        return self.min_logic_offset // UNIT

    def get_unit(self, index: int) -> tuple[int, int, int] | None:
        """(commitLogOffset, size, tagsCode) of logical offset `index`, or None."""
        pos = index * UNIT
        mf = self.mfq.find(pos)
        if mf is None:
            return None
        rel = pos - mf.from_offset
        if rel + UNIT > mf.wrote_position:
            return None
        return _unpack_unit(mf.mm, rel)

    def read_units(self, index: int, max_units: int) -> list[tuple[int, int, int]]:
        """Up to `max_units` consecutive units from `index`, within one file (as getIndexBuffer)."""
        pos = index * UNIT
        mf = self.mfq.find(pos)
        if mf is None:
            return []
        rel = pos - mf.from_offset
        end = min(mf.wrote_position, rel + max_units * UNIT)
        if end <= rel:
            return []
        return list(CQ_UNIT.iter_unpack(mf.mm[rel:end]))

    def last_unit(self) -> tuple[int, int, int] | None:
        max_off = self.max_offset_in_queue
        if max_off <= self.min_offset_in_queue:
            return None
        return self.get_unit(max_off - 1)

    # -- recovery ---------------------------------------------------------------------------------
    def recover(self) -> None:
        """`ConsumeQueue.recover`: from the 3rd-last file, units are valid while offset>=0 and size>0."""
        files = self.mfq.files
        if not files:
            return
        idx = max(0, len(files) - 3)
        process = files[idx].from_offset
        max_phys = -1
        while idx < len(files):
            mf = files[idx]
            # no further than the written end: the rest is zeros, and may be a hole (tmpfs faults)
            n = valid_unit_count(mf.mm, mf.readable_end() // UNIT)
            pos = n * UNIT
            for k in range(n - 1, -1, -1):
                off, size, _tags = _unpack_unit(mf.mm, k * UNIT)
                if size != BLANK_SIZE:
                    max_phys = off + size
                    break
            process = mf.from_offset + pos
            if pos < self.file_size:
                break
            idx += 1
        self.max_physic_offset = max_phys
        self.mfq.truncate_dirty_files(process)
        if max_phys < 0:
            self.max_physic_offset = self._last_real_end()

    def _last_real_end(self) -> int:
        """End of the newest non-blank unit (earlier files may hold it when the last holds none)."""
        for i in range(self.max_offset_in_queue - 1, self.min_offset_in_queue - 1, -1):
            unit = self.get_unit(i)
            if unit is None:
                break
            if unit[1] != BLANK_SIZE:
                return unit[0] + unit[1]
            break
        return -1

    def truncate_dirty_logic_files(self, phy_offset: int) -> None:
        """`truncateDirtyLogicFiles`: drop units pointing at or beyond `phy_offset`."""
        end = self.max_offset_in_queue
        lo = self.min_offset_in_queue
        i = end
        while i > lo:
            unit = self.get_unit(i - 1)
            if unit is None or unit[1] == BLANK_SIZE or unit[0] < phy_offset:
                break
            i -= 1
        if i != end:
            self.mfq.truncate_dirty_files(i * UNIT)
            self.max_physic_offset = -1
            if i > lo:
                unit = self.get_unit(i - 1)
                if unit is not None and unit[1] != BLANK_SIZE:
                    self.max_physic_offset = unit[0] + unit[1]
            if i < lo:
                self.min_logic_offset = i * UNIT

    def correct_min_offset(self, phy_min: int) -> None:
        """`correctMinOffset`: the first unit whose CommitLog offset is still in the log."""
        for mf in self.mfq.files:
            n = mf.wrote_position // UNIT
            if n == 0:
                continue
            last_off, last_size, _ = _unpack_unit(mf.mm, (n - 1) * UNIT)
            if last_size == BLANK_SIZE or last_off < phy_min:
                continue
            lo, hi = 0, n - 1
            while lo < hi:  # first unit i with a real offset >= phy_min
                mid = (lo + hi) // 2
                off, size, _ = _unpack_unit(mf.mm, mid * UNIT)
                if size != BLANK_SIZE and off >= phy_min:
                    hi = mid
                else:
                    lo = mid + 1
            self.min_logic_offset = mf.from_offset + lo * UNIT
            return
        self.min_logic_offset = self.mfq.max_offset()

    def flush(self) -> None:
        self.mfq.flush()

    def close(self) -> None:
        self.mfq.close()


class ConsumeQueueStore:
    """All ConsumeQueues under `consumequeue/`, created on first put."""

    def __init__(self, root: Path, file_size: int, *, read_only: bool = False) -> None:
        self.root = root
        self.file_size = cq_file_size(file_size)
        self.read_only = read_only
        self.queues: dict[tuple[str, int], ConsumeQueue] = {}

    def load(self) -> None:
        if not self.root.is_dir():
            return
        for topic_dir in sorted(self.root.iterdir()):
            if not topic_dir.is_dir():
                continue
            for qdir in sorted(topic_dir.iterdir()):
                if not qdir.is_dir() or not qdir.name.lstrip("-").isdigit():
                    continue
                cq = ConsumeQueue(self.root, topic_dir.name, int(qdir.name), self.file_size, read_only=self.read_only)
                cq.load()
                self.queues[(topic_dir.name, int(qdir.name))] = cq

    def find(self, topic: str, queue_id: int) -> ConsumeQueue | None:
        return self.queues.get((topic, queue_id))

    def find_or_create(self, topic: str, queue_id: int) -> ConsumeQueue:
        cq = self.queues.get((topic, queue_id))
        if cq is None:
            cq = ConsumeQueue(self.root, topic, queue_id, self.file_size, read_only=self.read_only)
            self.queues[(topic, queue_id)] = cq
        return cq

    def recover(self) -> int:
        """Recover every queue; returns maxPhyOffsetInCQ (-1 when no queue has units)."""
        max_phys = -1
        for cq in self.queues.values():
            cq.recover()
            max_phys = max(max_phys, cq.max_physic_offset)
        return max_phys

    def truncate_dirty(self, phy_offset: int) -> None:
        for cq in self.queues.values():
            cq.truncate_dirty_logic_files(phy_offset)

    def correct_min_offsets(self, phy_min: int) -> None:
        for cq in self.queues.values():
            cq.correct_min_offset(phy_min)

    def queue_offset_table(self) -> dict[tuple[str, int], int]:
        return {key: cq.max_offset_in_queue for key, cq in self.queues.items()}

    def flush(self) -> None:
        for cq in list(self.queues.values()):
            cq.flush()

    def close(self) -> None:
        for cq in self.queues.values():
            cq.close()
