"""Dissectors of the two optional ConsumeQueue relatives: BatchConsumeQueue and ConsumeQueueExt.

`inspect batchconsumequeue PATH` walks `batchconsumequeue/<topic>/<queueId>/` (BatchCQ topics,
5.0.0+), `inspect consumequeue_ext PATH` walks `consumequeue_ext/<topic>/<queueId>/` (only written
with `enableConsumeQueueExt=true`). Kept apart from dissect.py, whose helpers they share (dissect_common.py), so each
module stays about one family of files; `dissect.dissect` dispatches to them.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from rmqtool.inspect.bcq import BCQ_DIR, BcqEntry, iter_bcq_units
from rmqtool.inspect.commitlog import CommitLogReader
from rmqtool.inspect.cqext import CQ_EXT_DIR, ExtEntry, iter_ext_units
from rmqtool.inspect.dissect_common import Progress, follow_message, queue_targets, root_and_rel
from rmqtool.inspect.files import ReadOnlyFile, queue_files, relpath
from rmqtool.inspect.model import Filters, Item
from rmqtool.layouts.batchcq import BcqUnit
from rmqtool.layouts.constants import BCQ_STORE_UNIT_SIZE
from rmqtool.layouts.cqext import CqExtUnit


def _bcq_fields(topic: str, qid: int, u: BcqEntry) -> dict:
    return {"topic": topic, "queueId": qid, "msgBaseOffset": u.msg_base_offset, "batchSize": u.batch_size,
            "commitLogOffset": u.commit_log_offset, "size": u.size, "tagsCode": u.tags_code,
            "storeTimestamp": u.store_timestamp, "compactedOffset": u.compacted_offset, "reserved": u.reserved}


def dissect_batchconsumequeue(path: Path, f: Filters, progress: Progress = None) -> Iterator[Item]:
    """One `bcq-unit` per unit. `--offset N` starts at the unit holding queue offset N (a unit
    covers msgBaseOffset .. msgBaseOffset + batchSize - 1); `--since/--until` use the unit's own
    store time, so they need no CommitLog read."""
    root, relroot = root_and_rel(path)
    reader = CommitLogReader(queue_files(root / "commitlog")) if root is not None and (
        f.follow or f.key or f.msg_id or f.tag) else None
    try:
        for topic, qid, files in queue_targets(path, BCQ_DIR):
            if (f.topic is not None and topic != f.topic) or (f.queue is not None and qid != f.queue):
                continue
            for u in iter_bcq_units(files):
                if f.offset is not None and u.end_offset <= f.offset:
                    continue
                if not f.in_window(u.store_timestamp):
                    continue
                item = Item("bcq-unit", relpath(u.file.path, relroot), u.pos, _bcq_fields(topic, qid, u))
                if f.raw:
                    with ReadOnlyFile(u.file.path) as rof:
                        item.raw = bytes(rof.buf[u.pos : u.pos + BCQ_STORE_UNIT_SIZE])
                    item.layout = BcqUnit
                if reader is not None and not follow_message(item, reader, u.commit_log_offset, relroot,
                                                             Filters(key=f.key, msg_id=f.msg_id, tag=f.tag,
                                                                     follow=f.follow, body_hex=f.body_hex,
                                                                     raw=f.raw)):
                    continue
                yield item
    finally:
        if reader is not None:
            reader.close()


def ext_item(e: ExtEntry, topic: str, qid: int, relroot: Path | None, f: Filters) -> Item:
    """A ConsumeQueueExt unit, end-of-file marker or damaged unit as an inspect item."""
    rel = relpath(e.file.path, relroot)
    fields: dict = {"topic": topic, "queueId": qid, "extOffset": e.offset}
    if e.is_end_of_file:
        fields.update(type="blank", size=e.size)
        item = Item("cq-ext-blank", rel, e.pos, fields)
        raw_len = 2
    else:
        fields.update(extAddr=e.address, size=e.size, tagsCode=e.tags_code, msgStoreTime=e.msg_store_time,
                      bitMapSize=e.bit_map_size, filterBitMap=e.filter_bit_map.hex())
        if e.problem is not None:
            fields.update(type="problem", problem="cq-ext-unit-bad", detail=e.problem)
        item = Item("cq-ext-unit" if e.problem is None else "problem", rel, e.pos, fields)
        raw_len = max(2, e.size) if e.problem is None else 20
    if f.raw:
        with ReadOnlyFile(e.file.path) as rof:
            item.raw = bytes(rof.buf[e.pos : min(rof.size, e.pos + raw_len)])
        item.layout = CqExtUnit if not e.is_end_of_file else None
    return item


def dissect_consumequeue_ext(path: Path, f: Filters, progress: Progress = None) -> Iterator[Item]:
    """One `cq-ext-unit` per unit, a `cq-ext-blank` where a writer filled a file's end. `--offset`
    is the ext stream offset (the `extOffset` a ConsumeQueue unit shows); `--since/--until` use
    msgStoreTime."""
    _, relroot = root_and_rel(path)
    for topic, qid, files in queue_targets(path, CQ_EXT_DIR):
        if (f.topic is not None and topic != f.topic) or (f.queue is not None and qid != f.queue):
            continue
        for e in iter_ext_units(files):
            if f.offset is not None and e.offset < f.offset:
                continue
            if e.problem is None and not e.is_end_of_file and not f.in_window(e.msg_store_time):
                continue
            if e.is_end_of_file and (f.since is not None or f.until is not None):
                continue
            yield ext_item(e, topic, qid, relroot, f)


DISSECTORS = {
    "batchconsumequeue": dissect_batchconsumequeue,
    "consumequeue_ext": dissect_consumequeue_ext,
}
