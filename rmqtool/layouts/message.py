"""A message as stored in the CommitLog (`MessageExt`), with the hot-path record codec.

`encode_record` / `decode_record` are precompiled `struct` twins of
`rmqtool.layouts.commitlog.CommitLogRecord`; tests/layouts prove them equal on arbitrary values.
`check_record` reproduces `CommitLog.checkMessageAndReturnSize`, which recovery, dispatch and
verify all use, so every reader agrees on what a good record is.
"""

from __future__ import annotations

import struct
import zlib
from dataclasses import dataclass, field
from typing import Any

from rmqtool.layouts import properties as P
from rmqtool.layouts.constants import (
    BLANK_MAGIC_CODE,
    BORNHOST_V6_FLAG,
    COMPRESSED_FLAG,
    COMPRESSION_TYPE_COMPARATOR,
    MESSAGE_MAGIC_CODE,
    MESSAGE_MAGIC_CODE_V2,
    STOREHOSTADDRESS_V6_FLAG,
    TRANSACTION_TYPE_MASK,
)
from rmqtool.layouts.crc import crc32
from rmqtool.layouts.msgid import create_offset_msg_id
from rmqtool.layouts.net import Host, pack_host, unpack_host

_HEAD = struct.Struct(">iiiiiqqiq")  # totalSize .. bornTimestamp (48 bytes)
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_I16 = struct.Struct(">h")
_I8 = struct.Struct(">b")
_MID = struct.Struct(">iqi")  # reconsumeTimes, preparedTransactionOffset, bodyLength
_crc32 = crc32

QUEUE_OFFSET_POSITION = 20
PHY_POS_POSITION = 28
SYSFLAG_POSITION = 36
BORN_TIMESTAMP_POSITION = 40


def body_crc(body: bytes) -> int:
    """`UtilAll.crc32(body)`: zlib CRC-32 masked to 31 bits."""
    return crc32(body) & 0x7FFFFFFF


@dataclass(slots=True)
class MessageExt:
    """One CommitLog record, decoded. Field names are RocketMQ's, in Python form."""

    topic: str
    body: bytes = b""
    queue_id: int = 0
    flag: int = 0
    properties: dict[str, str] = field(default_factory=dict)
    sys_flag: int = 0
    born_timestamp: int = 0
    born_host: Host = Host("127.0.0.1", 0)
    store_timestamp: int = 0
    store_host: Host = Host("127.0.0.1", 10911)
    reconsume_times: int = 0
    prepared_transaction_offset: int = 0
    queue_offset: int = 0
    commit_log_offset: int = 0
    body_crc: int = 0
    total_size: int = 0
    magic_code: int = MESSAGE_MAGIC_CODE

    @property
    def tags(self) -> str | None:
        return self.properties.get(P.TAGS)

    @property
    def keys(self) -> str | None:
        return self.properties.get(P.KEYS)

    @property
    def uniq_key(self) -> str | None:
        return self.properties.get(P.UNIQ_KEY)

    @property
    def msg_id(self) -> str:
        """What clients call msgId: UNIQ_KEY when present, else the offset msgId."""
        return self.uniq_key or self.offset_msg_id

    @property
    def offset_msg_id(self) -> str:
        return create_offset_msg_id(self.store_host, self.commit_log_offset)

    @property
    def transaction_type(self) -> int:
        return self.sys_flag & TRANSACTION_TYPE_MASK

    def decompressed_body(self) -> bytes:
        """The body as the producer gave it (bodies are stored compressed when sysFlag says so)."""
        return decompress_body(self.body, self.sys_flag)

    def to_json(self, *, body: bool = True) -> dict[str, Any]:
        """RocketMQ's Java field names (cli.md): what `consume` and `inspect` print."""
        out: dict[str, Any] = {
            "topic": self.topic,
            "queueId": self.queue_id,
            "queueOffset": self.queue_offset,
            "commitLogOffset": self.commit_log_offset,
            "msgId": self.msg_id,
            "offsetMsgId": self.offset_msg_id,
            "tags": self.tags,
            "keys": self.keys,
            "bornTimestamp": self.born_timestamp,
            "bornHost": str(self.born_host),
            "storeTimestamp": self.store_timestamp,
            "storeHost": str(self.store_host),
            "reconsumeTimes": self.reconsume_times,
            "sysFlag": self.sys_flag,
            "flag": self.flag,
            "bodyCRC": self.body_crc,
            "totalSize": self.total_size,
            "properties": dict(self.properties),
        }
        if body:
            out.update(body_fields(self.decompressed_body()))
        return out


def body_fields(body: bytes) -> dict[str, str]:
    """`body` when it is UTF-8 text, else `bodyBase64` (cli.md)."""
    try:
        return {"body": body.decode("utf-8")}
    except UnicodeDecodeError:
        import base64

        return {"bodyBase64": base64.b64encode(body).decode("ascii")}


def decompress_body(body: bytes, sys_flag: int) -> bytes:
    if not sys_flag & COMPRESSED_FLAG:
        return body
    kind = (sys_flag & COMPRESSION_TYPE_COMPARATOR) >> 8
    if kind == 1:
        import lz4.frame

        return lz4.frame.decompress(body)
    if kind == 2:
        import zstandard

        return zstandard.ZstdDecompressor().decompressobj().decompress(body)
    return zlib.decompress(body)


def compress_body(body: bytes, kind: str = "zlib", level: int = 5) -> tuple[bytes, int]:
    """Compress as the Java client does; returns (bytes, sysFlag bits to OR in)."""
    if kind == "lz4":
        import lz4.frame

        return lz4.frame.compress(body), COMPRESSED_FLAG | 0x100
    if kind == "zstd":
        import zstandard

        return zstandard.ZstdCompressor(level=level).compress(body), COMPRESSED_FLAG | 0x200
    return zlib.compress(body, level), COMPRESSED_FLAG | 0x300


# The fixed part of a record, totalSize .. bodyLength, for each (bornHost v6, storeHost v6):
# one `pack` call instead of five.
_FIXED = {
    (born_v6, store_v6): struct.Struct(f">iiiiiqqiq{20 if born_v6 else 8}sq{20 if store_v6 else 8}siqi")
    for born_v6 in (False, True) for store_v6 in (False, True)
}
_TOPIC_FIELDS: dict[str, tuple[bytes, int]] = {}


def topic_field(topic: str) -> tuple[bytes, int]:
    """(topicLength + UTF-8 topic bytes as stored, UTF-8 length); cached, topics repeat.

    The length is 1 byte up to 127 bytes and 2 bytes (V2 magic) beyond; a topic longer than
    32767 bytes cannot be stored: its field is empty (`encode_record_parts` refuses it).
    """
    hit = _TOPIC_FIELDS.get(topic)
    if hit is None:
        raw = topic.encode("utf-8")
        if len(raw) > 32767:
            return b"", len(raw)
        hit = ((_I16 if len(raw) > 127 else _I8).pack(len(raw)) + raw, len(raw))
        if len(_TOPIC_FIELDS) < 4096:
            _TOPIC_FIELDS[topic] = hit
    return hit


def encode_record_parts(msg: MessageExt, properties_text: str | None = None) -> list[bytes | bytearray]:
    """The record `encode_record` makes, as 4 pieces: fixed fields, body, topic, properties.

    The appender joins the pieces of a whole batch at once (one copy of every body instead of
    two). The fixed piece is a bytearray holding QUEUEOFFSET (byte 20), PHYSICALOFFSET (28) and STORETIMESTAMP
    (56, or 68 with an IPv6 born host) as they are in `msg`, to be patched under the put lock.
    """
    topic_b, topic_len = topic_field(msg.topic)
    if not topic_b:
        raise struct.error(f"topic of {topic_len} bytes does not fit a record's topic length field")
    props_b = (P.encode_properties(msg.properties) if properties_text is None else properties_text).encode(
        "utf-8"
    )
    born_b = pack_host(msg.born_host)
    store_b = pack_host(msg.store_host)
    born_v6, store_v6 = len(born_b) == 20, len(store_b) == 20
    sys_flag = msg.sys_flag & ~(BORNHOST_V6_FLAG | STOREHOSTADDRESS_V6_FLAG)
    if born_v6:
        sys_flag |= BORNHOST_V6_FLAG
    if store_v6:
        sys_flag |= STOREHOSTADDRESS_V6_FLAG
    magic = MESSAGE_MAGIC_CODE_V2 if topic_len > 127 else MESSAGE_MAGIC_CODE
    body = msg.body
    body_len = len(body)
    total = 74 + (20 if born_v6 else 8) + (20 if store_v6 else 8) + body_len + len(topic_b) + len(props_b)
    crc = _crc32(body) & 0x7FFFFFFF
    msg.sys_flag, msg.magic_code, msg.total_size, msg.body_crc = sys_flag, magic, total, crc
    fixed = _FIXED[born_v6, store_v6]
    head = bytearray(fixed.size)
    fixed.pack_into(head, 0, total, magic, crc, msg.queue_id, msg.flag, msg.queue_offset, msg.commit_log_offset,
                    sys_flag, msg.born_timestamp, born_b, msg.store_timestamp, store_b,
                    msg.reconsume_times, msg.prepared_transaction_offset, body_len)
    return [
        head,
        body,
        topic_b,
        _I16.pack(len(props_b)) + props_b,
    ]


def encode_records_parts(msgs: list[MessageExt]) -> list[bytes | bytearray]:
    """`encode_record_parts` of each message, concatenated: 4 pieces per record.

    The same pieces and the same fields set on each message, with the per-batch work done
    once: the topic field and packed hosts looked up in small dicts (a batch has one topic and
    one born host), the usual properties map joined in C, one Struct per host family pair.
    Anything unusual (None values, non-str entries, an unstorable topic) takes
    `encode_record_parts`.
    """
    out: list[bytes | bytearray] = []
    add = out.extend
    topics: dict[str, tuple[bytes, int]] = {}
    hosts: dict[Host, bytes] = {}
    crc, i16, fixed_of = _crc32, _I16.pack, _FIXED
    pjoin, nvjoin, psep = P.PROPERTY_SEPARATOR.join, P.NAME_VALUE_SEPARATOR.join, P.PROPERTY_SEPARATOR
    v6_clear = ~(BORNHOST_V6_FLAG | STOREHOSTADDRESS_V6_FLAG)
    last_topic: str | None = None
    last_born: Host | None = None
    last_store: Host | None = None
    topic_b = born_b = store_b = b""
    topic_len = 0
    magic = MESSAGE_MAGIC_CODE
    # what follows from the pair of packed hosts, worked out again only when the pair changes
    pair: tuple[bytes, bytes] | None = None
    v6_bits = head_size = 0
    pack_into = fixed_of[False, False].pack_into
    for msg in msgs:
        topic = msg.topic
        if topic is not last_topic:  # consecutive messages share their objects: no hashing then
            hit = topics.get(topic)
            if hit is None:
                hit = topics[topic] = topic_field(topic)
            last_topic = topic
            topic_b, topic_len = hit
            magic = MESSAGE_MAGIC_CODE_V2 if topic_len > 127 else MESSAGE_MAGIC_CODE
        props = msg.properties
        try:
            props_b = (pjoin(map(nvjoin, props.items())) + psep).encode("utf-8") if props else b""
        except TypeError:  # a None, or a non-str key or value
            last_topic = None
            add(encode_record_parts(msg))
            continue
        if not topic_b:
            add(encode_record_parts(msg))
            continue
        born, store = msg.born_host, msg.store_host
        if born is not last_born:
            born_b = hosts.get(born)  # type: ignore[assignment]
            if born_b is None:
                born_b = hosts[born] = pack_host(born)
            last_born = born
        if store is not last_store:
            store_b = hosts.get(store)  # type: ignore[assignment]
            if store_b is None:
                store_b = hosts[store] = pack_host(store)
            last_store = store
        if pair is None or born_b is not pair[0] or store_b is not pair[1]:
            pair = (born_b, store_b)
            born_v6, store_v6 = len(born_b) == 20, len(store_b) == 20
            v6_bits = (BORNHOST_V6_FLAG if born_v6 else 0) | (STOREHOSTADDRESS_V6_FLAG if store_v6 else 0)
            fixed = fixed_of[born_v6, store_v6]
            head_size, pack_into = fixed.size, fixed.pack_into
        sys_flag = (msg.sys_flag & v6_clear) | v6_bits
        body = msg.body
        body_len = len(body)
        total = head_size + body_len + len(topic_b) + 2 + len(props_b)
        body_crc = crc(body) & 0x7FFFFFFF
        msg.sys_flag, msg.magic_code, msg.total_size, msg.body_crc = sys_flag, magic, total, body_crc
        head = bytearray(head_size)
        pack_into(head, 0, total, magic, body_crc, msg.queue_id, msg.flag, msg.queue_offset, msg.commit_log_offset,
                  sys_flag, msg.born_timestamp, born_b, msg.store_timestamp, store_b, msg.reconsume_times,
                  msg.prepared_transaction_offset, body_len)
        add((head, body, topic_b, i16(len(props_b)) + props_b))
    return out


def encode_record(msg: MessageExt, properties_text: str | None = None) -> bytes:
    """Encode a full record; sizes, CRC, magic and host flags are derived from the content.

    `msg.sys_flag`'s host bits are set from the hosts' address families, V2 magic is chosen for
    topics over 127 bytes (`autoMessageVersionOnTopicLen`), as the broker does.
    """
    return b"".join(encode_record_parts(msg, properties_text))


class RecordError(ValueError):
    """Why a record failed `checkMessageAndReturnSize`; `kind` is the verify problem kind."""

    def __init__(self, kind: str, detail: str) -> None:
        super().__init__(detail)
        self.kind = kind
        self.detail = detail


class Blank(Exception):
    """An end-of-file blank: the rest of this file holds no record."""

    def __init__(self, max_blank: int) -> None:
        super().__init__(max_blank)
        self.max_blank = max_blank


def decode_record(buf: bytes | memoryview, pos: int = 0, limit: int | None = None, *, check_crc: bool = True,
                  read_body: bool = True) -> MessageExt:
    """Decode the record at `pos`, checking it as `CommitLog.checkMessageAndReturnSize` does.

    Raises `Blank` at an end-of-file blank and `RecordError` for anything a broker's recovery
    would stop at (magic, truncation, CRC, size). `limit` bounds the readable bytes.
    """
    end = len(buf) if limit is None else limit
    if end - pos < 8:
        raise RecordError("truncated", f"only {end - pos} bytes left, a record needs more")
    total, magic = struct.unpack_from(">ii", buf, pos)
    if magic == BLANK_MAGIC_CODE:
        raise Blank(total)
    if magic not in (MESSAGE_MAGIC_CODE, MESSAGE_MAGIC_CODE_V2):
        raise RecordError("bad-magic", f"magic code {magic & 0xFFFFFFFF:#010x} is not a record's")
    if total < 91 or total > end - pos:
        raise RecordError("bad-size" if total < 91 else "truncated",
                          f"totalSize {total} does not fit in the {end - pos} bytes left")
    try:
        (_, _, crc, queue_id, flag, queue_offset, phys, sys_flag, born_ts) = _HEAD.unpack_from(buf, pos)
        p = pos + 48
        hl = 20 if sys_flag & BORNHOST_V6_FLAG else 8
        born = unpack_host(bytes(buf[p : p + hl]))
        p += hl
        (store_ts,) = _I64.unpack_from(buf, p)
        p += 8
        sl = 20 if sys_flag & STOREHOSTADDRESS_V6_FLAG else 8
        store = unpack_host(bytes(buf[p : p + sl]))
        p += sl
        reconsume, prepared, body_len = _MID.unpack_from(buf, p)
        p += 16
        if body_len < 0 or p + body_len > pos + total:
            raise RecordError("bad-size", f"bodyLength {body_len} runs past totalSize {total}")
        body = bytes(buf[p : p + body_len]) if read_body or check_crc else b""
        if check_crc and body_crc(body) != crc:
            raise RecordError("crc-mismatch", f"bodyCRC {crc} but the body's CRC is {body_crc(body)}")
        p += body_len
        if magic == MESSAGE_MAGIC_CODE_V2:
            (topic_len,) = _I16.unpack_from(buf, p)
            p += 2
        else:
            (topic_len,) = _I8.unpack_from(buf, p)
            p += 1
        if topic_len < 0 or p + topic_len > pos + total:
            raise RecordError("bad-size", f"topic length {topic_len} runs past totalSize {total}")
        topic = bytes(buf[p : p + topic_len]).decode("utf-8", "replace")
        p += topic_len
        (props_len,) = _I16.unpack_from(buf, p)
        p += 2
        if props_len < 0 or p + props_len > pos + total:
            raise RecordError("bad-size", f"properties length {props_len} runs past totalSize {total}")
        props = P.decode_properties(bytes(buf[p : p + props_len]).decode("utf-8", "replace"))
        p += props_len
    except struct.error as e:
        raise RecordError("truncated", f"record cut short: {e}") from None
    if p - pos != total:
        raise RecordError("size-mismatch", f"fields add up to {p - pos} bytes, totalSize says {total}")
    return MessageExt(
        topic=topic, body=body if read_body else b"", queue_id=queue_id, flag=flag, properties=props,
        sys_flag=sys_flag, born_timestamp=born_ts, born_host=born, store_timestamp=store_ts,
        store_host=store, reconsume_times=reconsume, prepared_transaction_offset=prepared,
        queue_offset=queue_offset, commit_log_offset=phys, body_crc=crc, total_size=total, magic_code=magic,
    )
