"""TimerWheel: the `timerwheel` file, 2 x slotsTotal slots of 32 bytes (formats.md §5.3).

RocketMQ 5.x `TimerWheel`. The slot of time `t` is `(t / precision) % (2 * slotsTotal)`; a slot is
only "the slot of t" when its stored time (in units of precision) equals `t / precision`, which
is what lets the ring be reused. The file is mapped; only the pages of touched slots become
resident, and a SIGKILL loses nothing that was written (it sits in the page cache).
"""

from __future__ import annotations

import mmap
import os
import struct
import sys
from array import array
from dataclasses import dataclass
from pathlib import Path

from rmqtool.errors import StoreError
from rmqtool.layouts.constants import TIMER_SLOT_SIZE
from rmqtool.layouts.timer import TIMER_SLOT
from rmqtool.store.diskspace import map_read_only, reserve_blocks

BLANK = -1
IGNORE = -2
_CHUNK_SLOTS = 65536
_LITTLE = sys.byteorder == "little"
_I64 = struct.Struct(">q")
_I32 = struct.Struct(">i")
_QQQ = struct.Struct(">qqq")  # time, firstPos, lastPos: the 3-argument putSlot


@dataclass(slots=True)
class Slot:
    """`Slot`: `time_ms` is the stored time x precision (-1 for the empty slot)."""

    time_ms: int = -1
    first_pos: int = -1
    last_pos: int = -1
    num: int = 0
    magic: int = 0


class TimerWheel:
    def __init__(self, path: Path, slots_total: int, precision_ms: int, *, read_only: bool = False) -> None:
        self.path = Path(path)
        self.slots_total = slots_total
        self.precision_ms = precision_ms
        self.ring = slots_total * 2
        self.wheel_length = self.ring * TIMER_SLOT_SIZE
        exists = self.path.exists()
        size = self.path.stat().st_size if exists else 0
        if size not in (0, self.wheel_length):
            raise StoreError(f"Timer wheel length:{size} != expected:{self.wheel_length} ({self.path.name})")
        self.read_only = read_only
        if read_only:
            if not exists or size == 0:
                self._fd = -1
                self._map: mmap.mmap | bytes = bytes(self.wheel_length)
                return
            self._fd = os.open(self.path, os.O_RDONLY)
            self._map = map_read_only(self._fd, self.wheel_length)
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            reserve_blocks(self._fd, self.wheel_length, self.path.name)  # a store into a hole faults on a full disk
        except BaseException:
            os.close(self._fd)
            if size == 0:
                self.path.unlink(missing_ok=True)
            raise
        self._map = mmap.mmap(self._fd, self.wheel_length)

    def close(self) -> None:
        if isinstance(self._map, mmap.mmap):
            if not self.read_only:
                self._map.flush()
            self._map.close()
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def flush(self) -> None:
        if isinstance(self._map, mmap.mmap) and not self.read_only:
            self._map.flush()

    def get_slot_index(self, time_ms: int) -> int:
        return (time_ms // self.precision_ms) % self.ring

    def get_raw_slot(self, time_ms: int) -> Slot:
        t, first, last, num, magic = TIMER_SLOT.unpack_from(self._map, self.get_slot_index(time_ms) * TIMER_SLOT_SIZE)
        return Slot(t * self.precision_ms, first, last, num, magic)

    def raw_slot_tuple(self, time_ms: int) -> tuple[int, int, int, int, int]:
        """(stored time in units of precision, firstPos, lastPos, num, magic) without building a Slot."""
        return TIMER_SLOT.unpack_from(self._map, (time_ms // self.precision_ms) % self.ring * TIMER_SLOT_SIZE)

    def raw_slot_at(self, index: int) -> Slot:
        """The slot stored at ring index `index`, whatever time it holds (for checks and tools)."""
        t, first, last, num, magic = TIMER_SLOT.unpack_from(self._map, index * TIMER_SLOT_SIZE)
        return Slot(t * self.precision_ms, first, last, num, magic)

    def get_slot(self, time_ms: int) -> Slot:
        slot = self.get_raw_slot(time_ms)
        if slot.time_ms != time_ms // self.precision_ms * self.precision_ms:
            return Slot()
        return slot

    def slot_time_matches(self, time_ms: int) -> bool:
        """Cheap `getSlot(t).timeMs != -1` for scanning empty slots."""
        (t,) = _I64.unpack_from(self._map, self.get_slot_index(time_ms) * TIMER_SLOT_SIZE)
        return t == time_ms // self.precision_ms

    def put_slot(self, time_ms: int, first_pos: int, last_pos: int, num: int | None = None,
                 magic: int | None = None) -> None:
        """`putSlot`: the 3-argument form leaves num and magic as they are."""
        off = self.get_slot_index(time_ms) * TIMER_SLOT_SIZE
        if num is None:
            _QQQ.pack_into(self._map, off, time_ms // self.precision_ms, first_pos, last_pos)
        else:
            TIMER_SLOT.pack_into(self._map, off, time_ms // self.precision_ms, first_pos, last_pos, num,
                                 0 if magic is None else magic)

    def set_num(self, time_ms: int, num: int) -> None:
        off = self.get_slot_index(time_ms) * TIMER_SLOT_SIZE + 24
        _I32.pack_into(self._map, off, num)

    def revise_slot(self, time_ms: int, first_pos: int, last_pos: int, force: bool) -> None:
        """`reviseSlot`: used by recovery to make the slot point at units found in the log."""
        off = self.get_slot_index(time_ms) * TIMER_SLOT_SIZE
        (stored,) = _I64.unpack_from(self._map, off)
        if time_ms // self.precision_ms != stored:
            if force:
                self.put_slot(time_ms, first_pos if first_pos != IGNORE else last_pos, last_pos)
        else:
            if first_pos != IGNORE:
                _I64.pack_into(self._map, off + 8, first_pos)
            if last_pos != IGNORE:
                _I64.pack_into(self._map, off + 16, last_pos)

    def _scan_read(self, pos: int, size: int) -> bytes:
        """Bytes of the wheel for a scan, read with pread: a whole-ring scan through the mapping
        would fault all 38 MB of the (mostly empty) wheel into this process's RSS."""
        if self._fd >= 0:
            return os.pread(self._fd, size, pos)
        return bytes(self._map[pos : pos + size])

    def iter_live(self, time_start_ms: int, span_slots: int | None = None):
        """Yield (index, Slot) for every slot holding a time in [start, start + span) (whole ring by
        default), oldest time first. Filters whole chunks at C speed: only live slots are unpacked."""
        p = self.precision_ms
        base = time_start_ms // p
        span = self.ring if span_slots is None else min(span_slots, self.ring)
        done = 0
        while done < span:
            idx0 = (base + done) % self.ring
            n = min(_CHUNK_SLOTS, span - done, self.ring - idx0)
            raw = self._scan_read(idx0 * TIMER_SLOT_SIZE, n * TIMER_SLOT_SIZE)
            if raw.count(0) == len(raw):  # never written
                done += n
                continue
            words = array("q", raw)
            if _LITTLE:
                words.byteswap()
            times = words[0::4]
            lo = base + done
            hits = set(times).intersection(range(lo, lo + n))
            if hits:
                for i, t in enumerate(times):
                    if t in hits and t == lo + i:
                        _t, first, last, num, magic = TIMER_SLOT.unpack_from(self._map, (idx0 + i) * TIMER_SLOT_SIZE)
                        yield idx0 + i, Slot(t * p, first, last, num, magic)
            done += n

    def first_live_time(self, start_ms: int, end_ms: int) -> int | None:
        """The earliest live slot time in [start, end), or None: lets dequeue skip empty slots fast."""
        p = self.precision_ms
        span = (end_ms - start_ms + p - 1) // p
        for _idx, slot in self.iter_live(start_ms, span):
            return slot.time_ms
        return None

    def check_phy_pos(self, time_start_ms: int, max_offset: int) -> int:
        """`checkPhyPos`: smallest firstPos of a live slot whose lastPos is beyond `max_offset`."""
        min_first = 2**63 - 1
        for _idx, slot in self.iter_live(time_start_ms):
            if slot.last_pos > max_offset and slot.first_pos < min_first:
                min_first = slot.first_pos
        return min_first

    def live_slots(self, time_start_ms: int) -> list[tuple[int, Slot]]:
        """Every slot whose stored time lies in the ring's window starting at `time_start_ms`."""
        return list(self.iter_live(time_start_ms))

    def get_all_num(self, time_start_ms: int) -> int:
        return sum(s.num for _, s in self.live_slots(time_start_ms))

