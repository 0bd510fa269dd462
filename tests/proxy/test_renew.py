"""Auto-renew (`auto_renew` receives, as push consumers ask): with a 3 s default invisible time
renewed 2 s ahead, a held message stays invisible well past 3 s and is acked with the handle
the client got; a client that leaves has its held messages handed back (renew.py)."""

from __future__ import annotations

import time

import pytest

from tests.broker.conftest import TEST_CONF
from tests.proxy.conftest import GrpcServe, Stub, create_topic, d, message, s, unique

pytest.importorskip("grpc")
from google.protobuf.duration_pb2 import Duration  # noqa: E402

CONF = TEST_CONF + "defaultInvisibleTimeMills=3000\nrenewAheadTimeMillis=2000\nrenewSchedulePeriodMillis=300\n"


@pytest.fixture(scope="module")
def serve(tmp_path_factory):
    p = GrpcServe(tmp_path_factory.mktemp("grpc-renew") / "store", CONF)
    yield p
    code = p.stop()
    assert "Traceback" not in p.stderr, p.stderr
    assert code == 0


def consumer(serve, group: str, topic: str):
    stub = Stub(serve.grpc, client_id=unique("renew-client"))
    sub = d.Subscription(group=d.Resource(name=group), subscriptions=[d.SubscriptionEntry(
        topic=d.Resource(name=topic), expression=d.FilterExpression(type=d.TAG, expression="*"))])
    t = stub.telemetry(s.TelemetryCommand(settings=d.Settings(client_type=d.PUSH_CONSUMER, subscription=sub)),
                       timeout=120)
    assert t.next().status.code == d.Code.OK
    return stub, t


def receive(stub: Stub, group: str, topic: str, wait_s: int = 5) -> list:
    req = s.ReceiveMessageRequest(group=d.Resource(name=group), message_queue=d.MessageQueue(
        topic=d.Resource(name=topic), id=-1), batch_size=8, auto_renew=True, invisible_duration=Duration(seconds=1),
        long_polling_timeout=Duration(seconds=wait_s), filter_expression=d.FilterExpression(type=d.TAG, expression="*"))
    return [r.message for r in stub.stub.ReceiveMessage(req, metadata=stub.metadata, timeout=wait_s + 20)
            if r.HasField("message")]


def test_held_message_is_renewed_then_acked_with_the_original_handle(serve):
    topic, group = unique("RN"), unique("RNG")
    create_topic(serve, topic, 1)
    stub, t = consumer(serve, group, topic)
    try:
        assert stub.call("SendMessage", s.SendMessageRequest(messages=[message(topic, b"held")])).status.code == d.Code.OK
        got = receive(stub, group, topic)
        assert [m.body for m in got] == [b"held"]
        handle = got[0].system_properties.receipt_handle
        assert int(handle.split(" ")[2]) == 3000  # defaultInvisibleTimeMills, not the 1 s asked for
        time.sleep(4)  # past the first invisible time
        assert receive(stub, group, topic) == []  # still held: renewed
        ack = stub.call("AckMessage", s.AckMessageRequest(group=d.Resource(name=group), topic=d.Resource(name=topic),
                                                          entries=[s.AckMessageEntry(
                                                              message_id=got[0].system_properties.message_id,
                                                              receipt_handle=handle)]))
        assert ack.status.code == d.Code.OK, ack
        time.sleep(2)
        assert receive(stub, group, topic) == []  # acked for good
    finally:
        t.close()
        stub.close()


def test_a_leaving_client_hands_its_messages_back(serve):
    topic, group = unique("RL"), unique("RLG")
    create_topic(serve, topic, 1)
    a, ta = consumer(serve, group, topic)
    b, tb = consumer(serve, group, topic)
    try:
        assert a.call("SendMessage", s.SendMessageRequest(messages=[message(topic, b"handed back")])).status.code == 20000
        got = receive(a, group, topic)
        assert [m.body for m in got] == [b"handed back"]
        r = a.call("NotifyClientTermination", s.NotifyClientTerminationRequest(group=d.Resource(name=group)))
        assert r.status.code == d.Code.OK
        deadline = time.time() + 40
        again: list = []
        while not again and time.time() < deadline:
            again = receive(b, group, topic)
        assert [m.body for m in again] == [b"handed back"]
        assert again[0].system_properties.delivery_attempt == 2
    finally:
        ta.close()
        tb.close()
        a.close()
        b.close()
