"""LocalBroker.send_batch stores exactly what `send` one by one stores (its per-topic shortcuts)."""

from __future__ import annotations

import random

import pytest

from rmqtool.errors import InvalidMessage, InvalidTopic
from rmqtool.layouts.message import MessageExt
from rmqtool.layouts.msgid import UniqKeyFactory
from rmqtool.store.config import StoreConfig
from rmqtool.store.local import LocalBroker

NOW = 1_700_000_000_000


def _open(root) -> LocalBroker:
    cfg = StoreConfig(mapped_file_size_commit_log=64 * 1024 * 1024, mapped_file_size_consume_queue=100 * 20,
                      max_hash_slot_num=64, max_index_num=256)
    b = LocalBroker.open(root, cfg, clock=lambda: NOW)
    b._random = random.Random(7)
    b.uniq_keys = UniqKeyFactory("127.0.0.1", pid=1, seed=1)
    return b


def _messages() -> list[MessageExt]:
    out = []
    for i in range(12):
        props = {"KEYS": f"k{i}", "WAIT": "true", "UNIQ_KEY": f"{i:032X}"}
        if i % 4 == 1:
            del props["UNIQ_KEY"]  # the broker makes one
        if i == 2:
            props["DELAY"] = "3"
        if i == 3:
            props["TIMER_DELAY_SEC"] = "10"
        if i == 5:
            props["DELAY"] = "2"  # a prepared half message keeps its DELAY
        out.append(MessageExt("BatchA" if i % 3 else "BatchB", f"body-{i}".encode(), queue_id=-1 if i == 7 else i % 4,
                              flag=i, properties=props, sys_flag=4 if i == 5 else 0,
                              born_timestamp=0 if i == 6 else NOW - i))
    return out


def _log(b: LocalBroker) -> bytes:
    cl = b.store.commitlog
    return bytes(cl.read_bytes(cl.min_offset, cl.max_offset - cl.min_offset))


def test_batch_and_one_by_one_store_the_same_bytes(tmp_path):
    one, batch = _open(tmp_path / "one"), _open(tmp_path / "batch")
    try:
        singles = [one.send(m) for m in _messages()]
        many = batch.send_batch(_messages())
        assert [(r.queue_offset, r.wrote_offset, r.msg.topic, r.msg.queue_id) for r in many] == \
               [(r.queue_offset, r.wrote_offset, r.msg.topic, r.msg.queue_id) for r in singles]
        assert [r.msg.properties for r in many] == [r.msg.properties for r in singles]
        assert _log(batch) == _log(one) and len(_log(one)) > 0
    finally:
        one.close()
        batch.close()


@pytest.mark.parametrize(("bad", "error"), [
    (MessageExt("BatchA", b""), InvalidMessage),
    (MessageExt("BatchA", b"x", queue_id=9), InvalidMessage),
    (MessageExt("BatchA", b"x", properties={"a": "b\x01"}), InvalidMessage),
    (MessageExt("SCHEDULE_TOPIC_XXXX", b"x"), InvalidTopic),
])
def test_batch_refuses_as_the_first_bad_message_does(tmp_path, bad, error):
    b = _open(tmp_path)
    try:
        with pytest.raises(error) as single:
            b.check(bad)
        with pytest.raises(error) as batched:
            b.send_batch([MessageExt("BatchA", b"ok"), bad, MessageExt("BatchA", b"")])
        assert str(batched.value) == str(single.value)
        assert b.store.commitlog.max_offset == 0
    finally:
        b.close()
