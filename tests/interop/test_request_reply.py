"""Issue 14: request-reply (SEND_REPLY_MESSAGE 324/325, PUSH_REPLY_MESSAGE_TO_CLIENT 326) and the
send response's transactionId, against Apache's 5.3.3 broker and `rmqtool serve` alike.

Round trips: `rmqtool.client` requesting and replying; Apache's Java client requesting
(`DefaultMQProducer.request`, `java/.../RequestReply.java`) with our replier; our request with a
Java replier (`MessageUtil.createReplyMessage`); Apache's Go client (rocketmq-client-go v2.1.2,
`go/main.go`, `Producer.Request`) with our replier, and its SendResult.TransactionID. Each reply must come back to the requester
that asked, with the request's correlation id, on `<cluster>_REPLY_TOPIC`.
"""

from __future__ import annotations

import json
import os
import subprocess
import threading
import time

import pytest

from rmqtool.client import (
    ConsumeStatus,
    Message,
    MessageExt,
    Producer,
    PushConsumer,
    RequestTimeoutError,
    create_reply_message,
)
from rmqtool.client.reply import CORRELATION_ID, REPLY_TO_CLIENT

from .harness import HERE, java_cmd, require_java

pytestmark = [pytest.mark.interop, pytest.mark.timeout(240)]


class PyReplier:
    """A push consumer answering each request with b"reply-to:" + its body, through its own producer."""

    def __init__(self, namesrv: str, topic: str, group: str) -> None:
        self.producer = Producer(f"{group}_P", namesrv).start()
        self.seen: list[str] = []
        self.errors: list[str] = []

        def listener(msgs: list[MessageExt], ctx: object) -> ConsumeStatus:
            for m in msgs:
                if REPLY_TO_CLIENT not in m.properties:
                    continue  # not a request (the topic's warm-up message, the Go program's plain send)
                self.seen.append(m.properties.get(CORRELATION_ID, ""))
                try:
                    self.producer.send(create_reply_message(m, b"reply-to:" + m.body))
                except Exception as e:  # noqa: BLE001 - reported by the test
                    self.errors.append(repr(e))
            return ConsumeStatus.CONSUME_SUCCESS

        self.consumer = PushConsumer(group, namesrv).subscribe(topic, "*").register_listener(listener)
        self.consumer.start()

    def wait_ready(self, namesrv: str, topic: str) -> None:
        """Until the replier owns the topic's queues: one request of ours answered."""
        with Producer(f"RR_PROBE_{os.getpid()}", namesrv) as probe:
            _request_until_replied(probe, topic, b"probe")

    def close(self) -> None:
        self.consumer.shutdown()
        self.producer.shutdown()


def _topic(broker, name: str) -> str:
    topic = f"RR_{name}_{broker.kind}_{os.getpid()}"
    with Producer(f"RR_SETUP_{name}", broker.namesrv) as p:  # auto-created by the first send
        p.send(Message(topic, b"warm-up"))
    return topic


def _request_until_replied(producer: Producer, topic: str, body: bytes, deadline_s: float = 60) -> MessageExt:
    """The first request may go before the replier's rebalance owns the queues (then no reply)."""
    end = time.time() + deadline_s
    while True:
        try:
            return producer.request(Message(topic, body), timeout=3.0)
        except RequestTimeoutError:
            if time.time() > end:
                raise


def test_send_response_carries_transaction_id(any_broker):
    """5.x brokers put the message's unique id in the send response (`transactionId`)."""
    with Producer(f"RR_TX_{any_broker.kind}", any_broker.namesrv) as p:
        r = p.send(Message(f"RR_TXID_{any_broker.kind}_{os.getpid()}", b"x"))
        assert r.transaction_id == r.msg_id and r.msg_id


def test_rmqtool_request_reply(any_broker):
    topic = _topic(any_broker, "PY")
    replier = PyReplier(any_broker.namesrv, topic, f"RR_PY_REPLIER_{os.getpid()}")
    try:
        with Producer(f"RR_PY_REQUESTER_{os.getpid()}", any_broker.namesrv) as requester:
            first = _request_until_replied(requester, topic, b"req-0")
            assert first.body == b"reply-to:req-0"
            for i in range(1, 4):
                reply = requester.request(Message(topic, f"req-{i}".encode()), timeout=5.0)
                assert reply.body == f"reply-to:req-{i}".encode()
                assert reply.topic.endswith("_REPLY_TOPIC") and reply.properties.get(CORRELATION_ID)
                assert reply.properties.get("PUSH_REPLY_TIME"), reply.properties
        assert not replier.errors, replier.errors
    finally:
        replier.close()


def test_rmqtool_request_times_out_without_replier(any_broker):
    topic = _topic(any_broker, "NOBODY")
    with Producer(f"RR_PY_LONELY_{os.getpid()}", any_broker.namesrv) as requester:
        t0 = time.time()
        with pytest.raises(RequestTimeoutError):
            requester.request(Message(topic, b"anyone?"), timeout=1.0)
        assert time.time() - t0 < 4


def test_reply_to_unknown_client_is_refused(any_broker):
    """SEND_REPLY_MESSAGE naming a client with no channel: SYSTEM_ERROR with Java's remark."""
    from rmqtool.client import ClientError

    with Producer(f"RR_PY_STRAY_{os.getpid()}", any_broker.namesrv) as p:
        reply = Message(f"{_cluster(p, any_broker)}_REPLY_TOPIC", b"late",
                        properties={"MSG_TYPE": "reply", "REPLY_TO_CLIENT": "10.9.9.9@nobody",
                                    CORRELATION_ID: "c-1"})
        with pytest.raises(ClientError) as e:
            p.impl.instance.run(p.impl.send(p.impl.prepare(reply), mode="sync"))
        assert "push reply message fail, channel of <10.9.9.9@nobody> not found." in str(e.value)


def _cluster(p: Producer, broker) -> str:
    from rmqtool.remoting.command import RemotingCommand

    r = p.instance.run(p.instance.invoke(broker.namesrv, RemotingCommand.request(106)))
    from rmqtool.remoting import fastjson

    return next(iter(fastjson.loads(r.body)["clusterAddrTable"]))


def test_java_request_python_reply(any_broker, tmp_path):
    require_java()
    topic = _topic(any_broker, "JREQ")
    replier = PyReplier(any_broker.namesrv, topic, f"RR_PYR_{os.getpid()}")
    try:
        replier.wait_ready(any_broker.namesrv, topic)
        proc = subprocess.run(java_cmd("RequestReply", "request", "--namesrv", any_broker.namesrv, "--topic", topic,
                                       "--count", "3", home=tmp_path),
                              capture_output=True, timeout=120)
        lines = [json.loads(line) for line in proc.stdout.decode().splitlines() if line.startswith("{")]
        assert [(x["ok"], x.get("body")) for x in lines] == [(True, f"reply-to:req-{i}") for i in range(3)], (
            lines, replier.seen, replier.errors)
        assert all(x["correlation"] and x["replyTopic"].endswith("_REPLY_TOPIC") for x in lines)
    finally:
        replier.close()


def test_python_request_java_reply(any_broker, tmp_path):
    require_java()
    topic = _topic(any_broker, "JREP")
    proc = subprocess.Popen(java_cmd("RequestReply", "reply", "--namesrv", any_broker.namesrv, "--topic", topic,
                                     "--group", f"RR_JR_{os.getpid()}", home=tmp_path),
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    killer = threading.Timer(150, proc.kill)
    killer.start()
    try:
        assert json.loads(proc.stdout.readline()) == {"ready": True}
        with Producer(f"RR_PY_REQ_J_{os.getpid()}", any_broker.namesrv) as requester:
            assert _request_until_replied(requester, topic, b"req-0").body == b"reply-to:req-0"
            reply = requester.request(Message(topic, b"req-1"), timeout=5.0)
            assert reply.body == b"reply-to:req-1"
    finally:
        proc.stdin.close()
        proc.wait(timeout=30)
        killer.cancel()


def require_go() -> str:
    binary = HERE / "go" / "target" / "rrgo"
    if not binary.is_file():
        pytest.skip("Go client program not built (run .ci/steps/11-go-interop.sh; needs the Go module proxy)")
    return str(binary)


def test_go_request_python_reply(any_broker):
    binary = require_go()
    topic = _topic(any_broker, "GOREQ")
    replier = PyReplier(any_broker.namesrv, topic, f"RR_GOR_{os.getpid()}")
    try:
        replier.wait_ready(any_broker.namesrv, topic)
        proc = subprocess.run([binary, "-namesrv", any_broker.namesrv, "-topic", topic, "-count", "3"],
                              capture_output=True, timeout=120)
        lines = [json.loads(line) for line in proc.stdout.decode().splitlines() if line.startswith("{")]
        got = [(x.get("ok"), x.get("body")) for x in lines if "i" in x]
        assert got == [(True, f"reply-to:req-{i}") for i in range(3)], (lines, replier.seen, replier.errors)
        assert all(x["correlation"] for x in lines if "i" in x)
        [sent] = [x for x in lines if "send" in x]
        assert sent["send"] and sent["transactionId"] == sent["msgId"], sent  # Go reads transactionId
    finally:
        replier.close()
