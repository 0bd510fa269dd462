"""Statuses and error details of serve's gRPC endpoint, as Apache's proxy returns them: every
refusal is a status inside an OK call (bad topic, unknown topic, system topic, no client id,
message too large or empty, system property keys, type conflicts, bad receipt handles,
invisible durations out of range), and the call-level errors of the Telemetry stream."""

from __future__ import annotations

import pytest

from tests.proxy.conftest import Stub, create_topic, d, message, s, unique

grpc = pytest.importorskip("grpc")

C = d.Code
PX = "org.apache.rocketmq.proxy.common.ProxyException: "  # how the proxy words its processors' refusals


@pytest.fixture
def stub(serve):
    st = Stub(serve.grpc)
    yield st
    st.close()


def route(stub: Stub, topic: str):
    return stub.call("QueryRoute", s.QueryRouteRequest(topic=d.Resource(name=topic), endpoints=stub.endpoints()))


def send(stub: Stub, *msgs):
    return stub.call("SendMessage", s.SendMessageRequest(messages=list(msgs)))


def test_query_route_lists_queues_behind_the_grpc_endpoint(serve, stub):
    topic = unique("SR")
    create_topic(serve, topic, 3, "FIFO")
    r = route(stub, topic)
    assert r.status.code == C.OK and r.status.message == "OK"
    assert [q.id for q in r.message_queues] == [0, 1, 2]
    for q in r.message_queues:
        assert q.permission == d.READ_WRITE and list(q.accept_message_types) == [d.FIFO]
        assert q.broker.name == "broker-a" and q.broker.id == 0
        assert [(a.host, a.port) for a in q.broker.endpoints.addresses] == [(stub.host, int(stub.port))]


@pytest.mark.parametrize("topic, code, text", [
    ("", C.ILLEGAL_TOPIC, "The specified topic is blank"),
    ("bad topic!", C.ILLEGAL_TOPIC, "contains illegal characters"),
    ("x" * 128, C.ILLEGAL_TOPIC, "longer than topic max length 127"),
    ("TBW102", C.ILLEGAL_TOPIC, "cannot access system topic"),
    ("rmq_sys_SOMETHING", C.ILLEGAL_TOPIC, "cannot access system topic"),
    ("NoSuchTopicHere", C.TOPIC_NOT_FOUND, "No topic route info in name server for the topic: NoSuchTopicHere"),
])
def test_query_route_refusals(stub, topic, code, text):
    r = route(stub, topic)
    assert r.status.code == code and text in r.status.message
    assert not r.message_queues


def test_client_id_is_required(serve):
    st = Stub(serve.grpc, client_id=None)
    try:
        r = route(st, "AnyTopic")
        assert r.status.code == C.CLIENT_ID_REQUIRED and r.status.message == "client id cannot be empty"
    finally:
        st.close()


def test_send_refusals(serve, stub):
    topic = unique("SS")
    create_topic(serve, topic, 1)
    fifo = unique("SSF")
    create_topic(serve, fifo, 1, "FIFO")
    cases = [
        (s.SendMessageRequest(), C.MESSAGE_CORRUPTED, "no message to send"),
        (s.SendMessageRequest(messages=[message(topic, b"")]), C.MESSAGE_BODY_EMPTY, "message body cannot be empty"),
        (s.SendMessageRequest(messages=[message(topic, b"x" * (4 * 1024 * 1024 + 1))]), C.MESSAGE_BODY_TOO_LARGE,
         "message body cannot exceed the max 4194304"),
        (s.SendMessageRequest(messages=[message(topic, message_id="")]), C.ILLEGAL_MESSAGE_ID,
         "message id cannot be empty"),
        (s.SendMessageRequest(messages=[message(topic, tag="a|b")]), C.ILLEGAL_MESSAGE_TAG, "tag cannot contain '|'"),
        (s.SendMessageRequest(messages=[message(topic, keys=["  "])]), C.ILLEGAL_MESSAGE_KEY,
         "key cannot be the char sequence of whitespace"),
        (s.SendMessageRequest(messages=[message(topic), message(fifo)]), C.MESSAGE_CORRUPTED,
         "topic in message is not same"),
        (s.SendMessageRequest(messages=[message(fifo)]), C.MESSAGE_PROPERTY_CONFLICT_WITH_TYPE,
         "TopicMessageType validate failed, the expected type is FIFO, but actual type is NORMAL"),
        (s.SendMessageRequest(messages=[message(topic, message_group="g1")]), C.MESSAGE_PROPERTY_CONFLICT_WITH_TYPE,
         "the expected type is NORMAL, but actual type is FIFO"),
        (s.SendMessageRequest(messages=[message("NoSuchTopicHere")]), C.MESSAGE_PROPERTY_CONFLICT_WITH_TYPE,
         "the expected type is UNSPECIFIED"),
    ]
    m = message(topic)
    m.user_properties["UNIQ_KEY"] = "mine"
    cases.append((s.SendMessageRequest(messages=[m]), C.ILLEGAL_MESSAGE_PROPERTY_KEY, "property is used by system: UNIQ_KEY"))
    m = message(fifo, message_group="x" * 64)
    cases.append((s.SendMessageRequest(messages=[m]), C.ILLEGAL_MESSAGE_GROUP, "message group exceed the max size 64"))
    for req, code, text in cases:
        r = stub.call("SendMessage", req, timeout=30)
        assert (r.status.code, text in r.status.message) == (code, True), (r.status, text)
        assert not r.entries


def test_send_ok_entry(serve, stub):
    topic = unique("SO")
    create_topic(serve, topic, 1)
    m = message(topic, b"ok", tag="T")
    r = send(stub, m)
    assert r.status.code == C.OK and r.status.message == "OK"
    (e,) = r.entries
    assert e.status.code == C.OK and e.message_id == m.system_properties.message_id and e.offset == 0
    assert e.transaction_id == m.system_properties.message_id  # the broker's transactionId: the uniq key


def test_heartbeat_and_termination_without_settings(stub):
    r = stub.call("Heartbeat", s.HeartbeatRequest(client_type=d.PRODUCER))
    assert r.status.code == C.UNRECOGNIZED_CLIENT_TYPE
    assert r.status.message == "cannot find client settings for this client"
    r = stub.call("NotifyClientTermination", s.NotifyClientTerminationRequest())
    assert r.status.code == C.UNRECOGNIZED_CLIENT_TYPE
    req = s.ReceiveMessageRequest(group=d.Resource(name="G"), message_queue=d.MessageQueue(topic=d.Resource(name="T")))
    rs = list(stub.stub.ReceiveMessage(req, metadata=stub.metadata, timeout=10))
    assert rs[0].status.code == C.INTERNAL_SERVER_ERROR and rs[-1].HasField("delivery_timestamp")
    assert rs[0].status.message.startswith('Cannot invoke "apache.rocketmq.v2.Settings.getSubscription()" because '
                                           '"settings" is null. NullPointerException.')


def test_end_transaction_refusals(serve, stub):
    topic = unique("SE")
    create_topic(serve, topic, 1, "TRANSACTION")
    r = stub.call("EndTransaction", s.EndTransactionRequest(topic=d.Resource(name=topic), transaction_id=" "))
    assert (r.status.code, r.status.message) == (C.INVALID_TRANSACTION_ID, "transaction id cannot be empty")
    r = stub.call("EndTransaction", s.EndTransactionRequest(topic=d.Resource(name=topic), transaction_id="nope",
                                                            message_id="nope", resolution=d.COMMIT))
    assert (r.status.code, r.status.message) == (C.INTERNAL_SERVER_ERROR, PX + "cannot found transaction data")


def test_telemetry_without_pub_sub_is_invalid_argument(stub):
    t = stub.telemetry(s.TelemetryCommand(settings=d.Settings(client_type=d.PRODUCER)))
    with pytest.raises(grpc.RpcError) as e:
        t.next()
    t.close()
    assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "there is no publishing or subscription data in settings" in e.value.details()


def test_telemetry_settings_come_back_completed(serve, stub):
    topic = unique("ST")
    create_topic(serve, topic, 1)
    settings = d.Settings(client_type=d.PRODUCER, publishing=d.Publishing(topics=[d.Resource(name=topic)]))
    t = stub.telemetry(s.TelemetryCommand(settings=settings))
    try:
        first = t.next()
        assert first.status.code == C.OK
        # a heartbeat now finds the settings
        r = stub.call("Heartbeat", s.HeartbeatRequest(client_type=d.PRODUCER))
        assert r.status.code == C.OK
    finally:
        t.close()
    p = first.settings
    assert p.publishing.max_body_size == 4 * 1024 * 1024 and p.publishing.validate_message_type
    assert p.backoff_policy.max_attempts == 3
    assert p.backoff_policy.exponential_backoff.initial.nanos == 10_000_000
    assert p.backoff_policy.exponential_backoff.max.seconds == 1
    assert p.backoff_policy.exponential_backoff.multiplier == 2


def _consumer_settings(stub: Stub, group: str, topic: str):
    sub = d.Subscription(group=d.Resource(name=group), subscriptions=[
        d.SubscriptionEntry(topic=d.Resource(name=topic), expression=d.FilterExpression(type=d.TAG, expression="*"))])
    settings = d.Settings(client_type=d.SIMPLE_CONSUMER, subscription=sub)
    t = stub.telemetry(s.TelemetryCommand(settings=settings), timeout=60)
    return t, t.next()


def test_consumer_settings_and_receive_refusals(serve):
    stub = Stub(serve.grpc, client_id=unique("consumer"))
    topic, group = unique("SC"), unique("SCG")
    create_topic(serve, topic, 1)
    calls, first = _consumer_settings(stub, group, topic)
    try:
        assert first.status.code == C.OK
        sub = first.settings.subscription
        assert sub.receive_batch_size == 32 and sub.long_polling_timeout.seconds == 20 and not sub.fifo
        assert first.settings.backoff_policy.max_attempts == 17
        assert [x.seconds for x in first.settings.backoff_policy.customized_backoff.next][:4] == [1, 5, 10, 30]

        def receive(**kw):
            from google.protobuf.duration_pb2 import Duration

            req = s.ReceiveMessageRequest(group=d.Resource(name=kw.pop("group", group)), message_queue=d.MessageQueue(
                topic=d.Resource(name=kw.pop("topic", topic)), id=-1), batch_size=1,
                invisible_duration=Duration(seconds=kw.pop("invisible", 30)),
                long_polling_timeout=Duration(seconds=5),
                filter_expression=d.FilterExpression(type=d.TAG, expression="*"))
            return list(stub.stub.ReceiveMessage(req, metadata=stub.metadata, timeout=30))

        rs = receive(invisible=5)
        assert rs[0].status.code == C.ILLEGAL_INVISIBLE_TIME
        assert rs[0].status.message == "the invisibleTime is too small. min is 10000"
        assert rs[-1].HasField("delivery_timestamp")
        rs = receive(invisible=13 * 3600)
        assert rs[0].status.message == "the invisibleTime is too large. max is 43200000"
        rs = receive(group="CID_RMQ_SYS_X")
        assert (rs[0].status.code, rs[0].status.message) == (C.ILLEGAL_CONSUMER_GROUP, "cannot use system consumer group")
        rs = receive()  # nothing there: the long poll ends with MESSAGE_NOT_FOUND
        assert (rs[0].status.code, rs[0].status.message) == (C.MESSAGE_NOT_FOUND, "no new message")

        ack = stub.call("AckMessage", s.AckMessageRequest(group=d.Resource(name=group), topic=d.Resource(name=topic),
                                                          entries=[s.AckMessageEntry(message_id="m", receipt_handle="x y")]))
        assert ack.status.code == C.INTERNAL_SERVER_ERROR and ack.entries[0].status.message == (
            "Parse failed, dataList size 2. IllegalArgumentException. "
            "org.apache.rocketmq.common.consumer.ReceiptHandle.decode(ReceiptHandle.java:56)")
        old = "0 1000 30000 0 0 broker-a 0 0 0"  # popped in 1970: long expired
        ack = stub.call("AckMessage", s.AckMessageRequest(group=d.Resource(name=group), topic=d.Resource(name=topic),
                                                          entries=[s.AckMessageEntry(message_id="m", receipt_handle=old)]))
        assert (ack.entries[0].status.code, ack.entries[0].status.message) == (C.INVALID_RECEIPT_HANDLE,
                                                                             PX + "receipt handle is expired")
        from google.protobuf.duration_pb2 import Duration

        ch = stub.call("ChangeInvisibleDuration", s.ChangeInvisibleDurationRequest(
            group=d.Resource(name=group), topic=d.Resource(name=topic), receipt_handle=old, message_id="m",
            invisible_duration=Duration(seconds=13 * 3600)))
        assert (ch.status.code, ch.status.message) == (C.ILLEGAL_INVISIBLE_TIME,
                                                       "the invisibleTime is too large. max is 43200000")
        ch = stub.call("ChangeInvisibleDuration", s.ChangeInvisibleDurationRequest(
            group=d.Resource(name=group), topic=d.Resource(name=topic), receipt_handle=old, message_id="m",
            invisible_duration=Duration(seconds=10)))
        assert (ch.status.code, ch.status.message) == (C.INVALID_RECEIPT_HANDLE, PX + "receipt handle is expired")
    finally:
        calls.close()
        stub.close()


def test_query_assignment(serve, stub):
    topic, group = unique("SA"), unique("SAG")
    create_topic(serve, topic, 2)
    r = stub.call("QueryAssignment", s.QueryAssignmentRequest(topic=d.Resource(name=topic), group=d.Resource(name=group),
                                                              endpoints=stub.endpoints()))
    assert r.status.code == C.OK
    assert [(a.message_queue.id, a.message_queue.permission) for a in r.assignments] == [(-1, d.READ_WRITE)]
    r = stub.call("QueryAssignment", s.QueryAssignmentRequest(topic=d.Resource(name=topic),
                                                              group=d.Resource(name="bad group"),
                                                              endpoints=stub.endpoints()))
    assert r.status.code == C.ILLEGAL_CONSUMER_GROUP


def test_consumer_relay_refuses_an_unknown_client(serve):
    from tests.broker.conftest import Wire, props, send_ext

    w = Wire(serve.broker)
    try:
        r = w.request(307, {"consumerGroup": "NoGroup", "clientId": "nobody", "jstackEnable": "true"})
        assert (r.code, r.remark) == (1, "The Consumer <NoGroup> <nobody> not online")
        # the message id is decoded first: one too short fails as Java's ByteBuffer does
        r = w.request(309, {"consumerGroup": "NoGroup", "clientId": "nobody", "msgId": "zz"})
        assert (r.code, r.remark) == (1, "java.nio.BufferUnderflowException, "
                                         "java.base/java.nio.HeapByteBuffer.get(HeapByteBuffer.java:183)")
        sent = w.request(310, send_ext("RelayNoGroupTopic", 0, props(UNIQ_KEY="7F00000100015555000000000000000B")),
                         b"to nobody")
        assert sent.code == 0, sent.remark
        r = w.request(309, {"consumerGroup": "NoGroup", "clientId": "nobody", "msgId": sent.ext_fields["msgId"],
                            "topic": "RelayNoGroupTopic"})
        assert (r.code, r.remark) == (1, "The Consumer <NoGroup> <nobody> not online")
    finally:
        w.close()
