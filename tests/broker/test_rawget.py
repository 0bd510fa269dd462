"""The pull path's raw store read answers exactly what `MessageStore.get_message` answers
(status, offsets, record bytes) for tag filters, byte caps, offsets below / at / past the queue,
and across ConsumeQueue file ends, without decoding a message."""

from __future__ import annotations

import pytest

from rmqtool.broker.rawget import get_raw, supports_raw_get
from rmqtool.layouts import properties as P
from rmqtool.layouts.javahash import java_string_hash
from rmqtool.layouts.message import MessageExt
from rmqtool.store.config import StoreConfig
from rmqtool.store.messagestore import MessageStore


@pytest.fixture
def store(tmp_path):
    # small ConsumeQueue files (20 units) so reads cross file ends
    cfg = StoreConfig(store_path_root_dir=tmp_path, mapped_file_size_consume_queue=20 * 20,
                      mapped_file_size_commit_log=64 * 1024)
    s = MessageStore.open(tmp_path, cfg)
    tags = ["a", "b", "c"]
    for i in range(90):
        body = bytes([i % 256]) * (100 + 37 * (i % 5))
        s.put_message(MessageExt(topic="RawT", queue_id=i % 2, body=body,
                                 properties={P.TAGS: tags[i % 3], P.KEYS: f"k{i}"}))
    yield s
    s.close()


def _same(store, qid, offset, max_msgs, codes=None, max_bytes=256 * 1024):
    kw = {"max_bytes": max_bytes}
    if codes is not None:
        kw["tags_codes"] = codes
    want = store.get_message("RawT", qid, offset, max_msgs, **kw)
    got = get_raw(store, "RawT", qid, offset, max_msgs, **kw)
    assert got.status == str(getattr(want.status, "value", want.status))
    assert (got.next_begin_offset, got.min_offset, got.max_offset) == (
        want.next_begin_offset, want.min_offset, want.max_offset)
    assert [bytes(r) for r in got.raw] == [bytes(r) for r in want.raw]
    return got


def test_raw_get_matches_get_message(store):
    assert supports_raw_get(store)
    for qid in (0, 1):
        for offset in (0, 1, 19, 20, 44, 45, 46, 99):
            for max_msgs in (1, 7, 32):
                _same(store, qid, offset, max_msgs)
                _same(store, qid, offset, max_msgs, {java_string_hash("b")})
                _same(store, qid, offset, max_msgs, {java_string_hash("zz")})
                _same(store, qid, offset, max_msgs, max_bytes=300)
    got = _same(store, 0, 0, 32)
    assert got.status == "FOUND" and len(got.raw) == 32 and got.next_begin_offset == 32
    assert _same(store, 0, 45, 32).status == "OFFSET_OVERFLOW_ONE"
    assert _same(store, 0, 99, 32).status == "OFFSET_OVERFLOW_BADLY"
    assert _same(store, 0, 0, 32, {java_string_hash("zz")}).status == "NO_MATCHED_MESSAGE"


def test_raw_get_unknown_queue(store):
    assert get_raw(store, "NoSuchTopic", 0, 0, 32).status == "NO_MATCHED_LOGIC_QUEUE"
    assert store.get_message("NoSuchTopic", 0, 0, 32).status == "NO_MATCHED_LOGIC_QUEUE"
