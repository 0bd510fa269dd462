"""Reading a queue: `DefaultMessageStore.getMessage` over the ConsumeQueue units and the CommitLog.

Kept apart from MessageStore (which delegates here) so the engine facade stays about opening,
putting and recovering; the statuses are Java's GetMessageStatus.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import Enum

from rmqtool.layouts.constants import MESSAGE_MAGIC_CODE, MESSAGE_MAGIC_CODE_V2
from rmqtool.layouts.message import Blank, MessageExt, RecordError, decode_record
from rmqtool.store.commitlog import CommitLog
from rmqtool.store.consumequeue import BLANK_SIZE, ConsumeQueueStore


class GetMessageStatus(str, Enum):
    FOUND = "FOUND"
    NO_MATCHED_MESSAGE = "NO_MATCHED_MESSAGE"
    MESSAGE_WAS_REMOVING = "MESSAGE_WAS_REMOVING"
    OFFSET_FOUND_NULL = "OFFSET_FOUND_NULL"
    OFFSET_OVERFLOW_BADLY = "OFFSET_OVERFLOW_BADLY"
    OFFSET_OVERFLOW_ONE = "OFFSET_OVERFLOW_ONE"
    OFFSET_TOO_SMALL = "OFFSET_TOO_SMALL"
    NO_MATCHED_LOGIC_QUEUE = "NO_MATCHED_LOGIC_QUEUE"
    NO_MESSAGE_IN_QUEUE = "NO_MESSAGE_IN_QUEUE"


@dataclass
class GetMessageResult:
    status: str
    messages: list[MessageExt] = field(default_factory=list)
    raw: list[bytes] = field(default_factory=list)
    next_begin_offset: int = 0
    min_offset: int = 0
    max_offset: int = 0
    # CommitLog max offset minus the physical offset of the last unit looked at (Java's
    # `maxOffsetPy - maxPhyOffsetPulling`, 0 when none), set when the queue was read: what
    # suggestPullingFromSlave compares with accessMessageInMemoryMaxRatio of RAM
    fall_behind: int | None = None


_unpack_ii = struct.Struct(">ii").unpack_from
_MAGICS = (MESSAGE_MAGIC_CODE, MESSAGE_MAGIC_CODE_V2)


def get_message(cqs: ConsumeQueueStore, cl: CommitLog, topic: str, queue_id: int, offset: int, max_msgs: int = 32,
                *, tags_codes: set[int] | None = None, filter: Callable[[MessageExt], bool] | None = None,
                max_bytes: int = 256 * 1024, decode: bool = True) -> GetMessageResult:
    """`DefaultMessageStore.getMessage`: up to `max_msgs` messages from `offset` of one queue.

    With `decode=False` only `raw` is filled (the record bytes a PULL body is made of):
    records are checked by magic and size only, and decoded only when `filter` needs them;
    without a `filter`, records lying end to end are read as one span and `raw` holds views
    (memoryview) of it.
    CQ tagsCodes are matched before any CommitLog byte is read.
    """
    cq = cqs.find(topic, queue_id)
    if cq is None:
        return GetMessageResult(GetMessageStatus.NO_MATCHED_LOGIC_QUEUE, next_begin_offset=0)
    min_off, max_off = cq.min_offset_in_queue, cq.max_offset_in_queue
    res = GetMessageResult(GetMessageStatus.NO_MATCHED_MESSAGE, min_offset=min_off, max_offset=max_off,
                           next_begin_offset=offset)
    if max_off == 0:
        res.status = GetMessageStatus.NO_MESSAGE_IN_QUEUE
        res.next_begin_offset = 0
        return res
    if offset < min_off:
        res.status = GetMessageStatus.OFFSET_TOO_SMALL
        res.next_begin_offset = min_off
        return res
    if offset == max_off:
        res.status = GetMessageStatus.OFFSET_OVERFLOW_ONE
        return res
    if offset > max_off:
        res.status = GetMessageStatus.OFFSET_OVERFLOW_BADLY
        res.next_begin_offset = min_off if min_off == 0 else max_off
        return res
    cl_min = cl.min_offset
    cl_max = cl.max_offset
    last_phys = 0
    max_scan = max(800, max_msgs * 20)  # maxFilterMessageCount, in units
    cur = offset
    scanned = 0
    total_bytes = 0
    removed = False
    found = 0
    messages, raws = res.messages, res.raw
    read = cl.read_bytes
    # without a filter every unit read is a message found (blanks and removed records aside):
    # read only the units still wanted, not up to `max_scan` (800 unpacked for a pull of 32)
    filtering = tags_codes is not None or filter is not None
    # the raw path reads records that lie end to end in the CommitLog (a queue's messages put
    # together, a batch's above all) as one span, then cuts it: one read per span, not per record
    spans = not decode and filter is None
    span_at = span_end = 0
    span: list[int] = []  # the sizes of the records in the current span
    while scanned < max_scan and found < max_msgs and cur < max_off:
        want = max_scan - scanned if filtering else min(max_msgs - found, max_scan - scanned)
        units = cq.read_units(cur, min(want, max_off - cur))
        if not units:
            break
        for phys, size, tags_code in units:
            if found >= max_msgs or (found and total_bytes + size > max_bytes):
                break
            last_phys = phys
            cur += 1
            scanned += 1
            if size == BLANK_SIZE:
                continue
            if phys < cl_min:
                removed = True
                continue
            if tags_codes is not None and tags_code not in tags_codes:
                continue
            if spans:
                if phys != span_end:
                    if span:
                        _cut_span(read, span_at, span, raws)
                    span_at, span = phys, []
                span.append(size)
                span_end = phys + size
                found += 1
                total_bytes += size
                continue
            raw = read(phys, size)
            if raw is None:
                continue
            if decode or filter is not None:
                try:
                    msg = decode_record(raw, check_crc=False)
                except (RecordError, Blank):
                    continue
                if filter is not None and not filter(msg):
                    continue
                if decode:
                    messages.append(msg)
            elif not _is_record(raw, 0, size):
                continue
            raws.append(raw)
            found += 1
            total_bytes += size
        else:
            continue
        break
    if spans:
        if span:
            _cut_span(read, span_at, span, raws)
        found = len(raws)  # counted as the units were taken; a span's unreadable records left out
    res.next_begin_offset = cur
    res.fall_behind = cl_max - last_phys
    if found:
        res.status = GetMessageStatus.FOUND
    elif removed:
        res.status = GetMessageStatus.MESSAGE_WAS_REMOVING
    return res


def _is_record(buf: bytes, at: int, size: int) -> bool:
    """What decode_record would reject first: not a record of this size at `at`."""
    return size >= 91 and _unpack_ii(buf, at) in ((size, MESSAGE_MAGIC_CODE), (size, MESSAGE_MAGIC_CODE_V2))


def _cut_span(read: Callable[[int, int], bytes | None], at: int, sizes: list[int], raws: list) -> None:
    """The records of `sizes` lying end to end from CommitLog offset `at`, read at once and
    appended to `raws` as views of that one read; each checked as the per-record path checks it.
    A span the log cannot give whole (a file deleted meanwhile) is read record by record."""
    chunk = read(at, sum(sizes))
    if chunk is None:
        for size in sizes:
            raw = read(at, size)
            if raw is not None and _is_record(raw, 0, size):
                raws.append(raw)
            at += size
        return
    view, unpack, magics, append = memoryview(chunk), _unpack_ii, _MAGICS, raws.append
    pos = 0
    for size in sizes:  # _is_record inline: this loop runs for every message a pull returns
        end = pos + size
        if size >= 91 and unpack(chunk, pos) in ((size, magics[0]), (size, magics[1])):
            append(view[pos:end])
        pos = end
