"""Dead letters through the gRPC endpoint: a group allowing one retry (`retryMaxTimes=1`, so the
settings say 2 attempts). A push consumer that always fails has its message forwarded to
`%DLQ%group` by the SDK (ForwardMessageToDeadLetterQueue); a simple consumer that never acks
sees the message twice, then the endpoint moves it to the DLQ itself (PopMessageResultFilterImpl).

Each test takes a target with `.grpc` and `.broker` (serve here; tests/interop/test_grpc.py runs
them against Apache's proxy + broker too) and creates its own group with
UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, as `mqadmin updateSubGroup -r 1` would."""

from __future__ import annotations

import json
import threading

import pytest

from tests.broker.conftest import Wire, decode_records, pull_ext
from tests.proxy.conftest import create_topic, unique, wait_for
from tests.proxy.sdk_helpers import config, receive_all, send_sdk, simple

rocketmq = pytest.importorskip("rocketmq")
from rocketmq import ConsumeResult, FilterExpression, PushConsumer  # noqa: E402
from rocketmq.v5.consumer.push.message_listener import MessageListener  # noqa: E402


def create_group(target, prefix: str) -> str:
    group = unique(prefix)
    body = json.dumps({"groupName": group, "retryMaxTimes": 1, "consumeEnable": True, "retryQueueNums": 1}).encode()
    w = Wire(target.broker)
    try:
        r = w.request(200, {}, body)
        assert r.code == 0, r.remark
    finally:
        w.close()
    return group


def dlq(serve, group: str) -> list:
    w = Wire(serve.broker)
    try:
        r = w.request(11, pull_ext(f"%DLQ%{group}", "dlq_reader", 0, 0))
        return decode_records(r.body) if r.code == 0 else []
    finally:
        w.close()


class AlwaysFail(MessageListener):
    def __init__(self) -> None:
        self.attempts: list[int] = []
        self.lock = threading.Lock()

    def consume(self, message) -> ConsumeResult:
        with self.lock:
            self.attempts.append(message.delivery_attempt)
        return ConsumeResult.FAILURE


def test_push_consumer_forwards_to_dlq_after_max_attempts(serve):
    topic, group = unique("DP"), create_group(serve, "DlqPush")
    create_topic(serve, topic, 1)
    listener = AlwaysFail()
    c = PushConsumer(config(serve), group, listener, {topic: FilterExpression("*")})
    c.startup()
    try:
        (mid,) = send_sdk(serve, topic, [b"poison"])
        got = wait_for(lambda: dlq(serve, group), timeout=60)
    finally:
        c.shutdown()
    assert got, f"nothing in the DLQ; attempts seen: {listener.attempts}"
    assert got[0].body == b"poison" and got[0].properties["UNIQ_KEY"] == mid
    assert listener.attempts[:2] == [1, 2]


def test_simple_consumer_message_past_max_attempts_goes_to_dlq(serve):
    topic, group = unique("DS"), create_group(serve, "DlqSimple")
    create_topic(serve, topic, 1)
    c = simple(serve, group, topic)
    try:
        (mid,) = send_sdk(serve, topic, [b"never acked"])
        attempts = []
        for _ in range(2):  # the first receive may come before the client's settings: tried again
            got = receive_all(c, 1, invisible_s=10, timeout=60)
            assert got and got[0].message_id == mid
            attempts.append(got[0].delivery_attempt)
            c.change_invisible_duration(got[0], 1)
        assert attempts == [1, 2]
        # the third delivery is past max attempts: it goes to the DLQ, not to the consumer
        moved = wait_for(lambda: (c.receive(1, 10) == [] and dlq(serve, group)) or None, timeout=60, step=0)
    finally:
        c.shutdown()
    assert moved and moved[0].body == b"never acked"
