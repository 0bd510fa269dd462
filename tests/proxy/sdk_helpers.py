"""What the gRPC suites of tests/proxy (test_sdk_producer, test_sdk_consumer, test_sdk_dlq,
test_sdk_recall) and their side-by-side run against Apache (tests/interop/test_grpc.py) share:
Apache's Python SDK pointed at a target, messages sent and received with it, a target's stored
messages read back over remoting, and RecallMessage switched on or off. A target has `.grpc`, `.broker` and
`.namesrv`. Not collected as tests."""

from __future__ import annotations

import base64
import time

import pytest

from tests.broker.conftest import Wire, decode_records, pull_ext

rocketmq = pytest.importorskip("rocketmq")
from rocketmq import ClientConfiguration, Credentials, FilterExpression, Message, Producer, SimpleConsumer  # noqa: E402


def config(target) -> ClientConfiguration:
    return ClientConfiguration(target.grpc, Credentials())


def send_sdk(target, topic: str, bodies: list[bytes], tag: str = "TagA") -> list[str]:
    """Each body sent by one SDK producer with `tag`, keys key0.. and property seq=0..; the message ids."""
    p = Producer(config(target), (topic,))
    p.startup()
    try:
        ids = []
        for i, b in enumerate(bodies):
            m = Message()
            m.topic, m.body, m.tag, m.keys = topic, b, tag, f"key{i}"
            m.add_property("seq", str(i))
            ids.append(p.send(m).message_id)
        return ids
    finally:
        p.shutdown()


def simple(target, group: str, topic: str, await_s: int = 5, expr: str = "*") -> SimpleConsumer:
    """An SDK simple consumer of `topic` for `group`, started."""
    c = SimpleConsumer(config(target), group, {topic: FilterExpression(expr)}, await_duration=await_s)
    c.startup()
    return c


def receive_all(c: SimpleConsumer, want: int, invisible_s: int = 15, timeout: float = 30) -> list:
    """Receive until `want` messages came. A receive the server refuses is tried again, as an
    application's loop would: Apache's proxy can see a receive before the client's settings
    (an INTERNAL_SERVER_ERROR naming the missing settings, its own race, which serve keeps)."""
    got: list = []
    deadline = time.time() + timeout
    while len(got) < want and time.time() < deadline:
        try:
            got.extend(c.receive(32, invisible_s))
        except Exception as e:
            if "settings" not in str(e):
                raise
            time.sleep(0.5)
    return got


def pull_all(broker: str, topic: str, queues: int = 2) -> list:
    """Every message stored in `topic`'s first `queues` queues of `broker` (PULL_MESSAGE from offset 0)."""
    w = Wire(broker)
    try:
        out = []
        for q in range(queues):
            r = w.request(11, pull_ext(topic, "grpc_check", q, 0))
            if r.code == 0:
                out.extend(decode_records(r.body))
        return out
    finally:
        w.close()


def set_recall(target, on: bool) -> None:
    """UPDATE_BROKER_CONFIG recallMessageEnable (off by default on rmqtool's broker and Apache's)."""
    w = Wire(target.broker)
    try:
        r = w.request(25, {}, f"recallMessageEnable={'true' if on else 'false'}\n".encode())
        assert r.code == 0, r.remark
    finally:
        w.close()


def handle_fields(handle: str) -> list[str]:
    """A recall handle's fields (RecallMessageHandle.HandleV1: version topic brokerName timestamp msgId)."""
    return base64.urlsafe_b64decode(handle + "=" * (-len(handle) % 4)).decode().split(" ")
