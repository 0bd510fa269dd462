"""What a broker derives from CommitLog records: ConsumeQueue units, index keys, timer units.

Shared by verify (what should be there), repair (rebuild it) and the fixture generator, so the
rules of `CommitLogDispatcherBuildConsumeQueue`, `IndexService.buildIndex` and
`TimerMessageStore` live in one place. Writers here create full-size files sparsely
(`truncate`), as RocketMQ needs full-size mapped files.
"""

from __future__ import annotations

import mmap
import os
from pathlib import Path

from rmqtool.inspect.layoutconfig import LayoutConfig
from rmqtool.layouts import properties as P
from rmqtool.layouts.constants import (
    BLANK_MAGIC_CODE,
    CQ_STORE_UNIT_SIZE,
    INDEX_ENTRY_SIZE,
    INDEX_HEADER_SIZE,
    INDEX_SLOT_SIZE,
    SCHEDULE_TOPIC,
    TIMER_MAGIC_DEFAULT,
    TIMER_MAGIC_DELETE,
    TIMER_SLOT_SIZE,
    TIMER_SLOTS_TOTAL,
    TIMERLOG_BLANK_SIZE,
    TIMERLOG_UNIT_SIZE,
    TRANSACTION_COMMIT_TYPE,
    TRANSACTION_NOT_TYPE,
    TRANSACTION_ROLLBACK_TYPE,
    TRANSACTION_TYPE_MASK,
)
from rmqtool.layouts.consumequeue import CQ_BLANK_UNIT, CQ_UNIT
from rmqtool.layouts.index import INDEX_ENTRY, INDEX_HEADER
from rmqtool.layouts.javahash import java_string_hash
from rmqtool.layouts.message import MessageExt
from rmqtool.layouts.timer import TIMER_SLOT, TIMERLOG_UNIT
from rmqtool.store.diskspace import create_reserved

WHEEL_SLOTS = TIMER_SLOTS_TOTAL * 2
WHEEL_FILE_SIZE = WHEEL_SLOTS * TIMER_SLOT_SIZE


def offset_name(offset: int) -> str:
    """`UtilAll.offset2FileName`: 20 zero-padded digits."""
    return f"{offset:020d}"


def gets_cq_unit(sys_flag: int) -> bool:
    """Only NOT and COMMIT records get a ConsumeQueue unit."""
    return (sys_flag & TRANSACTION_TYPE_MASK) in (TRANSACTION_NOT_TYPE, TRANSACTION_COMMIT_TYPE)


def tags_code(msg: MessageExt, cfg: LayoutConfig) -> int:
    """CQ tagsCode: the tag's String.hashCode(); the delivery time on SCHEDULE_TOPIC_XXXX."""
    if msg.topic == SCHEDULE_TOPIC:
        level = msg.properties.get(P.DELAY)
        if level is not None:
            try:
                lv = int(level)
            except ValueError:
                lv = 0
            if lv > 0:
                return msg.store_timestamp + cfg.delay_ms(lv)
    tags = msg.properties.get(P.TAGS)
    return java_string_hash(tags) if tags else 0


def index_keys(msg: MessageExt) -> list[str]:
    """`IndexService.buildIndex`: topic#UNIQ_KEY, then topic#k for each KEYS token."""
    if (msg.sys_flag & TRANSACTION_TYPE_MASK) == TRANSACTION_ROLLBACK_TYPE:
        return []
    out = []
    uniq = msg.properties.get(P.UNIQ_KEY)
    if uniq:
        out.append(f"{msg.topic}#{uniq}")
    for k in (msg.properties.get(P.KEYS) or "").split(" "):
        if k:
            out.append(f"{msg.topic}#{k}")
    return out


def tag_index_keys(msg: MessageExt) -> list[str]:
    """The tag keys 5.5's IndexService adds (`topic#T#tags`, the real topic's too for a record
    parked under a system topic): verify accepts them in a store Apache 5.5 wrote; rmqtool, as
    5.3.x, does not write them."""
    if (msg.sys_flag & TRANSACTION_TYPE_MASK) == TRANSACTION_ROLLBACK_TYPE:
        return []
    tags = msg.properties.get(P.TAGS)
    if not tags:
        return []
    out = [f"{msg.topic}#T#{tags}"]
    real = msg.properties.get(P.REAL_TOPIC)
    if real and real != msg.topic:
        out.append(f"{real}#T#{tags}")
    return out


def key_hash(key: str) -> int:
    """`IndexFile.indexKeyHashMethod`: abs(hashCode), 0 for Integer.MIN_VALUE."""
    h = abs(java_string_hash(key))
    return 0 if h > 0x7FFFFFFF else h


def _create_sparse(path: Path, size: int) -> None:
    """A new file of `size` bytes with its blocks reserved: it is written through a mapping."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.unlink(missing_ok=True)
    os.close(create_reserved(path, size))


class ConsumeQueueWriter:
    """Writes the units of one queue into offset-named files of `cq_file_size`."""

    def __init__(self, directory: Path, file_size: int) -> None:
        self.dir = directory
        self.file_size = file_size
        self.next_offset: int | None = None
        self.units = 0
        self._fh = None
        self._fbase = -1

    def put(self, queue_offset: int, phys: int, size: int, tags: int) -> None:
        byte = queue_offset * CQ_STORE_UNIT_SIZE
        fbase = byte - byte % self.file_size
        if fbase != self._fbase:
            self.close()
            path = self.dir / offset_name(fbase)
            fresh = not path.exists()
            if fresh:
                _create_sparse(path, self.file_size)
            self._fh = open(path, "r+b")  # noqa: SIM115 - closed in close()
            self._fbase = fbase
            if fresh and self.next_offset is None and byte > fbase:  # ConsumeQueue.fillPreBlank
                self._fh.write(CQ_BLANK_UNIT * ((byte - fbase) // CQ_STORE_UNIT_SIZE))
        assert self._fh is not None
        os.pwrite(self._fh.fileno(), CQ_UNIT.pack(phys, size, tags), byte - fbase)
        self.next_offset = queue_offset + 1
        self.units += 1

    def close(self) -> None:
        if self._fh is not None:
            self._fh.close()
            self._fh = None
            self._fbase = -1


class IndexFileWriter:
    """One IndexFile: `IndexFile.putKey` with its header bookkeeping."""

    def __init__(self, path: Path, hash_slot_num: int, index_num: int) -> None:
        self.path = path
        self.slots = hash_slot_num
        self.num = index_num
        size = INDEX_HEADER_SIZE + hash_slot_num * INDEX_SLOT_SIZE + index_num * INDEX_ENTRY_SIZE
        _create_sparse(path, size)
        self._fh = open(path, "r+b")  # noqa: SIM115 - closed in close()
        self._mm = mmap.mmap(self._fh.fileno(), size)
        self.begin_ts = self.end_ts = 0
        self.begin_phy = self.end_phy = 0
        self.slot_count = 0
        self.count = 1

    @property
    def full(self) -> bool:
        return self.count >= self.num

    def put_key(self, key: str, phys: int, store_ts: int) -> bool:
        if self.full:
            return False
        h = key_hash(key)
        slot = h % self.slots
        spos = INDEX_HEADER_SIZE + slot * INDEX_SLOT_SIZE
        prev = int.from_bytes(self._mm[spos : spos + 4], "big", signed=True)
        if prev <= 0 or prev > self.count:
            prev = 0
            self.slot_count += 1
        diff = 0 if self.begin_ts <= 0 else max(0, min((store_ts - self.begin_ts) // 1000, 0x7FFFFFFF))
        epos = INDEX_HEADER_SIZE + self.slots * INDEX_SLOT_SIZE + self.count * INDEX_ENTRY_SIZE
        self._mm[epos : epos + INDEX_ENTRY_SIZE] = INDEX_ENTRY.pack(h, phys, diff, prev)
        self._mm[spos : spos + 4] = self.count.to_bytes(4, "big", signed=True)
        if self.count <= 1:
            self.begin_phy, self.begin_ts = phys, store_ts
        self.count += 1
        self.end_phy, self.end_ts = phys, store_ts
        self._mm[0:INDEX_HEADER.size] = INDEX_HEADER.pack(self.begin_ts, self.end_ts, self.begin_phy,
                                                          self.end_phy, self.slot_count, self.count)
        return True

    def close(self) -> None:
        self._mm.flush()
        self._mm.close()
        self._fh.close()


def timerlog_unit(prev_pos: int, magic: int, curr_write_time: int, delayed_time: int, phys: int, size: int,
                  real_topic: str | None) -> bytes:
    """One 52-byte TimerLog unit as `TimerMessageStore.doEnqueue` writes it."""
    return TIMERLOG_UNIT.pack(TIMERLOG_UNIT_SIZE, prev_pos, magic, curr_write_time, delayed_time - curr_write_time,
                              phys, size, java_string_hash(real_topic) if real_topic else 0, 0)


def timer_magic(msg: MessageExt) -> int:
    return TIMER_MAGIC_DEFAULT | (TIMER_MAGIC_DELETE if P.TIMER_DEL_UNIQKEY in msg.properties else 0)


def timerlog_blank(remaining: int) -> bytes:
    import struct

    return struct.pack(">iqi", remaining, 0, BLANK_MAGIC_CODE)


def wheel_slot_index(delayed_ms: int, precision_ms: int) -> int:
    """`TimerWheel.getSlotIndex`: (t / precision) % (slotsTotal * 2)."""
    return (delayed_ms // precision_ms) % WHEEL_SLOTS


def rebuild_wheel_slots(units, precision_ms: int) -> dict[int, tuple[int, int, int, int, int]]:
    """Slots as recovery's `reviseSlot` leaves them after replaying TimerLog units in order.

    `units` yields (timerlog_offset, currWriteTime, delayTime, magic). Returns slot index ->
    (timeSecs, firstPos, lastPos, num, magic). A slot whose time differs is taken over by the
    unit; otherwise the unit becomes its lastPos. num counts +1 per unit, -1 per delete marker.
    """
    slots: dict[int, tuple[int, int, int, int, int]] = {}
    for pos, cwt, delay, magic in units:
        delayed = cwt + delay
        idx = wheel_slot_index(delayed, precision_ms)
        t = delayed // precision_ms
        num_delta = -1 if magic & TIMER_MAGIC_DELETE else 1  # doEnqueue: isDelete ? num - 1 : num + 1
        cur = slots.get(idx)
        if cur is None or cur[0] != t:
            slots[idx] = (t, pos, pos, num_delta, 0)
        else:
            slots[idx] = (t, cur[1], pos, cur[3] + num_delta, cur[4])
    return slots


def write_wheel(path: Path, slots: dict[int, tuple[int, int, int, int, int]]) -> None:
    _create_sparse(path, WHEEL_FILE_SIZE)
    with open(path, "r+b") as fh:
        for idx in sorted(slots):
            os.pwrite(fh.fileno(), TIMER_SLOT.pack(*slots[idx]), idx * TIMER_SLOT_SIZE)


__all__ = [
    "ConsumeQueueWriter", "IndexFileWriter", "WHEEL_FILE_SIZE", "WHEEL_SLOTS", "gets_cq_unit", "index_keys", "tag_index_keys",
    "key_hash", "offset_name", "rebuild_wheel_slots", "tags_code", "timer_magic", "timerlog_blank",
    "timerlog_unit", "wheel_slot_index", "write_wheel", "TIMERLOG_BLANK_SIZE",
]
