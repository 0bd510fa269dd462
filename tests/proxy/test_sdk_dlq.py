"""Dead letters through the gRPC endpoint: a group allowing one retry (`retryMaxTimes=1`, so the
settings say 2 attempts). A push consumer that always fails has its message forwarded to
`%DLQ%group` by the SDK (ForwardMessageToDeadLetterQueue); a simple consumer that never acks
sees the message twice, then the endpoint moves it to the DLQ itself (PopMessageResultFilterImpl)."""

from __future__ import annotations

import json
import threading

import pytest

from tests.broker.conftest import Wire, decode_records, pull_ext
from tests.proxy.conftest import GrpcServe, create_topic, unique, wait_for
from tests.proxy.test_sdk_consumer import config, send_sdk

rocketmq = pytest.importorskip("rocketmq")
from rocketmq import ConsumeResult, FilterExpression, PushConsumer, SimpleConsumer  # noqa: E402
from rocketmq.v5.consumer.push.message_listener import MessageListener  # noqa: E402

PUSH_GROUP, SIMPLE_GROUP = "DlqPushGroup", "DlqSimpleGroup"


@pytest.fixture(scope="module")
def serve(tmp_path_factory):
    store = tmp_path_factory.mktemp("grpc-dlq") / "store"
    (store / "config").mkdir(parents=True)
    groups = {g: {"groupName": g, "retryMaxTimes": 1, "consumeEnable": True, "retryQueueNums": 1}
              for g in (PUSH_GROUP, SIMPLE_GROUP)}
    (store / "config" / "subscriptionGroup.json").write_text(json.dumps(
        {"subscriptionGroupTable": groups, "forbiddenTable": {}, "dataVersion": {"counter": 1, "timestamp": 1}}))
    p = GrpcServe(store)
    yield p
    code = p.stop()
    assert "Traceback" not in p.stderr, p.stderr
    assert code == 0


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
    topic = unique("DP")
    create_topic(serve, topic, 1)
    listener = AlwaysFail()
    c = PushConsumer(config(serve), PUSH_GROUP, listener, {topic: FilterExpression("*")})
    c.startup()
    try:
        (mid,) = send_sdk(serve, topic, [b"poison"])
        got = wait_for(lambda: dlq(serve, PUSH_GROUP), timeout=60)
    finally:
        c.shutdown()
    assert got, f"nothing in the DLQ; attempts seen: {listener.attempts}"
    assert got[0].body == b"poison" and got[0].properties["UNIQ_KEY"] == mid
    assert listener.attempts[:2] == [1, 2]


def test_simple_consumer_message_past_max_attempts_goes_to_dlq(serve):
    topic = unique("DS")
    create_topic(serve, topic, 1)
    c = SimpleConsumer(config(serve), SIMPLE_GROUP, {topic: FilterExpression("*")}, await_duration=5)
    c.startup()
    try:
        (mid,) = send_sdk(serve, topic, [b"never acked"])
        attempts = []
        for _ in range(2):
            got = wait_for(lambda: c.receive(1, 10), timeout=60, step=0)
            assert got and got[0].message_id == mid
            attempts.append(got[0].delivery_attempt)
            c.change_invisible_duration(got[0], 1)
        assert attempts == [1, 2]
        # the third delivery is past max attempts: it goes to the DLQ, not to the consumer
        moved = wait_for(lambda: (c.receive(1, 10) == [] and dlq(serve, SIMPLE_GROUP)) or None, timeout=60, step=0)
    finally:
        c.shutdown()
    assert moved and moved[0].body == b"never acked"
