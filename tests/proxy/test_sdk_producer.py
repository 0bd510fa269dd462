"""Apache's Python 5.x SDK (PyPI rocketmq-python-client 5.1.2) producing through serve's gRPC
endpoint: normal, FIFO, delay and transactional messages (commit, rollback, check-back through
the Telemetry stream), each read back through remoting (a pull, `rmqtool consume`) with the
body, tag, keys and properties the SDK gave it."""

from __future__ import annotations

import time

import pytest
from typer.testing import CliRunner

from rmqtool.cli.main import app
from tests.proxy.conftest import create_topic, unique, wait_for
from tests.proxy.sdk_helpers import pull_all

rocketmq = pytest.importorskip("rocketmq")
from rocketmq import ClientConfiguration, Credentials, Message, Producer  # noqa: E402
from rocketmq.grpc_protocol import TransactionResolution  # noqa: E402
from rocketmq.v5.producer.producer import TransactionChecker  # noqa: E402


def producer(serve, topics, checker=None) -> Producer:
    p = Producer(ClientConfiguration(serve.grpc, Credentials()), tuple(topics), checker)
    p.startup()
    return p


def sdk_message(topic: str, body: bytes, tag: str | None = None, keys: str | None = None, **props: str) -> Message:
    m = Message()
    m.topic = topic
    m.body = body
    if tag:
        m.tag = tag
    if keys:
        m.keys = keys
    for k, v in props.items():
        m.add_property(k, v)
    return m


def test_normal_message_reads_back_through_remoting(serve):
    topic = unique("GN")
    create_topic(serve, topic, 2)
    p = producer(serve, [topic])
    try:
        receipts = [p.send(sdk_message(topic, f"hello {i}".encode(), "TagA", f"key{i}", color="red", n=str(i)))
                    for i in range(4)]
    finally:
        p.shutdown()
    got = wait_for(lambda: (lambda ms: ms if len(ms) == 4 else None)(pull_all(serve.broker, topic)))
    assert got, "the four messages did not arrive"
    by_id = {m.properties["UNIQ_KEY"]: m for m in got}
    assert set(by_id) == {r.message_id for r in receipts}
    assert {m.queue_id for m in got} == {0, 1}  # round robin over the writable queues
    for r in receipts:
        m = by_id[r.message_id]
        i = int(m.properties["n"])
        assert m.body == f"hello {i}".encode()
        assert m.tags == "TagA" and m.keys == f"key{i}" and m.properties["color"] == "red"
        # as Apache's proxy fills them: producer group = topic, born time from the SDK
        assert m.properties["PGROUP"] == topic
        assert int(m.properties["BORN_TIMESTAMP"]) == m.born_timestamp
        assert m.properties["__BORNHOST"]
        assert m.queue_offset == r.offset if hasattr(r, "offset") else True
    # and `rmqtool consume` prints the same
    res = CliRunner().invoke(app, ["consume", topic, "--namesrv", serve.namesrv, "--from", "first", "-g", "cli_g",
                                   "--timeout", "10", "--format", "%i|%g|%k|%s"])
    assert res.exit_code == 0, res.output
    lines = sorted(line for line in res.stdout.splitlines() if line)
    assert lines == sorted(f"{r.message_id}|TagA|key{i}|hello {i}" for i, r in enumerate(receipts))


def test_fifo_message_group_keeps_one_queue(serve):
    topic = unique("GF")
    create_topic(serve, topic, 4, "FIFO")
    p = producer(serve, [topic])
    try:
        for g in ("order-1", "order-2"):
            for i in range(3):
                m = sdk_message(topic, f"{g}:{i}".encode(), "T")
                m.message_group = g
                p.send(m)
    finally:
        p.shutdown()
    got = wait_for(lambda: (lambda ms: ms if len(ms) == 6 else None)(pull_all(serve.broker, topic, 4)))
    assert got
    for g in ("order-1", "order-2"):
        mine = sorted((m for m in got if m.properties.get("__SHARDINGKEY") == g), key=lambda m: m.queue_offset)
        assert len({m.queue_id for m in mine}) == 1  # one group, one queue, in send order
        assert [m.body for m in mine] == [f"{g}:{i}".encode() for i in range(3)]


def test_delay_message_waits_for_its_delivery_time(serve):
    topic = unique("GD")
    create_topic(serve, topic, 1, "DELAY")
    p = producer(serve, [topic])
    try:
        m = sdk_message(topic, b"later", "T")
        due_s = int(time.time()) + 3
        m.delivery_timestamp = due_s  # this SDK takes seconds (it fills Timestamp.seconds)
        p.send(m)
        assert pull_all(serve.broker, topic, 1) == []  # held by the timer
    finally:
        p.shutdown()
    got = wait_for(lambda: pull_all(serve.broker, topic, 1), timeout=30)
    assert got and got[0].body == b"later"
    assert int(got[0].properties["TIMER_DELIVER_MS"]) == due_s * 1000
    assert got[0].store_timestamp >= due_s * 1000 - 1000


class Checker(TransactionChecker):
    """A local transaction table: what the application decided, by body (unknown: commit)."""

    def __init__(self) -> None:
        self.checked: list[str] = []
        self.decided = {b"rolled back": TransactionResolution.ROLLBACK}

    def check(self, message):
        self.checked.append(message.message_id)
        return self.decided.get(message.body, TransactionResolution.COMMIT)


def test_transaction_commit_rollback_and_check_back(serve):
    topic = unique("GT")
    create_topic(serve, topic, 1, "TRANSACTION")
    checker = Checker()
    p = producer(serve, [topic], checker)
    want = {b"checked", b"committed"}
    try:
        t1 = p.begin_transaction()
        p.send(sdk_message(topic, b"committed", "T"), t1)
        t2 = p.begin_transaction()
        p.send(sdk_message(topic, b"rolled back", "T"), t2)
        t3 = p.begin_transaction()
        r3 = p.send(sdk_message(topic, b"checked", "T"), t3)  # never ended: the broker asks
        t1.commit()
        t2.rollback()
        got = wait_for(lambda: (lambda ms: ms if {m.body for m in ms} >= want else None)(
            pull_all(serve.broker, topic, 1)), timeout=90)  # a loaded broker checks late
    finally:
        p.shutdown()
    bodies = [m.body for m in pull_all(serve.broker, topic, 1)]
    assert got, f"the committed and the checked-back message did not both arrive: {bodies}"
    # at least once: a check racing the producer's own commit may commit a message twice
    assert set(bodies) == want, bodies
    assert r3.message_id in checker.checked
