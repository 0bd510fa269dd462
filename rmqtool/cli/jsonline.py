"""Fast path of `consume --format json`: one CommitLog record's bytes -> its JSON line.

The line is exactly `json_line(decode_record(raw).to_json())` (a test holds the two equal on many
records), built straight from the record bytes: one struct unpack, cached host strings, the C
string escaper of the json module, no MessageExt and no dict in between. Compressed bodies and
records with repeated property names go through the general path.
"""

from __future__ import annotations

import json.encoder
import re
import struct
from collections.abc import Callable

from rmqtool.cli.common import json_line
from rmqtool.layouts.constants import (
    BORNHOST_V6_FLAG,
    COMPRESSED_FLAG,
    MESSAGE_MAGIC_CODE_V2,
    STOREHOSTADDRESS_V6_FLAG,
)
from rmqtool.layouts.message import decode_record
from rmqtool.layouts.net import unpack_host

_esc: Callable[[str], str] = json.encoder.encode_basestring  # the C one when available (ensure_ascii=False)
_HEAD = struct.Struct(">iiiiiqqiq")
_Q = struct.Struct(">q")
_I = struct.Struct(">i")
_H = struct.Struct(">h")
_MID = struct.Struct(">iqi")
_PAIR = re.compile("([^\x01\x02]+)\x01([^\x01\x02]+)\x02")
_host_cache: dict[bytes, tuple[str, str]] = {}  # raw host bytes -> (escaped "ip:port", hex of the bytes)


def _host(raw: bytes) -> tuple[str, str]:
    h = _host_cache.get(raw)
    if h is None:
        if len(_host_cache) > 4096:
            _host_cache.clear()
        h = _host_cache[raw] = (_esc(str(unpack_host(raw))), raw.hex().upper())
    return h


def slow_line(raw: bytes) -> str:
    return json_line(decode_record(raw, check_crc=False).to_json())


def general_line(raw: bytes) -> str:
    """`record_json_line` for any uncompressed record (V2 magic, IPv6 hosts included)."""
    (total, magic, crc, queue_id, flag, queue_offset, phys, sys_flag, born_ts) = _HEAD.unpack_from(raw, 0)
    if sys_flag & COMPRESSED_FLAG:
        return slow_line(raw)
    p = 48
    hl = 20 if sys_flag & BORNHOST_V6_FLAG else 8
    born = _host(raw[p:p + hl])[0]
    p += hl
    store_ts = _Q.unpack_from(raw, p)[0]
    p += 8
    sl = 20 if sys_flag & STOREHOSTADDRESS_V6_FLAG else 8
    store_s, store_hex = _host(raw[p:p + sl])
    p += sl
    reconsume, _prepared, body_len = _MID.unpack_from(raw, p)
    p += 16
    body = raw[p:p + body_len]
    p += body_len
    if magic == MESSAGE_MAGIC_CODE_V2:
        tl = _H.unpack_from(raw, p)[0]
        p += 2
    else:
        tl = raw[p]
        p += 1
    topic = raw[p:p + tl].decode("utf-8", "replace")
    p += tl
    pl = _H.unpack_from(raw, p)[0]
    p += 2
    props_text = raw[p:p + pl].decode("utf-8", "replace")
    # MessageDecoder.string2messageProperties for well-formed strings (what brokers write): every
    # entry `key \x01 value \x02` with both non-empty, no key twice; anything else takes the slow path
    pairs = _PAIR.findall(props_text)
    n = len(pairs)
    # every separator inside a pair and the text ending with \x02 <=> the text is exactly the pairs
    if (props_text.count("\x02") != n or props_text.count("\x01") != n or "\\" in props_text
            or (n and props_text[-1] != "\x02")):
        return slow_line(raw)
    found = dict(pairs)
    if len(found) != len(pairs):
        return slow_line(raw)
    tags = found.get("TAGS")
    keys = found.get("KEYS")
    uniq = found.get("UNIQ_KEY")
    props = _esc(props_text[:-1]).replace("\\u0001", '":"').replace("\\u0002", '","') if props_text else ""
    offset_id = f'"{store_hex}{phys:016X}"' if phys >= 0 else _esc(f"{store_hex}{phys & 0xFFFFFFFFFFFFFFFF:016X}")
    try:
        body_part = f'"body":{_esc(body.decode("utf-8"))}'
    except UnicodeDecodeError:
        import base64

        body_part = f'"bodyBase64":"{base64.b64encode(body).decode("ascii")}"'
    return (
        f'{{"topic":{_esc(topic)},"queueId":{queue_id},"queueOffset":{queue_offset},"commitLogOffset":{phys},'
        f'"msgId":{_esc(uniq) if uniq else offset_id},"offsetMsgId":{offset_id},'
        f'"tags":{_esc(tags) if tags else "null"},"keys":{_esc(keys) if keys else "null"},'
        f'"bornTimestamp":{born_ts},"bornHost":{born},"storeTimestamp":{store_ts},"storeHost":{store_s},'
        f'"reconsumeTimes":{reconsume},"sysFlag":{sys_flag},"flag":{flag},"bodyCRC":{crc},"totalSize":{total},'
        f'"properties":{{{props}}},{body_part}}}'
    )


_MAGIC_V1 = -626843481
_V1_TAIL = struct.Struct(">q8siqi")  # storeTimestamp, IPv4 storeHost, reconsumeTimes, prepared offset, bodyLength
_FMT = ('{"topic":%s,"queueId":%d,"queueOffset":%d,"commitLogOffset":%d,"msgId":%s,"offsetMsgId":%s,'
        '"tags":%s,"keys":%s,"bornTimestamp":%d,"bornHost":%s,"storeTimestamp":%d,"storeHost":%s,'
        '"reconsumeTimes":%d,"sysFlag":%d,"flag":%d,"bodyCRC":%d,"totalSize":%d,"properties":{%s},%s}')
_topic_cache: dict[bytes, str] = {}


def record_json_line(raw: bytes) -> str:
    """The JSON line of one record (`raw` = exactly its bytes, as GetMessageResult.raw holds).

    The common record (V1 magic, IPv4 hosts, uncompressed) is laid out at fixed positions up to
    the body and formatted with one `%` operation; everything else goes to `general_line`.
    """
    total, magic, crc, queue_id, flag, queue_offset, phys, sys_flag, born_ts = _HEAD.unpack_from(raw, 0)
    if sys_flag & (COMPRESSED_FLAG | BORNHOST_V6_FLAG | STOREHOSTADDRESS_V6_FLAG) or magic != _MAGIC_V1:
        return general_line(raw)
    born = _host(raw[48:56])[0]
    store_ts, store_raw, reconsume, _prepared, body_len = _V1_TAIL.unpack_from(raw, 56)
    store_s, store_hex = _host(store_raw)
    p = 88 + body_len
    body = raw[88:p]
    tl = raw[p]
    topic_raw = raw[p + 1:p + 1 + tl]
    topic = _topic_cache.get(topic_raw)
    if topic is None:
        if len(_topic_cache) > 4096:
            _topic_cache.clear()
        topic = _topic_cache[topic_raw] = _esc(topic_raw.decode("utf-8", "replace"))
    p += 1 + tl
    props_text = raw[p + 2:p + 2 + ((raw[p] << 8) | raw[p + 1])].decode("utf-8", "replace")
    pairs = _PAIR.findall(props_text)
    n = len(pairs)
    if (props_text.count("\x02") != n or props_text.count("\x01") != n or "\\" in props_text
            or (n and props_text[-1] != "\x02")):
        return slow_line(raw)
    found = dict(pairs)
    if len(found) != n:
        return slow_line(raw)
    tags = found.get("TAGS")
    keys = found.get("KEYS")
    uniq = found.get("UNIQ_KEY")
    if phys < 0:  # not a stored record's offset; keep the exact two's-complement rendering simple
        return general_line(raw)
    offset_id = f'"{store_hex}{phys:016X}"'
    try:
        body_part = '"body":' + _esc(body.decode("utf-8"))
    except UnicodeDecodeError:
        import base64

        body_part = f'"bodyBase64":"{base64.b64encode(body).decode("ascii")}"'
    return _FMT % (topic, queue_id, queue_offset, phys, _esc(uniq) if uniq else offset_id, offset_id,
                   _esc(tags) if tags else "null", _esc(keys) if keys else "null", born_ts, born, store_ts,
                   store_s, reconsume, sys_flag, flag, crc, total,
                   _esc(props_text[:-1]).replace("\\u0001", '":"').replace("\\u0002", '","') if n else "",
                   body_part)
