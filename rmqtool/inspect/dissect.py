"""Dissectors: one generator of `Item`s per file kind (`inspect KIND PATH`).

`dissect(kind, path, filters)` dispatches to the dissector of each kind: CommitLog, ConsumeQueue
and index files here, the rest in dissect_queues.py, dissect_timer.py, dissect_config.py, pop.py
and summary.py, with what they share in dissect_common.py (whose `iso`, `message_fields` and
`Progress` this module re-exports).

All of them read through `ReadOnlyFile` (mmap, read-only), stream file by file in constant
memory, and treat a record or unit of zeros as the end of the data (a live broker's tail).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from rmqtool.errors import InvalidInput
from rmqtool.inspect import derive
from rmqtool.inspect.commitlog import CommitLogReader
from rmqtool.inspect.cq import iter_units
from rmqtool.inspect.cqext import CQ_EXT_DIR, ExtReader
from rmqtool.inspect.dissect_common import (  # noqa: F401 (iso, message_fields: re-exported)
    Progress,
    fields_match,
    follow_message,
    iso,
    link_message,
    message_fields,
    message_item,
    msg_matches,
    queue_targets,
    root_and_rel,
)
from rmqtool.inspect.dissect_config import dissect_checkpoint, dissect_config
from rmqtool.inspect.dissect_queues import DISSECTORS as QUEUE_DISSECTORS
from rmqtool.inspect.dissect_queues import ext_item
from rmqtool.inspect.dissect_timer import dissect_timercheck, dissect_timerlog, dissect_timerwheel
from rmqtool.inspect.fastjson_record import fast_message_fields
from rmqtool.inspect.files import INDEX_NAME, QueueFile, ReadOnlyFile, as_queue_files, queue_files, relpath
from rmqtool.inspect.layoutconfig import LayoutConfig, load_layout_config
from rmqtool.inspect.model import Filters, Item
from rmqtool.inspect.pop import DISSECTORS as POP_DISSECTORS
from rmqtool.inspect.summary import summarize_store
from rmqtool.layouts.commitlog import CommitLogBlank, CommitLogRecord
from rmqtool.layouts.constants import (
    BLANK_MAGIC_CODE,
    CQ_STORE_UNIT_SIZE,
    INDEX_ENTRY_SIZE,
    INDEX_HEADER_SIZE,
    INDEX_SLOT_SIZE,
)
from rmqtool.layouts.consumequeue import CqUnit
from rmqtool.layouts.cqext import is_ext_addr, undecorate
from rmqtool.layouts.index import INDEX_ENTRY, INDEX_HEADER, IndexEntry, IndexHeader
from rmqtool.layouts.message import Blank, RecordError, body_crc, decode_record
from rmqtool.layouts.msgid import decode_offset_msg_id

KINDS = ("commitlog", "consumequeue", "batchconsumequeue", "consumequeue_ext", "index", "timerlog", "timerwheel",
         "checkpoint", "timercheck", "config", "store", "revive", "inflight")


# --- CommitLog ---------------------------------------------------------------------------------

def dissect_commitlog(path: Path, f: Filters, progress: Progress = None) -> Iterator[Item]:
    if (Path(path) / "commitlog").is_dir():
        path = Path(path) / "commitlog"
    files = as_queue_files(path)
    _, relroot = root_and_rel(path)
    direct = None
    if f.msg_id is not None:
        try:
            direct = decode_offset_msg_id(f.msg_id).commit_log_offset
        except ValueError:
            direct = None
    if direct is not None:
        found = False
        for item in _commitlog_at(files, relroot, direct, f):
            found = True
            yield item
        if found:
            return
    for qf in files:
        with ReadOnlyFile(qf.path) as rof:
            if f.offset is not None and qf.base + rof.size <= f.offset:
                if progress:
                    progress(rof.size)
                continue
            yield from _commitlog_file(qf, rof, relpath(qf.path, relroot), f)
            if progress:
                progress(rof.size)


def _commitlog_at(files: list[QueueFile], relroot: Path, offset: int, f: Filters) -> Iterator[Item]:
    with CommitLogReader(files) as reader:
        loc = reader.locate(offset)
        if loc is None:
            return
        qf, pos = loc
        rof = reader._file(qf)
        try:
            msg = decode_record(rof.buf, pos, rof.size, check_crc=False)
        except (RecordError, Blank):
            return
        if msg_matches(msg, f):
            yield message_item(msg, relpath(qf.path, relroot), pos, rof.buf, f, body_crc(msg.body) == msg.body_crc)


def _commitlog_file(qf: QueueFile, rof: ReadOnlyFile, rel: str, f: Filters) -> Iterator[Item]:
    buf, end, pos = rof.buf, rof.size, 0
    mapping = rof.mapping  # slicing the mmap gives bytes directly (fast_message_fields)
    want_all = f.topic is None and f.queue is None and f.since is None and f.until is None and f.key is None \
        and f.msg_id is None and f.tag is None
    fast = not f.raw and not f.follow and (want_all or f.msg_id is None and f.key is None and f.tag is None)
    base = qf.base
    where = (rel.rsplit("/", 1)[-1], rel)
    body_hex = f.body_hex
    start = -1 if f.offset is None else f.offset - base  # records before this position are skipped
    while pos + 8 <= end:
        if fast:
            r = fast_message_fields(mapping, pos, end, body_hex, where)
            if r is not None:
                total, d = r
                if pos >= start and (want_all or fields_match(d, f)):
                    yield Item("message", rel, pos, d, complete=True)
                pos += total
                continue
        try:
            msg = decode_record(buf, pos, end, check_crc=False)
        except Blank as b:
            item = Item("blank", rel, pos, {"type": "blank", "maxBlank": b.max_blank, "magicCode": BLANK_MAGIC_CODE})
            if b.max_blank != end - pos:
                item.fields.update(problem="blank-size-mismatch", detail=f"{end - pos} bytes remain in the file")
            if f.raw:
                item.raw, item.layout = bytes(buf[pos : pos + 8]), CommitLogBlank
            if want_all and (f.offset is None or qf.base + pos >= f.offset):
                yield item
            return
        except RecordError as e:
            if bytes(buf[pos : pos + 8]) == bytes(8):
                return  # the zero tail: end of the data
            item = Item("problem", rel, pos, {"type": "problem", "problem": e.kind, "detail": e.detail,
                                              "commitLogOffset": qf.base + pos})
            if f.raw:
                item.raw = bytes(buf[pos : min(end, pos + 256)])
                item.layout = CommitLogRecord
            yield item
            return
        if (f.offset is None or qf.base + pos >= f.offset) and (want_all or msg_matches(msg, f)):
            yield message_item(msg, rel, pos, buf, f, body_crc(msg.body) == msg.body_crc)
        pos += msg.total_size


# --- ConsumeQueue -----------------------------------------------------------------------------

def dissect_consumequeue(path: Path, f: Filters, progress: Progress = None) -> Iterator[Item]:
    root, relroot = root_and_rel(path)
    reader = CommitLogReader(queue_files(root / "commitlog")) if root is not None and (
        f.follow or f.since is not None or f.until is not None or f.key or f.msg_id or f.tag) else None
    try:
        for topic, qid, files in queue_targets(path):
            if f.topic is not None and topic != f.topic:
                continue
            if f.queue is not None and qid != f.queue:
                continue
            ext = ExtReader(root / CQ_EXT_DIR / topic / str(qid)) if f.follow and root is not None else None
            try:
                for u in iter_units(files):
                    if f.offset is not None and u.queue_offset < f.offset:
                        continue
                    fields = {"topic": topic, "queueId": qid, "queueOffset": u.queue_offset,
                              "commitLogOffset": u.commit_log_offset, "size": u.size, "tagsCode": u.tags_code}
                    if u.is_blank:
                        fields["type"] = "blank"
                    elif is_ext_addr(u.tags_code):  # enableConsumeQueueExt: the tag hash is in the ext unit
                        fields["extOffset"] = undecorate(u.tags_code)
                    item = Item("cq-unit", relpath(u.file.path, relroot), u.pos, fields)
                    if f.raw:
                        with ReadOnlyFile(u.file.path) as rof:
                            item.raw = bytes(rof.buf[u.pos : u.pos + CQ_STORE_UNIT_SIZE])
                        item.layout = CqUnit
                    if ext is not None and "extOffset" in fields:
                        item.links["ext"] = ext_link(ext, u.tags_code, topic, qid, relroot, f)
                    if reader is not None and not u.is_blank and not follow_message(
                            item, reader, u.commit_log_offset, relroot, f):
                        continue
                    yield item
            finally:
                if ext is not None:
                    ext.close()
    finally:
        if reader is not None:
            reader.close()


def ext_link(ext: ExtReader, address: int, topic: str, qid: int, relroot: Path, f: Filters) -> Item | dict:
    """The ConsumeQueueExt unit a CQ unit's address points at, or why there is none."""
    e = ext.get(address)
    if e is None:
        return {"problem": "cq-ext-unit-bad", "detail": f"no ConsumeQueueExt unit at {undecorate(address)}"}
    return ext_item(e, topic, qid, relroot, f)


# --- IndexFile --------------------------------------------------------------------------------


def _index_files(path: Path) -> list[Path]:
    path = Path(path)
    if path.is_file():
        return [path]
    if (path / "index").is_dir():
        path = path / "index"
    if not path.is_dir():
        raise InvalidInput(f"{path}: no such file or directory")
    return sorted(p for p in path.iterdir() if p.is_file() and INDEX_NAME.match(p.name))


def dissect_index(path: Path, f: Filters, progress: Progress = None, cfg: LayoutConfig | None = None) -> Iterator[Item]:
    root, relroot = root_and_rel(path)
    cfg = cfg or load_layout_config(root)
    reader = CommitLogReader(queue_files(root / "commitlog")) if root is not None and f.follow else None
    want_hashes: set[int] | None = None
    if f.key is not None or f.msg_id is not None:
        k = f.key if f.key is not None else f.msg_id
        assert k is not None
        if "#" in k:
            keys = [k]
        elif f.topic is not None:
            keys = [f"{f.topic}#{k}"]
        else:  # index keys are TOPIC#KEY: try every topic the store has queues for
            topics = sorted(d.name for d in (root / "consumequeue").iterdir() if d.is_dir()) if (
                root is not None and (root / "consumequeue").is_dir()) else []
            keys = [f"{t}#{k}" for t in topics] or [k]
        want_hashes = {derive.key_hash(key) for key in keys}
    try:
        for p in _index_files(path):
            rel = relpath(p, relroot)
            with ReadOnlyFile(p) as rof:
                buf, size = rof.buf, rof.size
                if size < INDEX_HEADER_SIZE:
                    yield Item("problem", rel, 0, {"type": "problem", "problem": "index-header-bad",
                                                   "detail": f"file is only {size} bytes"})
                    continue
                b_ts, e_ts, b_phy, e_phy, slot_count, count = INDEX_HEADER.unpack_from(buf, 0)
                header = Item("index-header", rel, 0, {
                    "type": "header", "beginTimestamp": b_ts, "endTimestamp": e_ts, "beginPhyOffset": b_phy,
                    "endPhyOffset": e_phy, "hashSlotCount": slot_count, "indexCount": count,
                    "hashSlotNum": cfg.hash_slot_num, "indexNum": cfg.index_num})
                if f.raw:
                    header.raw, header.layout = bytes(buf[:INDEX_HEADER_SIZE]), IndexHeader
                if want_hashes is None and f.offset is None:
                    yield header
                count = max(1, count)
                entries_at = INDEX_HEADER_SIZE + cfg.hash_slot_num * INDEX_SLOT_SIZE
                count = min(count, max(1, (size - entries_at) // INDEX_ENTRY_SIZE))
                if want_hashes is not None:
                    numbers: list[int] = []
                    for wh in sorted(want_hashes):
                        spos = INDEX_HEADER_SIZE + (wh % cfg.hash_slot_num) * INDEX_SLOT_SIZE
                        n = int.from_bytes(buf[spos : spos + 4], "big", signed=True) if spos + 4 <= size else 0
                        walked = 0
                        while 0 < n < count and walked < count:
                            numbers.append(n)
                            walked += 1
                            n = INDEX_ENTRY.unpack_from(buf, entries_at + n * INDEX_ENTRY_SIZE)[3]
                    order = sorted(set(numbers), reverse=True)
                else:
                    order = range(max(1, f.offset or 1), count)
                for n in order:
                    epos = entries_at + n * INDEX_ENTRY_SIZE
                    h, phy, diff, prev = INDEX_ENTRY.unpack_from(buf, epos)
                    if want_hashes is not None and h not in want_hashes:
                        continue
                    ts = b_ts + diff * 1000
                    if not f.in_window(ts):
                        continue
                    item = Item("index-entry", rel, epos, {"entry": n, "keyHash": h, "phyOffset": phy,
                                                           "timeDiff": diff, "prevIndex": prev,
                                                           "storeTimestamp": ts})
                    if f.raw:
                        item.raw, item.layout = bytes(buf[epos : epos + INDEX_ENTRY_SIZE]), IndexEntry
                    if reader is not None:
                        link_message(item, reader, phy, relroot, f)
                    yield item
    finally:
        if reader is not None:
            reader.close()


# --- Registry -----------------------------------------------------------------------------------

DISSECTORS = {
    "commitlog": dissect_commitlog,
    "consumequeue": dissect_consumequeue,
    "index": dissect_index,
    "timerlog": dissect_timerlog,
    "timerwheel": dissect_timerwheel,
    "checkpoint": dissect_checkpoint,
    "timercheck": dissect_timercheck,
    "config": dissect_config,
}


def dissect(kind: str, path: Path, f: Filters, progress: Progress = None) -> Iterator[Item]:
    """Items of `kind` under `path`, filtered, at most `f.limit` (top-level) of them."""
    if kind == "store":
        gen = summarize_store(Path(path), f, progress)
    else:
        fn = DISSECTORS.get(kind) or QUEUE_DISSECTORS.get(kind) or POP_DISSECTORS.get(kind)
        if fn is None:
            raise InvalidInput(f"unknown kind {kind!r}; one of {', '.join(KINDS)}")
        if not Path(path).exists():
            raise InvalidInput(f"{path}: no such file or directory")
        gen = fn(Path(path), f, progress)
    n = 0
    for item in gen:
        if f.limit is not None and n >= f.limit:
            break
        n += 1
        yield item
