"""The JSON fields of a CommitLog record straight from its bytes: the `inspect --json` hot path.

Gives exactly what `dissect.message_fields(decode_record(...))` gives (a test proves it on every
fixture record) without building a `MessageExt`, going through `ipaddress` or decoding twice.
Anything unusual (a damaged record, a compressed body) returns None and the caller takes the
general path.
"""

from __future__ import annotations

import base64
import ipaddress
import struct
import zlib
from typing import Any

from rmqtool.layouts.constants import MESSAGE_MAGIC_CODE, MESSAGE_MAGIC_CODE_V2

_HEAD = struct.Struct(">iiiiiqqiq")
_Q = struct.Struct(">q")
_I = struct.Struct(">i")
_MID = struct.Struct(">iqi")
_H = struct.Struct(">h")
_hosts: dict[bytes, str] = {}


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
    return {k: v for k, sep, v in (seg.partition("\x01") for seg in text.split("\x02")) if sep and k and v}


def fast_message_fields(buf, pos: int, end: int, body_hex: bool = False,
                        where: tuple[str, str] | None = None) -> tuple[int, dict[str, Any]] | None:
    """(totalSize, fields) of a sound, uncompressed record at `pos`, else None.

    With `where=(file, path)` the fields start with file, path and pos, ready to print.
    """
    if end - pos < 91:
        return None
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
    try:
        d["body"] = body.decode("utf-8")
    except UnicodeDecodeError:
        d["bodyBase64"] = base64.b64encode(body).decode("ascii")
    if body_hex:
        d["bodyHex"] = body.hex()
    if zlib.crc32(body) & 0x7FFFFFFF != crc:
        d["problem"] = "crc-mismatch"
        d["detail"] = f"bodyCRC {crc} but the body's CRC is {zlib.crc32(body) & 0x7FFFFFFF}"
    return total, d
