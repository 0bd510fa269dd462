"""Apache's Python 5.x SDK consuming through serve's gRPC endpoint over the broker's POP:
simple consumer (receive, ack, change invisible duration, redelivery), push consumer, and
messages sent through remoting received through gRPC with the same body, tag, keys and
properties."""

from __future__ import annotations

import threading

import pytest

from tests.broker.conftest import Wire, props, send_ext
from tests.proxy.conftest import create_topic, unique, wait_for
from tests.proxy.sdk_helpers import config, receive_all, send_sdk, simple

rocketmq = pytest.importorskip("rocketmq")
from rocketmq import (  # noqa: E402
    ConsumeResult,
    FilterExpression,
    PushConsumer,
)
from rocketmq.v5.consumer.push.message_listener import MessageListener  # noqa: E402


def test_simple_consumer_receive_ack_change_invisible_redelivery(serve):
    topic, group = unique("GS"), unique("GSG")
    create_topic(serve, topic, 2)
    c = simple(serve, group, topic)
    try:
        ids = send_sdk(serve, topic, [b"m0", b"m1", b"m2"])
        got = receive_all(c, 3)
        assert sorted(m.message_id for m in got) == sorted(ids)
        for m in got:
            i = int(m.properties["seq"])
            assert m.body == f"m{i}".encode() and m.tag == "TagA" and set(m.keys) == {f"key{i}"}
            assert m.delivery_attempt == 1 and m.receipt_handle
        later = next(m for m in got if m.properties["seq"] == "2")
        for m in got:
            if m is not later:
                c.ack(m)
        c.change_invisible_duration(later, 2)  # back in about 2 s instead of 15
        again = receive_all(c, 1, timeout=40)
        assert [m.message_id for m in again] == [later.message_id]
        assert again[0].delivery_attempt == 2 and again[0].body == b"m2"
        c.ack(again[0])
        assert c.receive(32, 15) == []  # everything acked: nothing comes back
    finally:
        c.shutdown()


def test_remoting_sent_message_received_through_grpc(serve):
    topic, group = unique("GR"), unique("GRG")
    create_topic(serve, topic, 1)
    c = simple(serve, group, topic)
    try:
        w = Wire(serve.broker)
        try:
            r = w.request(310, send_ext(topic, 0, props(TAGS="TagR", KEYS="ka kb", UNIQ_KEY="7F0000010001AAAA0000000000000001",
                                                          colour="blue", WAIT="true")), b"from remoting")
            assert r.code == 0, r.remark
        finally:
            w.close()
        got = receive_all(c, 1)
        assert len(got) == 1
        m = got[0]
        assert m.body == b"from remoting" and m.tag == "TagR" and set(m.keys) == {"ka", "kb"}
        assert m.message_id == "7F0000010001AAAA0000000000000001"
        assert m.properties.get("colour") == "blue"
        assert "WAIT" not in m.properties and "TAGS" not in m.properties  # system properties stay system
        c.ack(m)
    finally:
        c.shutdown()


def test_tag_filter_and_bad_invisible_duration(serve):
    topic, group = unique("GTF"), unique("GTFG")
    create_topic(serve, topic, 1)
    c = simple(serve, group, topic, expr="TagB")
    try:
        send_sdk(serve, topic, [b"a"], tag="TagA")
        send_sdk(serve, topic, [b"b"], tag="TagB")
        got = receive_all(c, 1)
        assert [m.body for m in got] == [b"b"]
        c.ack(got[0])
        with pytest.raises(Exception) as e:  # ILLEGAL_INVISIBLE_TIME: below the proxy's 10 s minimum
            c.receive(1, 5)
        assert "40011" in str(e.value) or "invisibleTime" in str(e.value)
    finally:
        c.shutdown()


class Collect(MessageListener):
    def __init__(self) -> None:
        self.bodies: list[bytes] = []
        self.lock = threading.Lock()

    def consume(self, message) -> ConsumeResult:
        with self.lock:
            self.bodies.append(message.body)
        return ConsumeResult.SUCCESS


def test_push_consumer_gets_every_message(serve):
    topic, group = unique("GP"), unique("GPG")
    create_topic(serve, topic, 2)
    listener = Collect()
    c = PushConsumer(config(serve), group, listener, {topic: FilterExpression("*")})
    c.startup()
    try:
        send_sdk(serve, topic, [f"p{i}".encode() for i in range(6)])
        assert wait_for(lambda: len(listener.bodies) >= 6, timeout=40), listener.bodies
        assert sorted(listener.bodies) == sorted(f"p{i}".encode() for i in range(6))
    finally:
        c.shutdown()
