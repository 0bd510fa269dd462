"""Fuzz: 5,000 malformed gRPC requests against serve's endpoint (random bytes, mutated valid
requests, unknown enum values, absurd sizes and durations, streams cut mid-call, a raw
connection that stops inside the HTTP/2 preface). serve answers each with a status or a gRPC
error, stays up, logs no traceback, and its memory stays flat."""

from __future__ import annotations

import random
import socket
import threading

import pytest

from tests.proxy.conftest import GrpcServe, Stub, create_topic, d, message, s

grpc = pytest.importorskip("grpc")
from google.protobuf.duration_pb2 import Duration  # noqa: E402

pytestmark = pytest.mark.slow
SERVICE = "/apache.rocketmq.v2.MessagingService/"
UNARY = ["QueryRoute", "Heartbeat", "SendMessage", "QueryAssignment", "AckMessage",
         "ForwardMessageToDeadLetterQueue", "EndTransaction", "NotifyClientTermination", "ChangeInvisibleDuration",
         "PullMessage", "UpdateOffset", "GetOffset", "QueryOffset", "RecallMessage"]
TOPIC, GROUP = "FuzzTopic", "FuzzGroup"


def valid_requests() -> list[tuple[str, bytes]]:
    """One well-formed request per RPC, to mutate."""
    res, grp = d.Resource(name=TOPIC), d.Resource(name=GROUP)
    handle = "0 1796000000000 30000 0 0 broker-a 0 0 100"
    sub = d.Subscription(group=grp, subscriptions=[d.SubscriptionEntry(topic=res, expression=d.FilterExpression(
        type=d.TAG, expression="*"))])
    reqs = {
        "QueryRoute": s.QueryRouteRequest(topic=res, endpoints=d.Endpoints(addresses=[d.Address(host="h", port=1)])),
        "Heartbeat": s.HeartbeatRequest(group=grp, client_type=d.SIMPLE_CONSUMER),
        "SendMessage": s.SendMessageRequest(messages=[message(TOPIC, b"fuzz", tag="T", keys=["k"])]),
        "QueryAssignment": s.QueryAssignmentRequest(topic=res, group=grp),
        "AckMessage": s.AckMessageRequest(group=grp, topic=res, entries=[s.AckMessageEntry(message_id="m",
                                                                                            receipt_handle=handle)]),
        "ForwardMessageToDeadLetterQueue": s.ForwardMessageToDeadLetterQueueRequest(
            group=grp, topic=res, receipt_handle=handle, message_id="m", delivery_attempt=3, max_delivery_attempts=2),
        "EndTransaction": s.EndTransactionRequest(topic=res, message_id="m", transaction_id="t", resolution=d.COMMIT),
        "NotifyClientTermination": s.NotifyClientTerminationRequest(group=grp),
        "ChangeInvisibleDuration": s.ChangeInvisibleDurationRequest(group=grp, topic=res, receipt_handle=handle,
                                                                    invisible_duration=Duration(seconds=30)),
        "ReceiveMessage": s.ReceiveMessageRequest(group=grp, message_queue=d.MessageQueue(topic=res, id=-1),
                                                  batch_size=4, invisible_duration=Duration(seconds=30),
                                                  long_polling_timeout=Duration(seconds=0)),
        "Telemetry": s.TelemetryCommand(settings=d.Settings(client_type=d.SIMPLE_CONSUMER, subscription=sub)),
    }
    return [(k, v.SerializeToString()) for k, v in reqs.items()]


def absurd_requests() -> list[tuple[str, bytes]]:
    """Parseable requests with values no SDK sends: unknown enums, huge or negative numbers."""
    res, grp = d.Resource(name=TOPIC), d.Resource(name=GROUP)
    out = []
    m = message(TOPIC, b"x", message_type=77, body_encoding=99)
    m.system_properties.delivery_timestamp.seconds = 2 ** 40
    m.system_properties.born_timestamp.seconds = -2 ** 40
    m.system_properties.orphaned_transaction_recovery_duration.seconds = -5
    out.append(("SendMessage", s.SendMessageRequest(messages=[m])))
    out.append(("SendMessage", s.SendMessageRequest(messages=[message(TOPIC, b"y" * (5 * 1024 * 1024))])))
    out.append(("SendMessage", s.SendMessageRequest(messages=[message(TOPIC, b"z") for _ in range(300)])))
    out.append(("SendMessage", s.SendMessageRequest(messages=[message("T" * 100_000, b"z")])))
    out.append(("Heartbeat", s.HeartbeatRequest(group=grp, client_type=99)))
    out.append(("EndTransaction", s.EndTransactionRequest(topic=res, transaction_id="t", resolution=42, source=9)))
    out.append(("ChangeInvisibleDuration", s.ChangeInvisibleDurationRequest(
        group=grp, topic=res, receipt_handle="9" * 200 + " x", invisible_duration=Duration(seconds=-(2 ** 40)))))
    out.append(("AckMessage", s.AckMessageRequest(group=grp, topic=res, entries=[
        s.AckMessageEntry(message_id=str(i), receipt_handle=" ".join(["-1"] * 9)) for i in range(200)])))
    out.append(("QueryRoute", s.QueryRouteRequest(topic=res, endpoints=d.Endpoints(scheme=55))))
    out.append(("ReceiveMessage", s.ReceiveMessageRequest(group=grp, message_queue=d.MessageQueue(topic=res, id=2**31 - 1),
                                                          batch_size=2 ** 31 - 1,
                                                          invisible_duration=Duration(seconds=2 ** 40),
                                                          filter_expression=d.FilterExpression(type=88, expression="(("),
                                                          long_polling_timeout=Duration(seconds=-3))))
    settings = d.Settings(client_type=123, publishing=d.Publishing(topics=[d.Resource(name="")]))
    out.append(("Telemetry", s.TelemetryCommand(settings=settings)))
    out.append(("Telemetry", s.TelemetryCommand(thread_stack_trace=s.ThreadStackTrace(nonce="n"))))
    out.append(("Telemetry", s.TelemetryCommand(verify_message_result=s.VerifyMessageResult(nonce="n"))))
    return [(k, v.SerializeToString()) for k, v in out]


def mutate(rng: random.Random, data: bytes) -> bytes:
    b = bytearray(data)
    for _ in range(rng.randint(1, 6)):
        op = rng.randrange(4)
        if op == 0 and b:
            b[rng.randrange(len(b))] ^= 1 << rng.randrange(8)
        elif op == 1 and b:
            del b[rng.randrange(len(b)):]
        elif op == 2:
            pos = rng.randint(0, len(b))
            b[pos:pos] = bytes(rng.randrange(256) for _ in range(rng.randint(1, 12)))
        elif b:
            b[rng.randrange(len(b))] = rng.choice([0x00, 0x7F, 0x80, 0xFF])
    return bytes(b)


def call(channel, method: str, payload: bytes, metadata) -> None:
    try:
        if method == "ReceiveMessage":
            list(channel.unary_stream(SERVICE + method)(payload, metadata=metadata, timeout=5))
        elif method == "Telemetry":
            it = channel.stream_stream(SERVICE + method)(iter([payload]), metadata=metadata, timeout=2)
            for _ in it:
                it.cancel()  # cut the stream after the first answer
                break
        else:
            channel.unary_unary(SERVICE + method)(payload, metadata=metadata, timeout=5)
    except grpc.RpcError as e:
        assert e.code() in (grpc.StatusCode.INTERNAL, grpc.StatusCode.UNIMPLEMENTED, grpc.StatusCode.INVALID_ARGUMENT,
                            grpc.StatusCode.CANCELLED, grpc.StatusCode.DEADLINE_EXCEEDED), (method, e.code(), e.details())


def raw_cuts(addr: str, rng: random.Random, n: int) -> None:
    """Connections that stop inside the HTTP/2 preface or a frame."""
    host, port = addr.rsplit(":", 1)
    preface = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
    for i in range(n):
        with socket.create_connection((host, int(port)), timeout=5) as sock:
            if i % 3 == 0:
                sock.sendall(preface[:rng.randint(1, len(preface) - 1)])
            elif i % 3 == 1:
                sock.sendall(preface + bytes([0, 0, 64, 1, 4, 0, 0, 0, 1]) + bytes(rng.randrange(256) for _ in range(20)))
            else:
                sock.sendall(bytes(rng.randrange(256) for _ in range(rng.randint(1, 200))))


def test_five_thousand_malformed_requests(tmp_path):
    p = GrpcServe(tmp_path / "store")
    try:
        create_topic(p, TOPIC, 2)
        rng = random.Random(13)
        stub = Stub(p.grpc, client_id="fuzz-client")
        md = stub.metadata
        seeds = valid_requests()
        absurd = absurd_requests()
        sent = 0

        def batch(n: int) -> None:
            nonlocal sent
            for _ in range(n):
                r = rng.random()
                if r < 0.3:
                    method = rng.choice(UNARY + ["ReceiveMessage", "Telemetry"])
                    payload = bytes(rng.randrange(256) for _ in range(rng.randint(0, 64)))
                elif r < 0.9:
                    method, good = rng.choice(seeds)
                    payload = mutate(rng, good)
                else:
                    method, payload = rng.choice(absurd)
                call(stub.channel, method, payload, md if rng.random() < 0.9 else [])
                sent += 1

        batch(1000)
        raw_cuts(p.grpc, rng, 30)
        rss_warm = p.rss_kib()
        threads = [threading.Thread(target=batch, args=(1000,)) for _ in range(4)]  # concurrent calls too
        for t in threads:
            t.start()
        for t in threads:
            t.join(600)
        raw_cuts(p.grpc, rng, 30)
        assert sent >= 5000
        # still serving, correctly
        ok = stub.call("QueryRoute", s.QueryRouteRequest(topic=d.Resource(name=TOPIC), endpoints=stub.endpoints()))
        assert ok.status.code == d.Code.OK and len(ok.message_queues) == 2
        grown = p.rss_kib() - rss_warm
        assert grown < 40 * 1024, f"RSS grew by {grown} KiB over 4,000 malformed requests"
        stub.close()
    finally:
        code = p.stop()
    assert "Traceback" not in p.stderr, p.stderr[-3000:]
    assert code == 0, p.stderr[-3000:]
