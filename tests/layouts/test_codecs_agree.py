"""The hot-path struct codecs and the construct declarations agree on every value."""

from __future__ import annotations

import ipaddress
import os

from hypothesis import given, settings
from hypothesis import strategies as st

from rmqtool.layouts.checkpoint import STORE_CHECKPOINT, TIMER_CHECKPOINT, StoreCheckpoint, TimerCheckpoint
from rmqtool.layouts.commitlog import CommitLogRecord, record_size
from rmqtool.layouts.consumequeue import CQ_UNIT, CqUnit
from rmqtool.layouts.index import INDEX_ENTRY, INDEX_HEADER, IndexEntry, IndexHeader
from rmqtool.layouts.javahash import _common_length, java_string_hash, java_string_hashes
from rmqtool.layouts.message import MessageExt, decode_record, encode_record
from rmqtool.layouts.net import Host
from rmqtool.layouts.properties import decode_properties, encode_properties
from rmqtool.layouts.timer import TIMER_SLOT, TIMERLOG_UNIT, TimerLogUnit, TimerSlot

i32 = st.integers(-(2**31), 2**31 - 1)
i64 = st.integers(-(2**63), 2**63 - 1)
ipv4 = st.integers(0, 2**32 - 1).map(lambda v: str(ipaddress.IPv4Address(v)))
ipv6 = st.integers(0, 2**128 - 1).map(lambda v: str(ipaddress.IPv6Address(v)))
hosts = st.builds(Host, st.one_of(ipv4, ipv6), st.integers(0, 65535))
prop_text = st.text(alphabet=st.characters(blacklist_characters="\x01\x02", blacklist_categories=("Cs",)),
                    min_size=1, max_size=20)


@given(st.lists(i64, min_size=1, max_size=1).flatmap(lambda _: st.tuples(i64, i32, i64)))
def test_cq_unit(v):
    assert CQ_UNIT.pack(*v) == CqUnit.build(dict(zip(("commitLogOffset", "size", "tagsCode"), v, strict=False)))


@given(st.tuples(i32, i64, i32, i64, i32, i64, i32, i32, i64))
def test_timerlog_unit(v):
    names = [sc.name for sc in TimerLogUnit.subcons]
    assert TIMERLOG_UNIT.pack(*v) == TimerLogUnit.build(dict(zip(names, v, strict=False)))


@given(st.tuples(i64, i64, i64, i32, i32))
def test_slot(v):
    assert TIMER_SLOT.pack(*v) == TimerSlot.build(dict(zip([s.name for s in TimerSlot.subcons], v, strict=False)))


@given(st.tuples(i64, i64, i64, i64, i32, i32), st.tuples(i32, i64, i32, i32))
def test_index(h, e):
    assert INDEX_HEADER.pack(*h) == IndexHeader.build(dict(zip([s.name for s in IndexHeader.subcons], h, strict=False)))
    assert INDEX_ENTRY.pack(*e) == IndexEntry.build(dict(zip([s.name for s in IndexEntry.subcons], e, strict=False)))


@given(st.tuples(*[i64] * 5), st.tuples(*[i64] * 7))
def test_checkpoints(a, b):
    assert STORE_CHECKPOINT.pack(*a) == StoreCheckpoint.build(dict(zip([s.name for s in StoreCheckpoint.subcons], a, strict=False)))
    assert TIMER_CHECKPOINT.pack(*b) == TimerCheckpoint.build(dict(zip([s.name for s in TimerCheckpoint.subcons], b, strict=False)))


@settings(max_examples=200)
@given(
    topic=st.text(min_size=1, max_size=200).filter(lambda t: len(t.encode()) <= 255 and "\x00" not in t),
    body=st.binary(max_size=300),
    props=st.dictionaries(prop_text, prop_text, max_size=6),
    born=hosts, store=hosts, ints=st.tuples(i32, i32, i64, i64, i32, i64, i64, i32, i64),
)
def test_record_codec_matches_construct(topic, body, props, born, store, ints):
    qid, flag, qoff, phys, sysflag, born_ts, store_ts, recons, prep = ints
    m = MessageExt(topic=topic, body=body, queue_id=qid, flag=flag, properties=props, sys_flag=sysflag & ~0x30,
                   born_timestamp=born_ts, born_host=born, store_timestamp=store_ts, store_host=store,
                   reconsume_times=recons, prepared_transaction_offset=prep, queue_offset=qoff,
                   commit_log_offset=phys)
    raw = encode_record(m)
    parsed = CommitLogRecord.parse(raw)
    assert CommitLogRecord.build(parsed) == raw
    assert parsed.totalSize == len(raw) == record_size(len(body), len(topic.encode()), parsed.propertiesLength,
                                                       born.is_v6, store.is_v6, len(topic.encode()) > 127)
    assert parsed.topic.decode() == topic and parsed.body == body
    back = decode_record(raw)
    assert (back.topic, back.body, back.born_host, back.store_host) == (topic, body, born, store)
    assert back.properties == decode_properties(encode_properties(props))


@given(st.text(max_size=30))
def test_java_hash_is_int32(s):
    h = java_string_hash(s)
    assert -(2**31) <= h < 2**31


@settings(max_examples=200)
@given(topic=st.binary(min_size=1, max_size=127), body=st.binary(max_size=300), props=st.binary(max_size=60),
       ints=st.tuples(i32, i32, i32, i32, i64, i64, i32, i64, i64, i32, i64),
       hosts=st.tuples(st.binary(min_size=4, max_size=4), i32, st.binary(min_size=4, max_size=4), i32))
def test_scan_struct_matches_construct(topic, body, props, ints, hosts):
    """`V4_SCAN` and `_topic_codec` (the verify hot loop) read the fields CommitLogRecord declares."""
    from rmqtool.inspect.commitlog import V4_SCAN, V4_SCAN_FIELDS, _topic_codec
    from rmqtool.layouts.constants import MESSAGE_MAGIC_CODE_V2

    crc, qid, flag, magic, qoff, phys, sysflag, born_ts, store_ts, recons, prep = ints
    raw = CommitLogRecord.build(dict(
        totalSize=record_size(len(body), len(topic), len(props)), magicCode=magic if magic != MESSAGE_MAGIC_CODE_V2 else 0,
        bodyCRC=crc, queueId=qid, flag=flag, queueOffset=qoff, physicalOffset=phys, sysFlag=sysflag & ~0x30,
        bornTimestamp=born_ts, bornHost=dict(ip=hosts[0], port=hosts[1]), storeTimestamp=store_ts,
        storeHost=dict(ip=hosts[2], port=hosts[3]), reconsumeTimes=recons, preparedTransactionOffset=prep,
        body=body, topic=topic, properties=props))
    parsed = CommitLogRecord.parse(raw)
    assert V4_SCAN.size == 88
    assert dict(zip(V4_SCAN_FIELDS, V4_SCAN.unpack_from(raw), strict=True)) == {k: parsed[k] for k in V4_SCAN_FIELDS}
    assert _topic_codec(parsed.topicLength)(raw, 89 + len(body)) == (parsed.topic, parsed.propertiesLength)


@settings(max_examples=100)
@given(body=st.binary(max_size=50), ints=st.tuples(i32, i32, i32, i32, i64, i64, i32, i64, i64, i32, i64),
       hosts=st.tuples(st.binary(min_size=4, max_size=4), i32, st.binary(min_size=4, max_size=4), i32))
def test_json_head_struct_matches_construct(body, ints, hosts):
    """`fastjson_record.V4_HEAD` (the inspect --json hot path) reads the fields CommitLogRecord declares."""
    from rmqtool.inspect.fastjson_record import V4_FIELDS, V4_HEAD

    crc, qid, flag, magic, qoff, phys, sysflag, born_ts, store_ts, recons, prep = ints
    raw = CommitLogRecord.build(dict(
        totalSize=record_size(len(body), 1, 0), magicCode=magic, bodyCRC=crc, queueId=qid, flag=flag,
        queueOffset=qoff, physicalOffset=phys, sysFlag=sysflag & ~0x30, bornTimestamp=born_ts,
        bornHost=dict(ip=hosts[0], port=hosts[1]), storeTimestamp=store_ts, storeHost=dict(ip=hosts[2], port=hosts[3]),
        reconsumeTimes=recons, preparedTransactionOffset=prep, body=body, topic=b"T", properties=b""))
    parsed = CommitLogRecord.parse(raw)
    expect = {k: parsed[k] for k in V4_FIELDS}
    for h in ("bornHost", "storeHost"):
        expect[h] = parsed[h].ip + parsed[h].port.to_bytes(4, "big", signed=True)
    assert V4_HEAD.size == 88
    assert dict(zip(V4_FIELDS, V4_HEAD.unpack_from(raw), strict=True)) == expect


@settings(max_examples=200)
@given(texts=st.lists(st.one_of(st.text(max_size=40), st.text(alphabet="0123456789ABCDEF", min_size=32, max_size=32),
                                st.text(alphabet="k0123456789 ", max_size=8)), max_size=40),
       prefix=st.one_of(st.just(""), st.text(max_size=12).map(lambda t: t + "#")))
def test_batch_java_hashes_match_hash_code(texts, prefix):
    """The column-wise batch hash is `String.hashCode()` of prefix + text, for any mix of texts."""
    assert java_string_hashes(texts, prefix) == [java_string_hash(prefix + t) & 0xFFFFFFFF for t in texts]
    assert java_string_hashes(texts, prefix, signed=True) == [java_string_hash(prefix + t) for t in texts]


@settings(max_examples=100)
@given(head=st.text(alphabet="0123456789ABCDEF", max_size=32), tails=st.lists(
    st.text(alphabet="0123456789ABCDEF", min_size=4, max_size=4), min_size=8, max_size=40),
    prefix=st.sampled_from(["", "T#", "TopicTest#"]))
def test_batch_java_hashes_of_keys_sharing_a_head(head, tails, prefix):
    """Texts of one length with a shared head (one producer's UNIQ_KEYs) skip the head's columns
    and still hash as `String.hashCode()`, the head's length anywhere from 0 to all of the text."""
    texts = [head + t for t in tails]
    assert java_string_hashes(texts, prefix) == [java_string_hash(prefix + t) & 0xFFFFFFFF for t in texts]
    assert java_string_hashes(texts, prefix, signed=True) == [java_string_hash(prefix + t) for t in texts]


@given(st.integers(0, 40).flatmap(lambda n: st.tuples(*[st.text(alphabet=st.characters(max_codepoint=127),
                                                                   min_size=n, max_size=n)] * 2)),
       st.text(alphabet="\x00\x01AB\x7f", max_size=8))
def test_common_length_is_the_shared_prefix(pair, head):
    """`_common_length` (an XOR of two ASCII texts of one length as integers) against
    `os.path.commonprefix`, for any such texts, sharing a head or not."""
    a, b = pair
    for low, high in ((a, b), (head + a, head + b), (head + a, head + a[::-1]), (head + a, head + a)):
        assert _common_length(low, high) == len(os.path.commonprefix([low, high]))


@given(st.dictionaries(prop_text, st.one_of(prop_text, st.none()), max_size=6))
def test_properties_fast_join_matches_per_entry_format(props):
    expected = "".join(f"{k}\x01{v}\x02" for k, v in props.items() if v is not None)
    assert encode_properties(props) == expected


def _decode_properties_one_by_one(text: str) -> dict[str, str]:
    """`string2messageProperties` segment by segment (the reference for the dict() fast path)."""
    out: dict[str, str] = {}
    for seg in text.split("\x02") if text else ():
        i = seg.find("\x01")
        if len(seg) >= 3 and 0 < i < len(seg) - 1:
            out[seg[:i]] = seg[i + 1 :]
    return out


@settings(max_examples=500)
@given(st.text(alphabet="ab\x01\x02", max_size=24))
def test_decode_properties_drops_and_repeats_as_java(text):
    got = decode_properties(text)
    want = _decode_properties_one_by_one(text)
    assert got == want and list(got) == list(want)


@given(hosts, i64)
def test_offset_msg_id_hex(host, offset):
    from rmqtool.layouts.msgid import create_offset_msg_id
    from rmqtool.layouts.net import pack_host

    assert create_offset_msg_id(host, offset) == (pack_host(host) + offset.to_bytes(8, "big", signed=True)).hex().upper()


@given(hosts, st.lists(i64, max_size=40))
def test_offset_msg_ids_are_each_records_id(host, offsets):
    """A batch's answer: each record's `createMessageId`, comma-joined, IPv4 and IPv6 alike."""
    from rmqtool.layouts.msgid import create_offset_msg_id, create_offset_msg_ids

    assert create_offset_msg_ids(host, offsets) == ",".join(create_offset_msg_id(host, o) for o in offsets)
