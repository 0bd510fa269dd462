"""The JSON fields of a CommitLog record straight from its bytes: the `inspect --json` hot path.

Gives exactly what `dissect.message_fields(decode_record(...))` gives (a test proves it on every
fixture record) without building a `MessageExt`, going through `ipaddress` or decoding twice.
Anything unusual (a damaged record, a compressed body) returns None and the caller takes the
general path.

The common record (V1 magic, IPv4 hosts) is read with one `struct` unpack for its fixed part
and one for topic + propertiesLength; host strings and the host half of offsetMsgId are cached
per raw address (a store has few hosts), and the dict is built once, in output order. Passing
the mmap itself as `buf` (not a memoryview of it) makes the body and properties slices plain
bytes copies, the cheapest way to get them.
"""

from __future__ import annotations

import base64
import ipaddress
import struct
import zlib
from itertools import repeat
from typing import Any

from rmqtool.layouts.constants import MESSAGE_MAGIC_CODE, MESSAGE_MAGIC_CODE_V2

_HEAD = struct.Struct(">iiiiiqqiq")
_Q = struct.Struct(">q")
_I = struct.Struct(">i")
_MID = struct.Struct(">iqi")
_H = struct.Struct(">h")
# totalSize .. bodyLength of a record with IPv4 hosts (88 bytes), hosts as raw 8-byte strings;
# tests/layouts checks it against CommitLogRecord
V4_FIELDS = ("totalSize", "magicCode", "bodyCRC", "queueId", "flag", "queueOffset", "physicalOffset", "sysFlag",
             "bornTimestamp", "bornHost", "storeTimestamp", "storeHost", "reconsumeTimes",
             "preparedTransactionOffset", "bodyLength")
V4_HEAD = struct.Struct(">iiiiiqqiq8sq8siqi")
_hosts: dict[bytes, str] = {}
_msg_id_hosts: dict[bytes, str] = {}  # raw store host -> the first 16 hex digits of offsetMsgId
_topic_codecs: dict[int, Any] = {}
_partition = str.partition


def _host(raw: bytes) -> str:
    s = _hosts.get(raw)
    if s is None:
        port = _I.unpack_from(raw, len(raw) - 4)[0]
        if len(raw) == 8:
            s = f"{raw[0]}.{raw[1]}.{raw[2]}.{raw[3]}:{port}"
        else:
            s = f"[{ipaddress.IPv6Address(raw[:16])}]:{port}"
        if len(_hosts) > 4096:
            _hosts.clear()
        _hosts[raw] = s
    return s


def _props(text: str) -> dict[str, str]:
    """`decode_properties` in one comprehension: same drops (empty key or value), same last-wins."""
    # a non-empty value implies the separator was found: `v and k` is `sep and k and v`
    return {k: v for k, _, v in map(_partition, text.split("\x02"), repeat("\x01")) if v and k}


def _msg_id_host(raw: bytes) -> str:
    s = _msg_id_hosts.get(raw)
    if s is None:
        if len(_msg_id_hosts) > 4096:
            _msg_id_hosts.clear()
        s = _msg_id_hosts[raw] = raw.hex().upper()
    return s


def _topic_codec(topic_len: int) -> Any:
    """`unpack_from` of topic bytes + propertiesLength for one topic length."""
    codec = _topic_codecs.get(topic_len)
    if codec is None:
        codec = _topic_codecs[topic_len] = struct.Struct(f">{topic_len}sh").unpack_from
    return codec


def fast_message_fields(buf, pos: int, end: int, body_hex: bool = False,
                        where: tuple[str, str] | None = None) -> tuple[int, dict[str, Any]] | None:
    """(totalSize, fields) of a sound, uncompressed record at `pos`, else None.

    With `where=(file, path)` the fields start with file, path and pos, ready to print.
    """
    if end - pos < 91:
        return None
    (total, magic, crc, qid, flag, qoff, phys, sysflag, born_ts, born, store_ts, store, reconsume, prepared,
     body_len) = V4_HEAD.unpack_from(buf, pos)
    if magic != MESSAGE_MAGIC_CODE or sysflag & 0x31 or total < 91 or total > end - pos:
        return _general_fields(buf, pos, end, body_hex, where)
    rec_end = pos + total
    p = pos + 88
    if body_len < 0 or p + body_len + 3 > rec_end:
        return None
    view = isinstance(buf, memoryview)
    body = bytes(buf[p : p + body_len]) if view else buf[p : p + body_len]
    p += body_len
    tl = buf[p]
    p += 1
    if tl > 127 or p + tl + 2 > rec_end:
        return None
    topic, pl = _topic_codec(tl)(buf, p)
    p += tl + 2
    if pl < 0 or p + pl != rec_end:
        return None
    if pl:
        props = _props((bytes(buf[p:rec_end]) if view else buf[p:rec_end]).decode("utf-8", "replace"))
        get = props.get
        uniq, tags, keys = get("UNIQ_KEY"), get("TAGS"), get("KEYS")
    else:
        props = {}
        uniq = tags = keys = None
    offset_msg_id = (_msg_id_hosts.get(store) or _msg_id_host(store)) + _Q.pack(phys).hex().upper()
    file, path = where if where is not None else ("", "")
    d: dict[str, Any] = {
        "file": file, "path": path, "pos": pos,
        "topic": topic.decode("utf-8", "replace"), "queueId": qid, "queueOffset": qoff, "commitLogOffset": phys,
        "msgId": uniq or offset_msg_id, "offsetMsgId": offset_msg_id, "tags": tags, "keys": keys,
        "bornTimestamp": born_ts, "bornHost": _hosts.get(born) or _host(born), "storeTimestamp": store_ts,
        "storeHost": _hosts.get(store) or _host(store), "reconsumeTimes": reconsume, "sysFlag": sysflag,
        "flag": flag, "bodyCRC": crc, "totalSize": total, "properties": props, "physicalOffset": phys,
        "magicCode": magic, "preparedTransactionOffset": prepared, "bodyLength": body_len,
    }
    if where is None:
        del d["file"], d["path"], d["pos"]
    _add_body(d, body, crc, body_hex)
    return total, d


def _general_fields(buf, pos: int, end: int, body_hex: bool = False,
                    where: tuple[str, str] | None = None) -> tuple[int, dict[str, Any]] | None:
    """`fast_message_fields` for any magic and host kind (V2 records, IPv6 hosts)."""
    total, magic, crc, qid, flag, qoff, phys, sysflag, born_ts = _HEAD.unpack_from(buf, pos)
    if (magic != MESSAGE_MAGIC_CODE and magic != MESSAGE_MAGIC_CODE_V2) or total < 91 or total > end - pos \
            or sysflag & 0x1:
        return None
    rec_end = pos + total
    hl = 20 if sysflag & 0x10 else 8
    sl = 20 if sysflag & 0x20 else 8
    p = pos + 48
    born = bytes(buf[p : p + hl])
    p += hl
    store_ts = _Q.unpack_from(buf, p)[0]
    p += 8
    store = bytes(buf[p : p + sl])
    p += sl
    reconsume, prepared, body_len = _MID.unpack_from(buf, p)
    p += 16
    if body_len < 0 or p + body_len + 3 > rec_end:
        return None
    body = bytes(buf[p : p + body_len])
    p += body_len
    if magic == MESSAGE_MAGIC_CODE:
        tl = buf[p]
        if tl > 127:
            return None
        p += 1
    else:
        tl = _H.unpack_from(buf, p)[0]
        p += 2
    if tl < 0 or p + tl + 2 > rec_end:
        return None
    topic = bytes(buf[p : p + tl]).decode("utf-8", "replace")
    p += tl
    pl = _H.unpack_from(buf, p)[0]
    p += 2
    if pl < 0 or p + pl != rec_end:
        return None
    props = _props(bytes(buf[p : p + pl]).decode("utf-8", "replace")) if pl else {}
    offset_msg_id = (store[:-4] + store[-4:] + _Q.pack(phys)).hex().upper()
    d: dict[str, Any] = {"file": where[0], "path": where[1], "pos": pos} if where is not None else {}
    d.update({
        "topic": topic, "queueId": qid, "queueOffset": qoff, "commitLogOffset": phys,
        "msgId": props.get("UNIQ_KEY") or offset_msg_id, "offsetMsgId": offset_msg_id,
        "tags": props.get("TAGS"), "keys": props.get("KEYS"), "bornTimestamp": born_ts, "bornHost": _host(born),
        "storeTimestamp": store_ts, "storeHost": _host(store), "reconsumeTimes": reconsume, "sysFlag": sysflag,
        "flag": flag, "bodyCRC": crc, "totalSize": total, "properties": props, "physicalOffset": phys,
        "magicCode": magic, "preparedTransactionOffset": prepared, "bodyLength": body_len,
    })
    _add_body(d, body, crc, body_hex)
    return total, d


def _add_body(d: dict[str, Any], body: bytes, crc: int, body_hex: bool) -> None:
    """`body` (or `bodyBase64`), `bodyHex` on request, and the CRC verdict, in output order."""
    try:
        d["body"] = body.decode("utf-8")
    except UnicodeDecodeError:
        d["bodyBase64"] = base64.b64encode(body).decode("ascii")
    if body_hex:
        d["bodyHex"] = body.hex()
    body_crc = zlib.crc32(body) & 0x7FFFFFFF
    if body_crc != crc:
        d["problem"] = "crc-mismatch"
        d["detail"] = f"bodyCRC {crc} but the body's CRC is {body_crc}"
