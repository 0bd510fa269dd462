"""SimpleConsumer (POP) and `rmqtool consume --pop` against rmqtool serve and Apache's broker."""

from __future__ import annotations

import json
import time

import pytest

from rmqtool.client import Message, Producer, SimpleConsumer
from rmqtool.client.exceptions import BrokerError


def produce(server, unique, topic: str, n: int) -> None:
    with Producer(unique("pg"), server.namesrv) as p:
        for i in range(n):
            p.send(Message(topic, f"m{i}".encode(), tags="A", keys=f"k{i}"))


def receive_all(c: SimpleConsumer, want: int, seconds: float, invisible: float = 30.0) -> list:
    got: list = []
    deadline = time.monotonic() + seconds
    while len(got) < want and time.monotonic() < deadline:
        got += c.receive(32, invisible_duration=invisible, await_duration=2)
    return got


def test_receive_ack_and_redelivery(server, unique):
    topic, group = unique("Tsc"), unique("gsc")
    produce(server, unique, topic, 4)
    with SimpleConsumer(group, server.namesrv, {topic: "*"}) as c:
        first = receive_all(c, 4, 30, invisible=3)
        assert sorted(r.body for r in first) == [b"m0", b"m1", b"m2", b"m3"]
        assert all(r.delivery_attempt == 1 and r.message.tags == "A" for r in first)
        for r in first:
            if r.body != b"m2":
                c.ack(r)
        back = receive_all(c, 1, 40)
        assert [r.body for r in back] == [b"m2"]
        assert back[0].delivery_attempt == 2 and back[0].message.topic == topic
        c.ack(back[0])
        assert c.receive(32, await_duration=5) == []


def test_change_invisible_duration(server, unique):
    topic, group = unique("Tsci"), unique("gsci")
    produce(server, unique, topic, 1)
    with SimpleConsumer(group, server.namesrv, {topic: "*"}) as c:
        [r] = receive_all(c, 1, 30, invisible=300)
        old = r.receipt_handle
        c.change_invisible_duration(r, 2)
        assert r.receipt_handle != old
        t0 = time.monotonic()
        back = receive_all(c, 1, 40)
        assert [x.body for x in back] == [b"m0"] and time.monotonic() - t0 < 35
        c.ack(back[0])
        with pytest.raises(BrokerError):  # an offset the queue does not have
            r.receipt_handle = r.receipt_handle.rsplit(" ", 1)[0] + " 99"
            c.ack(r)


@pytest.mark.slow
def test_dead_letter_after_max_attempts(server, unique):
    topic, group = unique("Tscd"), unique("gscd")
    produce(server, unique, topic, 1)
    with SimpleConsumer(group, server.namesrv, {topic: "*"}, max_attempts=2) as c:
        seen = receive_all(c, 1, 30, invisible=1)
        seen += receive_all(c, 1, 40, invisible=1)  # the second delivery, not acked either
        assert [r.delivery_attempt for r in seen] == [1, 2]
        assert receive_all(c, 1, 12, invisible=1) == []  # the third goes to %DLQ% instead
    from rmqtool.client import PullConsumer

    with PullConsumer(unique("gdlq"), server.namesrv) as pc:
        deadline = time.monotonic() + 20
        got = []
        while not got and time.monotonic() < deadline:
            for mq in pc.fetch_subscribe_message_queues(f"%DLQ%{group}"):
                got += pc.pull(mq, "*", 0, 32).messages
            time.sleep(0.5)
    assert [m.body for m in got] == [b"m0"]


def test_consume_pop_cli(server, unique, rmq):
    topic, group = unique("Tscli"), unique("gscli")
    produce(server, unique, topic, 3)
    r = rmq("consume", topic, "--pop", "--namesrv", server.namesrv, "--group", group, "--count", "3",
            "--timeout", "30", "--json", timeout=60)
    assert r.returncode == 0, r.stderr
    assert sorted(json.loads(x)["body"] for x in r.stdout.decode().splitlines()) == ["m0", "m1", "m2"]
    r = rmq("consume", topic, "--pop", "--namesrv", server.namesrv, "--group", group, "--timeout", "3", timeout=60)
    assert (r.returncode, r.stdout) == (0, b"")  # all acked: nothing comes back
    r = rmq("consume", topic, "--pop", "--group", group, "--store", "/nonexistent", timeout=30)
    assert r.returncode == 2 and b"--pop needs the network mode" in r.stderr
