"""The five allocation strategies, pinned to protocol.md §7.4 and the Java sources."""

from __future__ import annotations

import hashlib

import pytest

from rmqtool.client.allocate import (
    AllocateMessageQueueAveragely,
    AllocateMessageQueueAveragelyByCircle,
    AllocateMessageQueueByConfig,
    AllocateMessageQueueByMachineRoom,
    AllocateMessageQueueConsistentHash,
    ConsistentHashRouter,
    md5_hash,
)
from rmqtool.client.message import MessageQueue

MQS8 = [MessageQueue("T", "broker-a", i) for i in range(8)]
CIDS3 = ["c0", "c1", "c2"]


def assignment(strategy, mqs, cids):
    return {c: [mq.queue_id for mq in strategy.allocate("g", c, mqs, cids)] for c in cids}


def test_averagely_8_queues_3_consumers():
    assert assignment(AllocateMessageQueueAveragely(), MQS8, CIDS3) == {
        "c0": [0, 1, 2], "c1": [3, 4, 5], "c2": [6, 7]}


def test_averagely_2_queues_3_consumers():
    assert assignment(AllocateMessageQueueAveragely(), MQS8[:2], CIDS3) == {"c0": [0], "c1": [1], "c2": []}


def test_averagely_more_cases_cover_every_queue_once():
    for n in range(1, 13):
        for c in range(1, 6):
            cids = [f"c{i}" for i in range(c)]
            got = assignment(AllocateMessageQueueAveragely(), MQS8[:n] if n <= 8 else
                             [MessageQueue("T", "b", i) for i in range(n)], cids)
            flat = [q for c_ in cids for q in got[c_]]
            assert flat == list(range(n))  # contiguous blocks in consumer order


def test_by_circle_8_queues_3_consumers():
    assert assignment(AllocateMessageQueueAveragelyByCircle(), MQS8, CIDS3) == {
        "c0": [0, 3, 6], "c1": [1, 4, 7], "c2": [2, 5]}


def test_a_consumer_not_in_the_list_gets_nothing():
    for s in (AllocateMessageQueueAveragely(), AllocateMessageQueueAveragelyByCircle(),
              AllocateMessageQueueConsistentHash(), AllocateMessageQueueByMachineRoom({"idc1"})):
        assert s.allocate("g", "stranger", MQS8, CIDS3) == []


def test_md5_hash_is_the_first_four_digest_bytes_unsigned():
    key = "MessageQueue [topic=T, brokerName=broker-a, queueId=0]"
    digest = hashlib.md5(key.encode()).digest()
    assert md5_hash(key) == (digest[0] << 24) | (digest[1] << 16) | (digest[2] << 8) | digest[3]
    assert str(MQS8[0]) == key


def test_consistent_hash_routes_each_queue_to_the_first_virtual_node_clockwise():
    cids = ["192.168.0.1@1", "192.168.0.2@1", "192.168.0.3@1"]
    ring = sorted((md5_hash(f"{c}-{k}"), c) for c in cids for k in range(10))
    expected: dict[str, list[int]] = {c: [] for c in cids}
    for mq in MQS8:
        h = md5_hash(str(mq))
        owner = next((c for hv, c in ring if hv >= h), ring[0][1])
        expected[owner].append(mq.queue_id)
    got = assignment(AllocateMessageQueueConsistentHash(), MQS8, cids)
    assert got == expected
    assert sorted(q for v in got.values() for q in v) == list(range(8))


def test_consistent_hash_moves_few_queues_when_a_consumer_leaves():
    mqs = [MessageQueue("T", "broker-a", i) for i in range(64)]
    cids = [f"10.0.0.{i}@x" for i in range(4)]
    before = {mq: ConsistentHashRouter(cids).route_node(str(mq)) for mq in mqs}
    after = {mq: ConsistentHashRouter(cids[:3]).route_node(str(mq)) for mq in mqs}
    moved = [mq for mq in mqs if before[mq] != after[mq]]
    assert all(before[mq] == cids[3] for mq in moved)  # only the leaver's queues move


def test_by_config_returns_the_configured_list_whoever_asks():
    conf = [MQS8[5], MQS8[1]]
    s = AllocateMessageQueueByConfig(conf)
    assert s.allocate("g", "anyone", MQS8, CIDS3) == conf


def test_by_machine_room_blocks_plus_remainder():
    mqs = [MessageQueue("T", f"{idc}@broker-{b}", i) for idc, b in (("hz", "a"), ("sh", "b"), ("bj", "c"))
           for i in range(4)]
    s = AllocateMessageQueueByMachineRoom({"hz", "sh"})
    pre = [mq for mq in mqs if mq.broker_name.split("@")[0] in ("hz", "sh")]  # 8 queues
    got = {c: s.allocate("g", c, mqs, CIDS3) for c in CIDS3}
    # m = 8 // 3 = 2, r = 2: c0 gets pre[0:2] + pre[6], c1 pre[2:4] + pre[7], c2 pre[4:6]
    assert got == {"c0": [pre[0], pre[1], pre[6]], "c1": [pre[2], pre[3], pre[7]], "c2": [pre[4], pre[5]]}
    plain = [MessageQueue("T", "broker-a", 0)]
    assert s.allocate("g", "c0", plain, CIDS3) == []


def test_blank_current_cid_is_refused():
    with pytest.raises(ValueError):
        AllocateMessageQueueAveragely().allocate("g", "", MQS8, CIDS3)
