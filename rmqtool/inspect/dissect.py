"""Dissectors: one generator of `Item`s per file kind (`inspect KIND PATH`).

All of them read through `ReadOnlyFile` (mmap, read-only), stream file by file in constant
memory, and treat a record or unit of zeros as the end of the data (a live broker's tail).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from rmqtool.errors import InvalidInput
from rmqtool.inspect import derive
from rmqtool.inspect.commitlog import CommitLogReader
from rmqtool.inspect.configs import ConfigError, int_keyed, is_config_file, load_config
from rmqtool.inspect.cq import iter_units, queue_dirs
from rmqtool.inspect.cqext import CQ_EXT_DIR, ExtReader
from rmqtool.inspect.fastjson_record import fast_message_fields
from rmqtool.inspect.files import (
    INDEX_NAME,
    OFFSET_NAME,
    QueueFile,
    ReadOnlyFile,
    as_queue_files,
    find_store_root,
    queue_files,
    relpath,
)
from rmqtool.inspect.layoutconfig import LayoutConfig, load_layout_config
from rmqtool.inspect.model import Filters, Item
from rmqtool.inspect.timercheck import iter_timerlog, iter_wheel_slots
from rmqtool.layouts import properties as P
from rmqtool.layouts.checkpoint import STORE_CHECKPOINT, TIMER_CHECKPOINT, StoreCheckpoint, TimerCheckpoint
from rmqtool.layouts.commitlog import CommitLogBlank, CommitLogRecord
from rmqtool.layouts.constants import (
    BLANK_MAGIC_CODE,
    CQ_STORE_UNIT_SIZE,
    INDEX_ENTRY_SIZE,
    INDEX_HEADER_SIZE,
    INDEX_SLOT_SIZE,
    TIMER_SLOT_SIZE,
    TIMERLOG_UNIT_SIZE,
)
from rmqtool.layouts.consumequeue import CqUnit
from rmqtool.layouts.cqext import is_ext_addr, undecorate
from rmqtool.layouts.index import INDEX_ENTRY, INDEX_HEADER, IndexEntry, IndexHeader
from rmqtool.layouts.message import Blank, MessageExt, RecordError, body_crc, body_fields, decode_record
from rmqtool.layouts.msgid import decode_offset_msg_id
from rmqtool.layouts.timer import TimerLogBlank, TimerLogUnit, TimerSlot

KINDS = ("commitlog", "consumequeue", "batchconsumequeue", "consumequeue_ext", "index", "timerlog", "timerwheel",
         "checkpoint", "timercheck", "config", "store", "revive", "inflight")

Progress = Callable[[int], None] | None


def iso(ms: int) -> str | None:
    """Epoch ms as ISO-8601 UTC with milliseconds; None for 0 or absurd values."""
    import datetime as dt

    if ms <= 0 or ms > 253402300799999:
        return None
    t = dt.datetime.fromtimestamp(ms / 1000, dt.timezone.utc)
    return t.strftime("%Y-%m-%dT%H:%M:%S.") + f"{ms % 1000:03d}Z"


def _root_and_rel(path: Path) -> tuple[Path | None, Path]:
    root = find_store_root(path)
    return root, (root if root is not None else (path if path.is_dir() else path.parent))


# --- CommitLog ---------------------------------------------------------------------------------

def message_fields(msg: MessageExt, *, body_hex: bool = False, crc_ok: bool | None = None) -> dict[str, Any]:
    """Every field of a record with RocketMQ's JSON names (cli.md)."""
    d = msg.to_json(body=False)
    d["physicalOffset"] = msg.commit_log_offset
    d["magicCode"] = msg.magic_code
    d["preparedTransactionOffset"] = msg.prepared_transaction_offset
    d["bodyLength"] = len(msg.body)
    try:
        body = msg.decompressed_body()
    except Exception as e:  # noqa: BLE001 - a damaged compressed body is shown, not fatal
        body = msg.body
        d["bodyError"] = f"cannot decompress: {e.__class__.__name__}"
    d.update(body_fields(body))
    if body_hex:
        d["bodyHex"] = msg.body.hex()
    if crc_ok is False:
        d["problem"] = "crc-mismatch"
        d["detail"] = f"bodyCRC {msg.body_crc} but the body's CRC is {body_crc(msg.body)}"
    return d


def _msg_matches(msg: MessageExt, f: Filters) -> bool:
    if f.topic is not None and msg.topic != f.topic and msg.properties.get(P.REAL_TOPIC) != f.topic:
        return False
    if f.queue is not None and msg.queue_id != f.queue:
        return False
    if (f.since is not None or f.until is not None) and not f.in_window(msg.store_timestamp):
        return False
    if f.tag is not None and msg.properties.get(P.TAGS) != f.tag:
        return False
    if f.key is not None:
        keys = (msg.properties.get(P.KEYS) or "").split(" ")
        if f.key not in keys and msg.properties.get(P.UNIQ_KEY) != f.key:
            return False
    if f.msg_id is not None:
        mid = f.msg_id.upper()
        if msg.properties.get(P.UNIQ_KEY, "").upper() != mid and msg.offset_msg_id != mid:
            return False
    return True


def _fields_match(d: dict[str, Any], f: Filters) -> bool:
    """`_msg_matches` on JSON fields (topic, queue and time filters only)."""
    if f.topic is not None and d["topic"] != f.topic and d["properties"].get(P.REAL_TOPIC) != f.topic:
        return False
    if f.queue is not None and d["queueId"] != f.queue:
        return False
    return f.in_window(d["storeTimestamp"])


def _links_for_message(msg: MessageExt) -> dict[str, Any]:
    links: dict[str, Any] = {}
    for name in (P.ORIGIN_MESSAGE_ID, P.DLQ_ORIGIN_MESSAGE_ID):
        v = msg.properties.get(name)
        if v:
            try:
                d = decode_offset_msg_id(v)
                links[name[0].lower() + name.title().replace("_", "")[1:] + "Decoded"] = {
                    "storeHost": str(d.host), "commitLogOffset": d.commit_log_offset}
            except ValueError:
                pass
    d = decode_offset_msg_id(msg.offset_msg_id)
    links["offsetMsgIdDecoded"] = {"storeHost": str(d.host), "commitLogOffset": d.commit_log_offset}
    return links


def message_item(msg: MessageExt, path: str, pos: int, raw_buf, f: Filters, crc_ok: bool | None) -> Item:
    item = Item("message", path, pos, message_fields(msg, body_hex=f.body_hex, crc_ok=crc_ok))
    if f.raw:
        item.raw = bytes(raw_buf[pos : pos + msg.total_size])
        item.layout = CommitLogRecord
    if f.follow:
        item.links.update(_links_for_message(msg))
    return item


def dissect_commitlog(path: Path, f: Filters, progress: Progress = None) -> Iterator[Item]:
    if (Path(path) / "commitlog").is_dir():
        path = Path(path) / "commitlog"
    files = as_queue_files(path)
    _, relroot = _root_and_rel(path)
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
        if _msg_matches(msg, f):
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
                if pos >= start and (want_all or _fields_match(d, f)):
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
        if (f.offset is None or qf.base + pos >= f.offset) and (want_all or _msg_matches(msg, f)):
            yield message_item(msg, rel, pos, buf, f, body_crc(msg.body) == msg.body_crc)
        pos += msg.total_size


# --- ConsumeQueue -----------------------------------------------------------------------------

def queue_targets(path: Path, dirname: str = "consumequeue") -> list[tuple[str, int, list[QueueFile]]]:
    """PATH as DIR/, DIR/TOPIC, DIR/TOPIC/QID, one queue file or a store root, where DIR is `dirname`.

    ConsumeQueue, BatchConsumeQueue and ConsumeQueueExt all keep RocketMQ's `<dir>/<topic>/<queueId>/`
    tree of offset-named files, so one walk serves the three.
    """
    path = Path(path)
    if path.is_file():
        qdir = path.parent
        return [(qdir.parent.name, int(qdir.name) if qdir.name.isdigit() else 0, as_queue_files(path))]
    if (path / dirname).is_dir():
        path = path / dirname
    elif (path / "commitlog").is_dir():
        return []  # a store root without this kind of queue
    if not path.is_dir():
        raise InvalidInput(f"{path}: no such file or directory")
    if any(OFFSET_NAME.match(p.name) for p in path.iterdir()):
        return [(path.parent.name, int(path.name) if path.name.isdigit() else 0, queue_files(path))]
    if all(p.name.isdigit() for p in path.iterdir() if p.is_dir()) and any(path.iterdir()):
        return [(path.name, int(q.name), queue_files(q))
                for q in sorted(path.iterdir(), key=lambda p: (len(p.name), p.name)) if q.is_dir()]
    return [(t, q, queue_files(d)) for t, q, d in queue_dirs(path)]


def follow_message(item: Item, reader: CommitLogReader, offset: int, relroot: Path, f: Filters) -> bool:
    """Link a queue unit's record to `item` (with --follow-links); False when the record fails the
    message filters (time, key, msgId, tag), so the unit is not shown."""
    try:
        msg = reader.read(offset, check_crc=False)
    except (RecordError, Blank) as e:
        item.links["message"] = {"problem": getattr(e, "kind", "blank"), "detail": str(e)}
        return True
    if not _msg_matches(msg, Filters(since=f.since, until=f.until, key=f.key, msg_id=f.msg_id, tag=f.tag)):
        return False
    if f.follow:
        loc = reader.locate(offset)
        assert loc is not None
        item.links["message"] = message_item(msg, relpath(loc[0].path, relroot), loc[1], reader._file(loc[0]).buf, f,
                                             None)
    return True


def dissect_consumequeue(path: Path, f: Filters, progress: Progress = None) -> Iterator[Item]:
    root, relroot = _root_and_rel(path)
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
    from rmqtool.inspect.dissect_queues import ext_item

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
    root, relroot = _root_and_rel(path)
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
                        _link_message(item, reader, phy, relroot, f)
                    yield item
    finally:
        if reader is not None:
            reader.close()


def _link_message(item: Item, reader: CommitLogReader, phy: int, relroot: Path, f: Filters) -> None:
    try:
        msg = reader.read(phy, check_crc=False)
    except (RecordError, Blank) as e:
        item.links["message"] = {"problem": getattr(e, "kind", "blank"), "detail": str(e)}
        return
    loc = reader.locate(phy)
    assert loc is not None
    item.links["message"] = message_item(msg, relpath(loc[0].path, relroot), loc[1], reader._file(loc[0]).buf,
                                         Filters(body_hex=f.body_hex, raw=f.raw), None)


# --- Timer store ------------------------------------------------------------------------------

def _timer_fields(u) -> dict[str, Any]:
    return {"size": u.size, "prevPos": u.prev_pos, "magic": u.magic, "currWriteTime": u.curr_write_time,
            "delayTime": u.delay_time, "delayedTime": u.delayed_time, "offsetPy": u.offset_py, "sizePy": u.size_py,
            "hashCodeOfRealTopic": u.hash_code_of_real_topic, "timerLogOffset": u.offset}


def dissect_timerlog(path: Path, f: Filters, progress: Progress = None) -> Iterator[Item]:
    path = Path(path)
    if (path / "timerlog").is_dir():
        path = path / "timerlog"
    root, relroot = _root_and_rel(path)
    files = as_queue_files(path)
    reader = CommitLogReader(queue_files(root / "commitlog")) if root is not None and f.follow else None
    problems: list = []
    try:
        for u in iter_timerlog(files, relroot, problems=problems):
            if f.offset is not None and u.offset < f.offset:
                continue
            if not f.in_window(u.delayed_time):
                continue
            item = Item("timerlog-unit", relpath(u.file.path, relroot), u.pos, _timer_fields(u))
            if f.raw:
                with ReadOnlyFile(u.file.path) as rof:
                    item.raw = bytes(rof.buf[u.pos : u.pos + TIMERLOG_UNIT_SIZE])
                item.layout = TimerLogUnit
            if reader is not None:
                _link_message(item, reader, u.offset_py, relroot, f)
            yield item
        for p in problems:
            yield Item("problem", p.path, p.pos, {"type": "problem", "problem": p.kind, "detail": p.detail})
        for qf in files:  # the blanks, for completeness of the hex view
            with ReadOnlyFile(qf.path) as rof:
                pos = (rof.size - 16) - (rof.size - 16) % TIMERLOG_UNIT_SIZE if rof.size >= 16 else -1
                for cand in {pos, rof.size - 16} - {-1}:
                    if 0 <= cand and cand + 16 <= rof.size and int.from_bytes(
                            rof.buf[cand + 12 : cand + 16], "big", signed=True) == BLANK_MAGIC_CODE:
                        if f.offset is None and f.since is None and f.until is None:
                            item = Item("timerlog-blank", relpath(qf.path, relroot), cand,
                                        {"type": "blank", "size": int.from_bytes(rof.buf[cand : cand + 4], "big",
                                                                                 signed=True),
                                         "magicCode": BLANK_MAGIC_CODE})
                            if f.raw:
                                item.raw, item.layout = bytes(rof.buf[cand : cand + 16]), TimerLogBlank
                            yield item
                        break
    finally:
        if reader is not None:
            reader.close()


def dissect_timerwheel(path: Path, f: Filters, progress: Progress = None,
                       cfg: LayoutConfig | None = None) -> Iterator[Item]:
    path = Path(path)
    if path.is_dir():
        path = path / "timerwheel"
    if not path.is_file():
        raise InvalidInput(f"{path}: no such file")
    root, relroot = _root_and_rel(path)
    cfg = cfg or load_layout_config(root)
    rel = relpath(path, relroot)
    units = None
    reader = None
    if f.follow and root is not None:
        units = {u.offset: u for u in iter_timerlog(queue_files(root / "timerlog"), relroot)}
        reader = CommitLogReader(queue_files(root / "commitlog"))
    try:
        for idx, (tsecs, first, last, num, magic) in iter_wheel_slots(path):
            if f.offset is not None and idx < f.offset:
                continue
            t_ms = tsecs * cfg.timer_precision_ms
            if not -(1 << 63) <= t_ms < (1 << 63):  # a damaged slot time: keep JSON within int64
                t_ms = -1
            if not f.in_window(t_ms):
                continue
            fields = {"slot": idx, "timeSecs": tsecs, "timeMs": t_ms, "time": iso(t_ms), "firstPos": first,
                      "lastPos": last, "num": num, "magic": magic}
            item = Item("wheel-slot", rel, idx * TIMER_SLOT_SIZE, fields)
            if f.raw:
                with ReadOnlyFile(path) as rof:
                    item.raw = bytes(rof.buf[idx * TIMER_SLOT_SIZE : (idx + 1) * TIMER_SLOT_SIZE])
                item.layout = TimerSlot
            if units is not None and reader is not None:
                chain: list[Any] = []
                pos, seen = last, 0
                while pos != -1 and seen < 100_000:
                    u = units.get(pos)
                    if u is None:
                        chain.append({"problem": "wheel-slot-mismatch", "detail": f"no TimerLog unit at {pos}"})
                        break
                    unit = Item("timerlog-unit", relpath(u.file.path, relroot), u.pos, _timer_fields(u))
                    _link_message(unit, reader, u.offset_py, relroot, f)
                    chain.append(unit)
                    seen += 1
                    if u.prev_pos >= pos:
                        break
                    pos = u.prev_pos
                item.links["chain"] = chain
            yield item
    finally:
        if reader is not None:
            reader.close()


# --- Checkpoints, configs -----------------------------------------------------------------------

def _fixed_file(path: Path, default: str) -> Path:
    path = Path(path)
    if path.is_dir():
        cand = path / default
        if not cand.is_file() and (path / "config" / default).is_file():
            cand = path / "config" / default
        path = cand
    if not path.is_file():
        raise InvalidInput(f"{path}: no such file")
    return path


def _read_fixed(path: Path, default: str, size: int) -> tuple[str, bytes, Item | None]:
    """A fixed-layout file's (relative name, first 4096 bytes, problem item when shorter than `size`)."""
    path = _fixed_file(path, default)
    rel = relpath(path, _root_and_rel(path)[1])
    raw = path.read_bytes()[:4096]
    if len(raw) >= size:
        return rel, raw, None
    return rel, raw, Item("problem", rel, 0, {"type": "problem", "problem": "file-size-mismatch",
                                               "detail": f"{default} is {len(raw)} bytes"})


def dissect_checkpoint(path: Path, f: Filters, progress: Progress = None) -> Iterator[Item]:
    rel, raw, short = _read_fixed(path, "checkpoint", STORE_CHECKPOINT.size)
    if short is not None:
        yield short
        return
    physic, logics, index_ts, master, confirm = STORE_CHECKPOINT.unpack_from(raw, 0)
    item = Item("checkpoint", rel, 0, {
        "physicMsgTimestamp": physic, "physicMsgTime": iso(physic), "logicsMsgTimestamp": logics,
        "logicsMsgTime": iso(logics), "indexMsgTimestamp": index_ts, "indexMsgTime": iso(index_ts),
        "masterFlushedOffset": master, "confirmPhyOffset": confirm,
        "minTimestamp": max(0, min(physic, logics) - 3000)})
    if f.raw:
        item.raw, item.layout = raw[: STORE_CHECKPOINT.size], StoreCheckpoint
    yield item


def dissect_timercheck(path: Path, f: Filters, progress: Progress = None) -> Iterator[Item]:
    rel, raw, short = _read_fixed(path, "timercheck", TIMER_CHECKPOINT.size)
    if short is not None:
        yield short
        return
    read, flush, q, mq, sv, ts, counter = TIMER_CHECKPOINT.unpack_from(raw, 0)
    item = Item("timercheck", rel, 0, {
        "lastReadTimeMs": read, "lastReadTime": iso(read), "lastTimerLogFlushPos": flush,
        "lastTimerQueueOffset": q, "masterTimerQueueOffset": mq,
        "dataVersion": {"counter": counter, "stateVersion": sv, "timestamp": ts}})
    if f.raw:
        item.raw, item.layout = raw[: TIMER_CHECKPOINT.size], TimerCheckpoint
    yield item


def dissect_config(path: Path, f: Filters, progress: Progress = None) -> Iterator[Item]:
    path = Path(path)
    if path.is_dir() and (path / "config").is_dir():
        path = path / "config"
    files = sorted(p for p in path.iterdir() if is_config_file(p)) if path.is_dir() else [path]
    if not path.exists():
        raise InvalidInput(f"{path}: no such file or directory")
    _, relroot = _root_and_rel(path)
    for p in files:
        rel = relpath(p, relroot)
        try:
            doc = load_config(p)
        except ConfigError as e:
            yield Item("problem", rel, e.pos, {"type": "problem", "problem": "config-unparsable", "detail": e.detail})
            continue
        yield from _config_rows(rel, doc, f)


def _config_rows(name: str, doc: Any, f: Filters) -> Iterator[Item]:
    rel, name = name, name.rsplit("/", 1)[-1]
    table = doc.get("offsetTable") if isinstance(doc, dict) else None
    if name.startswith("consumerOffset") and isinstance(table, dict):
        for key, qmap in table.items():
            topic, _, group = str(key).partition("@")
            if f.topic is not None and topic != f.topic:
                continue
            for qid, off in sorted(int_keyed(qmap).items()):
                if f.queue is None or qid == f.queue:
                    yield Item("config-row", rel, 0, {"group": group, "topic": topic, "queueId": qid, "offset": off})
    elif name.startswith("delayOffset") and isinstance(table, dict):
        for level, off in sorted(int_keyed(table).items()):
            yield Item("config-row", rel, 0, {"delayLevel": level, "queueId": level - 1, "offset": off})
    elif name.startswith("topics") and isinstance(doc, dict) and isinstance(doc.get("topicConfigTable"), dict):
        for topic, tc in doc["topicConfigTable"].items():
            if f.topic is None or topic == f.topic:
                yield Item("config-row", rel, 0, {"topicName": topic, **(tc if isinstance(tc, dict) else {})})
    elif name.startswith("subscriptionGroup") and isinstance(doc, dict) and isinstance(
            doc.get("subscriptionGroupTable"), dict):
        for group, gc in doc["subscriptionGroupTable"].items():
            yield Item("config-row", rel, 0, {"groupName": group, **(gc if isinstance(gc, dict) else {})})
    elif name.startswith("timermetrics") and isinstance(doc, dict) and isinstance(doc.get("timingCount"), dict):
        for topic, metric in doc["timingCount"].items():
            if (f.topic is None or topic == f.topic) and isinstance(metric, dict):
                yield Item("config-row", rel, 0, {"topic": topic, "count": metric.get("count"),
                                                  "timeStamp": metric.get("timeStamp")})
    else:
        yield Item("config", rel, 0, {"content": doc})


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
        from rmqtool.inspect.summary import summarize_store

        gen = summarize_store(Path(path), f, progress)
    else:
        from rmqtool.inspect.dissect_queues import DISSECTORS as QUEUE_DISSECTORS  # it imports this module
        from rmqtool.inspect.pop import DISSECTORS as POP_DISSECTORS

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
