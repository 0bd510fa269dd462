"""The fast recovery paths agree with the reference ones: CQ prefix scan, raw dispatch, clean-open trust."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from rmqtool.layouts.constants import TRANSACTION_PREPARED_TYPE
from rmqtool.layouts.consumequeue import CQ_UNIT
from rmqtool.layouts.javahash import java_string_hash
from rmqtool.layouts.message import MessageExt, decode_record, encode_record
from rmqtool.layouts.net import Host
from rmqtool.store.commitlog import check_record_fast
from rmqtool.store.consumequeue import valid_unit_count
from rmqtool.store.dispatch import request_from_message, request_from_record
from rmqtool.store.messagestore import MessageStore
from tests.store.conftest import make_msg


def reference_valid_units(data: bytes) -> int:
    """The per-unit loop of `ConsumeQueue.recover`."""
    n = 0
    for off, size, _tags in CQ_UNIT.iter_unpack(data):
        if off < 0 or size <= 0:
            break
        n += 1
    return n


_offsets = st.one_of(st.sampled_from([0, 1, 255, 2**40, -1, -(2**63), 2**63 - 1]), st.integers(-(2**63), 2**63 - 1))
_sizes = st.one_of(st.sampled_from([0, 1, -1, 256, 65536, 2**24, 0x7FFFFFFF, -(2**31)]), st.integers(-(2**31), 2**31 - 1))


@settings(max_examples=400, deadline=None)
@given(st.lists(st.tuples(_offsets, _sizes, st.integers(-(2**63), 2**63 - 1)), min_size=1, max_size=40))
def test_valid_unit_count_matches_the_unit_loop(units):
    data = b"".join(CQ_UNIT.pack(*u) for u in units)
    assert valid_unit_count(data, len(units)) == reference_valid_units(data)


def _records():
    yield make_msg(1)
    yield make_msg(2, topic="T" * 200, KEYS="a b  c")  # V2 magic, several keys
    yield MessageExt(topic="SCHEDULE_TOPIC_XXXX", body=b"x", queue_id=2, properties={"DELAY": "3", "TAGS": "t"},
                     born_host=Host("::1", 1234), store_host=Host("fe80::2", 10911), store_timestamp=1_700_000_000_123)
    yield MessageExt(topic="Ünïcode", body=b"", properties={}, sys_flag=0x4, prepared_transaction_offset=77)


def test_request_from_record_equals_the_decoding_path():
    levels = [1000, 5000, 10000, 30000]
    for msg in _records():
        buf = bytearray(16) + bytearray(encode_record(msg)) + bytearray(8)
        mv = memoryview(bytes(buf))
        total, *_ = check_record_fast(mv, 16, len(buf), True)
        assert total == len(buf) - 24
        ref = request_from_message(decode_record(buf, 16), levels)
        ref.commit_log_offset = 5000
        assert request_from_record(mv, 16, 5000, levels) == ref


def test_check_record_fast_rejects_what_decode_record_rejects():
    rec = bytearray(encode_record(make_msg(7)))
    for i in range(0, len(rec), 3):
        bad = bytearray(rec)
        bad[i] ^= 0x41
        try:
            decode_record(bytes(bad), 0, len(bad), check_crc=True)
            ok = True
        except Exception:
            ok = False
        total = check_record_fast(memoryview(bytes(bad)), 0, len(bad), True)[0]
        assert (total > 0) == ok, i


def test_clean_open_trusts_the_cq_and_dispatches_only_what_lies_beyond(store_dir, cfg):
    with MessageStore.open(store_dir, cfg) as store:
        for i in range(50):
            store.put_message(make_msg(i, queue_id=i % 3))
        # a PREPARED half after the last CQ-referenced record, then a normal record
        half = make_msg(50, queue_id=0, TRAN_MSG="true")
        half.sys_flag = TRANSACTION_PREPARED_TYPE
        assert store.put_message(half).ok
    with MessageStore.open(store_dir, cfg) as store:
        assert sum(store.get_max_offset_in_queue("TopicTest", q) for q in range(3)) == 50
        r = store.put_message(make_msg(51, queue_id=1))
        assert r.ok and r.queue_offset == 17
        assert [m.body for m in store.query_message("TopicTest", "key51")] == [make_msg(51).body]
    with MessageStore.open(store_dir, cfg) as store:
        assert store.get_max_offset_in_queue("TopicTest", 1) == 18
        msgs = store.get_message("TopicTest", 1, 0, 100, max_bytes=1 << 30).messages
        assert msgs[-1].body == make_msg(51).body


def test_clean_open_with_a_lying_cq_falls_back_to_the_full_scan(store_dir, cfg):
    with MessageStore.open(store_dir, cfg) as store:
        results = [store.put_message(make_msg(i, queue_id=0)) for i in range(20)]
    # the last CQ unit claims a size the record does not have: the CQ cannot be trusted
    files = sorted((store_dir / "consumequeue" / "TopicTest" / "0").iterdir())
    cq_file = files[-1]
    data = bytearray(cq_file.read_bytes())
    n = reference_valid_units(bytes(data))
    off, size, tags = CQ_UNIT.unpack_from(data, (n - 1) * 20)
    CQ_UNIT.pack_into(data, (n - 1) * 20, off, size + 4, tags)
    cq_file.write_bytes(bytes(data))
    with MessageStore.open(store_dir, cfg) as store:
        # full scan from the CommitLog's start: the commitlog is intact, so nothing is lost
        assert store.max_phy_offset == results[-1].wrote_offset + results[-1].wrote_bytes
        assert store.put_message(make_msg(99, queue_id=1)).ok


def test_get_message_raw_path_returns_the_same_bytes_without_decoding(store_dir, cfg):
    with MessageStore.open(store_dir, cfg) as store:
        for i in range(30):
            store.put_message(make_msg(i, queue_id=0, TAGS="TagA" if i % 3 else "TagB"))
        for kw in ({}, {"tags_codes": {java_string_hash("TagB")}},
                   {"filter": lambda m: m.properties["UNIQ_KEY"].endswith("7")},
                   {"max_bytes": 500}):
            full = store.get_message("TopicTest", 0, 2, 8, **kw)
            raw = store.get_message("TopicTest", 0, 2, 8, decode=False, **kw)
            assert raw.messages == [] and full.messages
            assert [bytes(r) for r in raw.raw] == [bytes(r) for r in full.raw]
            assert (raw.status, raw.next_begin_offset, raw.min_offset, raw.max_offset) == (
                full.status, full.next_begin_offset, full.min_offset, full.max_offset)
