"""The pull path's store read without decoding a MessageExt per message (protocol.md §4.5).

A PULL_MESSAGE answer is the stored record bytes back to back, so a pull that filters by tag
(or not at all) needs only ConsumeQueue units and CommitLog bytes: `DefaultMessageStore.getMessage`
with the tag-code check on the unit and no per-message decode. Statuses and offsets are those
of `MessageStore.get_message` (which still serves SQL92 pulls, whose filter reads properties).
A record is only checked to be one (its totalSize and magic), as the Java broker hands out
what the ConsumeQueue points at.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from typing import Any

from rmqtool.layouts.constants import MESSAGE_MAGIC_CODE, MESSAGE_MAGIC_CODE_V2

_HEAD = struct.Struct(">ii")  # totalSize, magicCode
_MAGICS = (MESSAGE_MAGIC_CODE, MESSAGE_MAGIC_CODE_V2)
_CQ_BLANK_SIZE = 0x7FFFFFFF  # ConsumeQueue filler unit (size field)


@dataclass(slots=True)
class RawGetResult:
    status: str
    raw: list[bytes] = field(default_factory=list)
    next_begin_offset: int = 0
    min_offset: int = 0
    max_offset: int = 0


def supports_raw_get(store: Any) -> bool:
    """True when the store exposes the ConsumeQueue / CommitLog readers this module needs."""
    return hasattr(store, "cqs") and hasattr(store, "commitlog") and hasattr(store.commitlog, "read_bytes")


def get_raw(store: Any, topic: str, queue_id: int, offset: int, max_msgs: int, *,
            tags_codes: set[int] | None = None, max_bytes: int = 256 * 1024) -> RawGetResult:
    """`getMessage` for tag / no filtering: the record bytes of up to `max_msgs` messages."""
    cq = store.cqs.find(topic, queue_id)
    if cq is None:
        return RawGetResult("NO_MATCHED_LOGIC_QUEUE")
    min_off, max_off = cq.min_offset_in_queue, cq.max_offset_in_queue
    res = RawGetResult("NO_MATCHED_MESSAGE", next_begin_offset=offset, min_offset=min_off, max_offset=max_off)
    if max_off == 0:
        res.status, res.next_begin_offset = "NO_MESSAGE_IN_QUEUE", 0
        return res
    if offset < min_off:
        res.status, res.next_begin_offset = "OFFSET_TOO_SMALL", min_off
        return res
    if offset == max_off:
        res.status = "OFFSET_OVERFLOW_ONE"
        return res
    if offset > max_off:
        res.status = "OFFSET_OVERFLOW_BADLY"
        res.next_begin_offset = min_off if min_off == 0 else max_off
        return res
    cl = store.commitlog
    read = cl.read_bytes
    cl_min = cl.min_offset
    max_scan = max(800, max_msgs * 20)  # maxFilterMessageCount, in units
    out = res.raw
    head = _HEAD.unpack_from
    cur = offset
    scanned = 0
    total_bytes = 0
    removed = False
    done = False
    while not done and scanned < max_scan and len(out) < max_msgs and cur < max_off:
        units = cq.read_units(cur, min(max_scan - scanned, max_off - cur))
        if not units:
            break
        for phys, size, tags_code in units:
            if len(out) >= max_msgs or (out and total_bytes + size > max_bytes):
                done = True
                break
            cur += 1
            scanned += 1
            if size == _CQ_BLANK_SIZE:
                continue
            if phys < cl_min:
                removed = True
                continue
            if tags_codes is not None and tags_code not in tags_codes:
                continue
            raw = read(phys, size)
            if raw is None or len(raw) < 8:
                continue
            total, magic = head(raw, 0)
            if total != size or magic not in _MAGICS:
                continue
            out.append(raw)
            total_bytes += size
    res.next_begin_offset = cur
    if out:
        res.status = "FOUND"
    elif removed:
        res.status = "MESSAGE_WAS_REMOVING"
    return res
