"""QUERY_ASSIGNMENT's allocation (broker/assignment.py) against what Java 5.3.3's strategies and
`QueryAssignmentProcessor.allocate4Pop` compute (its unit test's invariants, and exact answers)."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

import pytest

from rmqtool.broker.assignment import (
    QueryAssignmentProcessor,
    allocate_averagely,
    allocate_averagely_by_circle,
    allocate_for_pop,
)
from rmqtool.remoting.bodies import MessageQueue

STRATEGIES = {"AVG": allocate_averagely, "AVG_BY_CIRCLE": allocate_averagely_by_circle}


def mqs(n: int) -> list[MessageQueue]:
    return [MessageQueue("T", "broker-a", i) for i in range(n)]


def ids(result: list[MessageQueue]) -> list[int]:
    return [mq.queueId for mq in result]


@pytest.mark.parametrize(("strategy", "expected"), [
    ("AVG", [[0, 1, 2], [3, 4, 5], [6, 7]]),
    ("AVG_BY_CIRCLE", [[0, 3, 6], [1, 4, 7], [2, 5]]),
])
def test_strategies_split_as_java(strategy, expected):
    cids = ["c0", "c1", "c2"]
    assert [ids(STRATEGIES[strategy](c, mqs(8), cids)) for c in cids] == expected
    assert STRATEGIES[strategy]("c9", mqs(8), cids) == []  # not a member: nothing
    assert ids(STRATEGIES[strategy]("c2", mqs(2), cids)) == []  # more clients than queues
    with pytest.raises(ValueError):
        STRATEGIES[strategy]("c0", [], cids)


@pytest.mark.parametrize("strategy", ["AVG", "AVG_BY_CIRCLE"])
def test_allocate_for_pop_holds_javas_invariants(strategy):
    """QueryAssignmentProcessorTest.testAllocate4Pop's loops and checkAllocateResult."""
    fn = STRATEGIES[strategy]
    for mq_size in range(1, 17):
        for cid_size in range(1, 17):
            cids = [str(i) for i in range(cid_size)]
            for share in range(16):
                size = len(allocate_for_pop(fn, cids[-1], mqs(mq_size), cids, share))
                assert 0 < size <= mq_size
                if share <= 0 or share >= cid_size - 1:
                    assert size == mq_size
                elif mq_size < cid_size:
                    assert size == 1
                elif mq_size % cid_size == 0:
                    assert size == (mq_size // cid_size) * (share + 1)
                else:
                    avg = mq_size // cid_size
                    assert avg * (share + 1) <= size <= (avg + 1) * (share + 1)


def test_allocate_for_pop_queue_ids():
    cids = ["a", "b", "c", "d"]
    assert set(ids(allocate_for_pop(allocate_averagely, "a", mqs(8), cids, 0))) == {-1}
    assert ids(allocate_for_pop(allocate_averagely, "d", mqs(8), cids, 1)) == [6, 7, 0, 1]  # own, then a's
    assert ids(allocate_for_pop(allocate_averagely, "c", mqs(3), cids, 1)) == [2]  # more clients: one each
    assert ids(allocate_for_pop(allocate_averagely, "d", mqs(3), cids, 1)) == [0]


def fake_broker(extra: dict[str, str], modes: dict | None = None, clients: dict | None = None):
    topics = {"T": SimpleNamespace(read_queue_nums=4, perm=6), "W": SimpleNamespace(read_queue_nums=4, perm=2)}
    return SimpleNamespace(
        config=SimpleNamespace(extra=extra), message_request_modes=modes or {}, routes=None, registrar=None,
        broker_name="broker-a", local=SimpleNamespace(topics=SimpleNamespace(select=topics.get)),
        clients=SimpleNamespace(consumers=clients or {}, consumer_ids=lambda g: list((clients or {}).get(g, []))))


def test_request_mode_from_the_store_then_broker_conf():
    p = QueryAssignmentProcessor(fake_broker({}))
    assert p.request_mode("T", "g") == ("PULL", 0)
    p = QueryAssignmentProcessor(fake_broker({"defaultMessageRequestMode": "POP", "defaultPopShareQueueNum": "2"}))
    assert p.request_mode("T", "g") == ("POP", 2)
    assert p.request_mode("%RETRY%g", "g") == ("PULL", 0)  # retry topics are always pulled
    p = QueryAssignmentProcessor(fake_broker({}, {"T": {"g": {"mode": "POP", "popShareQueueNum": 1}}}))
    assert p.request_mode("T", "g") == ("POP", 1) and p.request_mode("T", "h") == ("PULL", 0)


def test_load_balance_from_this_brokers_topic_config():
    p = QueryAssignmentProcessor(fake_broker({}, clients={"g": ["c1", "c0"]}))

    def lb(topic="T", cid="c0", model="CLUSTERING", strategy="AVG", mode="PULL", share=0, group="g"):
        r = asyncio.run(p.load_balance(topic, group, cid, model, strategy, mode, share))
        return None if r is None else sorted(set(ids(r)))  # the answer is a set, as Java's

    assert lb() == [0, 1] and lb(cid="c1") == [2, 3]  # client ids sorted first, as Java does
    assert lb(model="BROADCASTING") == [0, 1, 2, 3]
    assert lb(mode="POP") == [-1]
    assert lb(topic="none") is None and lb(group="nobody") is None and lb(strategy="CONSISTENT_HASH") is None
    assert lb(topic="W") is None  # write-only: no queue to read, Java's strategy refuses the empty list
    assert lb(topic="%LMQ%x") == [0]
    p.server_load_balancer_enable = False
    assert lb() == [0, 1, 2, 3]


@pytest.mark.parametrize("body", [b"", b"not json", b"[]", b"{}", b'{"topic":"T"}', b'{"topic":null,"consumerGroup":"g",'
                                  b'"messageModel":"CLUSTERING"}', b'{"topic":"T","consumerGroup":"g"}',
                                  b'{"topic":"T","consumerGroup":"g","messageModel":"SIDEWAYS"}',
                                  b'{"topic":1,"consumerGroup":"g","messageModel":"CLUSTERING"}'])
def test_bad_bodies_get_system_error(body):
    from rmqtool.remoting.command import RemotingCommand

    p = QueryAssignmentProcessor(fake_broker({}, clients={"g": ["c0"]}))
    r = asyncio.run(p.process_query_assignment(RemotingCommand.request(400, {}, body), None))
    assert r.code == 1 and r.remark.startswith("bad query assignment body")


@pytest.mark.parametrize(("over", "expected"), [
    ({}, [0, 1, 2, 3]),
    ({"clientId": None}, None),  # Java's strategy refuses an empty client id: no answer
    ({"strategyName": None}, None),
    ({"consumerGroup": "nobody"}, None),
])
def test_answers_of_the_processor(over, expected):
    from rmqtool.remoting import fastjson
    from rmqtool.remoting.command import RemotingCommand

    p = QueryAssignmentProcessor(fake_broker({}, clients={"g": ["c0"]}))
    body = {"topic": "T", "consumerGroup": "g", "clientId": "c0", "strategyName": "AVG",
            "messageModel": "CLUSTERING", **over}
    r = asyncio.run(p.process_query_assignment(RemotingCommand.request(400, {}, fastjson.dumpb(
        {k: v for k, v in body.items() if v is not None})), None))
    assert r.code == 0
    got = fastjson.loads(r.body).get("messageQueueAssignments")
    assert (None if got is None else sorted(a["messageQueue"]["queueId"] for a in got)) == expected
    assert got is None or {a["mode"] for a in got} == {"PULL"}
