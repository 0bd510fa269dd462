"""What the dissectors share: ISO times, the store root of a path, a message as an item with its
links, the filters on messages, the queues under a path, the CommitLog record a unit points at,
and the fixed-layout files (checkpoint, timercheck) found in a store or its config/.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from rmqtool.errors import InvalidInput
from rmqtool.inspect.commitlog import CommitLogReader
from rmqtool.inspect.cq import queue_dirs
from rmqtool.inspect.files import (
    OFFSET_NAME,
    QueueFile,
    as_queue_files,
    find_store_root,
    queue_files,
    relpath,
)
from rmqtool.inspect.model import Filters, Item
from rmqtool.layouts import properties as P
from rmqtool.layouts.commitlog import CommitLogRecord
from rmqtool.layouts.message import Blank, MessageExt, RecordError, body_crc, body_fields
from rmqtool.layouts.msgid import decode_offset_msg_id

Progress = Callable[[int], None] | None


def iso(ms: int) -> str | None:
    """Epoch ms as ISO-8601 UTC with milliseconds; None for 0 or absurd values."""
    import datetime as dt

    if ms <= 0 or ms > 253402300799999:
        return None
    t = dt.datetime.fromtimestamp(ms / 1000, dt.timezone.utc)
    return t.strftime("%Y-%m-%dT%H:%M:%S.") + f"{ms % 1000:03d}Z"


def root_and_rel(path: Path) -> tuple[Path | None, Path]:
    root = find_store_root(path)
    return root, (root if root is not None else (path if path.is_dir() else path.parent))


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


def msg_matches(msg: MessageExt, f: Filters) -> bool:
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


def fields_match(d: dict[str, Any], f: Filters) -> bool:
    """`msg_matches` on JSON fields (topic, queue and time filters only)."""
    if f.topic is not None and d["topic"] != f.topic and d["properties"].get(P.REAL_TOPIC) != f.topic:
        return False
    if f.queue is not None and d["queueId"] != f.queue:
        return False
    return f.in_window(d["storeTimestamp"])


def links_for_message(msg: MessageExt) -> dict[str, Any]:
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
        item.links.update(links_for_message(msg))
    return item


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
    if not msg_matches(msg, Filters(since=f.since, until=f.until, key=f.key, msg_id=f.msg_id, tag=f.tag)):
        return False
    if f.follow:
        loc = reader.locate(offset)
        assert loc is not None
        item.links["message"] = message_item(msg, relpath(loc[0].path, relroot), loc[1], reader._file(loc[0]).buf, f,
                                             None)
    return True


def link_message(item: Item, reader: CommitLogReader, phy: int, relroot: Path, f: Filters) -> None:
    try:
        msg = reader.read(phy, check_crc=False)
    except (RecordError, Blank) as e:
        item.links["message"] = {"problem": getattr(e, "kind", "blank"), "detail": str(e)}
        return
    loc = reader.locate(phy)
    assert loc is not None
    item.links["message"] = message_item(msg, relpath(loc[0].path, relroot), loc[1], reader._file(loc[0]).buf,
                                         Filters(body_hex=f.body_hex, raw=f.raw), None)


def fixed_file(path: Path, default: str) -> Path:
    path = Path(path)
    if path.is_dir():
        cand = path / default
        if not cand.is_file() and (path / "config" / default).is_file():
            cand = path / "config" / default
        path = cand
    if not path.is_file():
        raise InvalidInput(f"{path}: no such file")
    return path


def read_fixed(path: Path, default: str, size: int) -> tuple[str, bytes, Item | None]:
    """A fixed-layout file's (relative name, first 4096 bytes, problem item when shorter than `size`)."""
    path = fixed_file(path, default)
    rel = relpath(path, root_and_rel(path)[1])
    raw = path.read_bytes()[:4096]
    if len(raw) >= size:
        return rel, raw, None
    return rel, raw, Item("problem", rel, 0, {"type": "problem", "problem": "file-size-mismatch",
                                               "detail": f"{default} is {len(raw)} bytes"})
