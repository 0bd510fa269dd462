"""Every reference vector parses to the values of vectors.txt and builds back to the same bytes."""

from __future__ import annotations

from pathlib import Path

import pytest

from rmqtool.layouts.checkpoint import StoreCheckpoint, TimerCheckpoint
from rmqtool.layouts.commitlog import CommitLogBlank, CommitLogRecord
from rmqtool.layouts.consumequeue import CqUnit
from rmqtool.layouts.index import IndexEntry, IndexHeader
from rmqtool.layouts.javahash import java_string_hash
from rmqtool.layouts.message import decode_record, encode_record
from rmqtool.layouts.msgid import decode_offset_msg_id, decode_uniq_key
from rmqtool.layouts.net import Host
from rmqtool.layouts.properties import broker_order, decode_properties
from rmqtool.layouts.timer import TimerLogUnit, TimerSlot

VEC = Path(__file__).resolve().parents[2] / "fixtures" / "vectors"


def vec(name: str) -> bytes:
    return (VEC / name).read_bytes()


def roundtrip(layout, name: str):
    raw = vec(name)
    parsed = layout.parse(raw)
    assert layout.build(parsed) == raw
    return parsed


def test_java_hashes():
    assert java_string_hash("TagA") == 2598919
    assert java_string_hash("TopicTest") == -1902610879
    assert java_string_hash("TopicTest#C0A8016430391B6D358647B760000000") == -331733639


def test_vector1_commitlog_record_v1():
    r = roundtrip(CommitLogRecord, "v1_commitlog_record_TopicTest.bin")
    assert (r.totalSize, r.magicCode, r.bodyCRC, r.queueId) == (198, -626843481, 2010220930, 0)
    assert (r.bornTimestamp, r.storeTimestamp) == (1700000000000, 1700000000123)
    assert r.bornHost.ip == bytes([192, 168, 1, 100]) and r.bornHost.port == 54321
    assert r.storeHost.ip == bytes([192, 168, 1, 10]) and r.storeHost.port == 10911
    assert (r.body, r.topic) == (b"Hello", b"TopicTest")
    props = decode_properties(r.properties.decode())
    assert list(props) == ["UNIQ_KEY", "CLUSTER", "TAGS", "KEYS", "WAIT"]
    assert props["UNIQ_KEY"] == "C0A8016430391B6D358647B760000000"
    # the broker's HashMap(128) order, from the client's HashMap(16) order plus CLUSTER
    client = {"KEYS": "k1", "UNIQ_KEY": props["UNIQ_KEY"], "WAIT": "true", "TAGS": "TagA"}
    assert list(broker_order({**client, "CLUSTER": "DefaultCluster"})) == list(props)


def test_vector1_fast_codec_agrees():
    raw = vec("v1_commitlog_record_TopicTest.bin")
    m = decode_record(raw)
    assert m.offset_msg_id == "C0A8010A00002A9F0000000000000000"
    assert m.store_host == Host("192.168.1.10", 10911)
    assert encode_record(m) == raw
    assert decode_offset_msg_id(m.offset_msg_id).commit_log_offset == 0
    uk = decode_uniq_key(m.uniq_key)
    assert (uk.ip, uk.pid, uk.month_diff_ms, uk.counter) == ("192.168.1.100", 12345, 1203200000, 0)
    assert uk.timestamp_ms(1700000000123) == 1700000000000


def test_vector2_cq_unit():
    u = roundtrip(CqUnit, "cq_unit_TopicTest_0.bin")
    assert (u.commitLogOffset, u.size, u.tagsCode) == (0, 198, 2598919)


def test_vector3_schedule_cq_unit():
    raw = bytes.fromhex("00000000000000c6000001800000018bcfe58f8b")
    u = CqUnit.parse(raw)
    assert (u.commitLogOffset, u.size, u.tagsCode) == (198, 384, 1700000010123)
    assert CqUnit.build(u) == raw


def test_vector4_timer_record_unit_and_slot():
    raw = vec("v1_commitlog_record_timer.bin")
    m = decode_record(raw)
    assert (m.topic, m.commit_log_offset, m.total_size) == ("rmq_sys_wheel_timer", 198, 298)
    assert m.properties["TIMER_OUT_MS"] == "1700000009000"
    assert m.properties["REAL_TOPIC"] == "TopicTest" and m.properties["REAL_QID"] == "0"
    assert encode_record(m) == raw
    u = roundtrip(TimerLogUnit, "timerlog_unit.bin")
    assert (u.size, u.prevPos, u.magic, u.currWriteTime, u.delayTime) == (52, -1, 1, 1700000000000, 9000)
    assert (u.offsetPy, u.sizePy, u.hashCodeOfRealTopic, u.reserved) == (198, 298, -1902610879, 0)
    s = roundtrip(TimerSlot, "timerwheel_slot.bin")
    assert (s.timeSecs, s.firstPos, s.lastPos, s.num, s.magic) == (1700000009, 0, 0, 1, 0)
    assert (1700000009000 // 1000) % 1209600 == 512009


def test_vector5_blank():
    b = roundtrip(CommitLogBlank, "commitlog_eof_blank.bin")
    assert b.maxBlank == 824


def test_vector6_index_header():
    h = roundtrip(IndexHeader, "index_header_after_2_keys.bin")
    assert (h.beginTimestamp, h.endTimestamp, h.hashSlotCount, h.indexCount) == (
        1700000000123, 1700000000123, 2, 3)
    e = IndexEntry.parse(bytes.fromhex("13c5da870000000000000000000000000000000000"[:40]))
    assert e.keyHash == 331733639 and e.prevIndex == 0


def test_vector7_v2_ipv6():
    raw = vec("v2_commitlog_record_ipv6born.bin")
    r = roundtrip(CommitLogRecord, "v2_commitlog_record_ipv6born.bin")
    assert r.magicCode == -626843477 and r.topicLength == 132 and r.sysFlag == 0x10
    m = decode_record(raw)
    assert m.topic.startswith("%RETRY%") and m.born_host.is_v6 and m.commit_log_offset == 4096
    assert encode_record(m) == raw


@pytest.mark.parametrize("name,layout", [("checkpoint_first40.bin", StoreCheckpoint),
                                         ("timercheck_first56.bin", TimerCheckpoint)])
def test_vector8_checkpoints(name, layout):
    c = roundtrip(layout, name)
    if layout is StoreCheckpoint:
        assert c.physicMsgTimestamp == c.logicsMsgTimestamp == 1700000000123
    else:
        assert (c.lastReadTimeMs, c.lastTimerLogFlushPos, c.lastTimerQueueOffset) == (1700000000000, 52, 1)
        assert (c.masterTimerQueueOffset, c.timestamp, c.counter) == (1, 1700000000000, 1)
