"""RecallMessage: a delay message taken back before its delivery time (Apache's Python SDK 5.1.2
`Producer.recall_message`, the raw stub for statuses, RECALL_MESSAGE 370 over remoting).

Each suite takes a target with `.grpc`, `.broker` and `.namesrv`: `rmqtool serve` here, and in
tests/interop/test_grpc.py also Apache's proxy + broker, the reference. Recall is off by default
on both brokers (`recallMessageEnable=false`); the suites switch it on with UPDATE_BROKER_CONFIG.
"""

from __future__ import annotations

import base64
import time

import pytest

from tests.broker.conftest import Wire, props, send_ext
from tests.proxy.conftest import Stub, create_topic, d, s, unique, wait_for
from tests.proxy.sdk_helpers import config, handle_fields, pull_all, set_recall

rocketmq = pytest.importorskip("rocketmq")
from rocketmq import Message, Producer  # noqa: E402

INTERNAL = d.INTERNAL_SERVER_ERROR


def recall_stub(stub: Stub, topic: str, handle: str):
    return stub.call("RecallMessage", s.RecallMessageRequest(topic=d.Resource(name=topic), recall_handle=handle))


def test_recalled_delay_message_is_never_delivered(serve):
    topic = unique("RC")
    create_topic(serve, topic, 1, "DELAY")
    set_recall(serve, True)
    p = Producer(config(serve), (topic,))
    p.startup()
    try:
        now_s = int(time.time())
        receipts = {}
        for body, delay_s in ((b"recall me", 7), (b"keep me", 3)):
            m = Message()
            m.topic, m.body, m.tag = topic, body, "TagR"
            m.delivery_timestamp = now_s + delay_s  # this SDK takes seconds (it fills Timestamp.seconds)
            receipts[body] = (p.send(m), (now_s + delay_s) * 1000)
        r, deliver_ms = receipts[b"recall me"]
        version, h_topic, broker, stamp, msg_id = handle_fields(r.recall_handle)
        assert (version, h_topic, msg_id) == ("v1", topic, r.message_id) and broker
        assert deliver_ms - 1000 < int(stamp) <= deliver_ms + 1  # the wheel slot (precision 1 s), + 1
        assert p.recall_message(topic, r.recall_handle) == r.message_id
        kept = wait_for(lambda: pull_all(serve.broker, topic, 1), timeout=30)
        assert [m.body for m in kept] == [b"keep me"]
        time.sleep(max(0.0, (deliver_ms + 2500) / 1000 - time.time()))  # past the recalled one's time
        assert [m.body for m in pull_all(serve.broker, topic, 1)] == [b"keep me"]
        # delivered or recalled: too late either way, the broker's ILLEGAL_OPERATION as a status
        stub = Stub(serve.grpc)
        try:
            for handle in (r.recall_handle, receipts[b"keep me"][0].recall_handle):
                res = recall_stub(stub, topic, handle)
                assert (res.status.code, res.status.message) == (INTERNAL, "recall failed, timestamp invalid")
        finally:
            stub.close()
    finally:
        p.shutdown()


def test_recall_refusals(serve):
    delay, normal = unique("RD"), unique("RN")
    create_topic(serve, delay, 1, "DELAY")
    create_topic(serve, normal, 1)
    set_recall(serve, True)
    w = Wire(serve.broker)
    stub = Stub(serve.grpc)
    try:
        sent = w.request(310, send_ext(delay, 0, props(TIMER_DELIVER_MS=str(int(time.time() * 1000) + 60_000),
                                                       UNIQ_KEY="7F0000010001444400000000000000A1")), b"later")
        assert sent.code == 0, sent.remark
        handle = sent.ext_fields["recallHandle"]
        version, h_topic, broker, _, msg_id = handle_fields(handle)
        assert (version, h_topic, msg_id) == ("v1", delay, "7F0000010001444400000000000000A1")
        plain = w.request(310, send_ext(normal, 0, props(UNIQ_KEY="7F0000010001444400000000000000A2")), b"now")
        assert plain.code == 0 and "recallHandle" not in plain.ext_fields

        res = recall_stub(stub, normal, handle)
        assert res.status.code == d.MESSAGE_PROPERTY_CONFLICT_WITH_TYPE
        assert res.status.message.endswith("the expected type is NORMAL, but actual type is DELAY")
        res = recall_stub(stub, delay, "not a handle!")
        assert (res.status.code, res.status.message) == (
            INTERNAL, "org.apache.rocketmq.proxy.common.ProxyException: recall handle is invalid")
        other = base64.urlsafe_b64encode(f"v1 {normal} {broker} {int(time.time() * 1000) + 60_000} X".encode()).decode()
        res = recall_stub(stub, delay, other)
        assert (res.status.code, res.status.message) == (INTERNAL, "recall failed, topic not match")

        def remoting(topic: str, h: str):
            return w.request(370, {"topic": topic, "recallHandle": h, "producerGroup": "pg"})

        r = remoting("NoSuchRecallTopic", handle)
        assert (r.code, r.remark) == (17, "recall failed, the topic[NoSuchRecallTopic] not exist")
        r = remoting(delay, base64.urlsafe_b64encode(b"v2 a b c d").decode())
        assert (r.code, r.remark) == (604, "recall handle is invalid")
        set_recall(serve, False)
        r = remoting(delay, handle)
        assert (r.code, r.remark) == (16, "recall failed, operation is forbidden")
        res = recall_stub(stub, delay, handle)
        assert (res.status.code, res.status.message) == (INTERNAL, "recall failed, operation is forbidden")
        set_recall(serve, True)
        r = remoting(delay, handle)
        assert r.code == 0 and r.ext_fields["msgId"] == msg_id
    finally:
        set_recall(serve, True)
        stub.close()
        w.close()
