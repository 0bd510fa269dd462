"""PopBufferMergeService (broker/pop/buffer.py) on its own, with a fake clock, store and offsets:
when a checkpoint is held, merged, stored or dropped, and in which order offsets move (Java's
PopBufferMergeService rules)."""

from __future__ import annotations

import json
from types import SimpleNamespace

from rmqtool.broker.pop.buffer import PopBufferMergeService
from rmqtool.layouts.net import Host
from rmqtool.layouts.pop import AckMsg, PopCheckPoint


class Offsets:
    def __init__(self) -> None:
        self.table: dict[tuple, int] = {}

    def commit_offset(self, group: str, topic: str, queue_id: int, offset: int) -> None:
        self.table[(group, topic, queue_id)] = offset

    def query_offset(self, group: str, topic: str, queue_id: int) -> int:
        return self.table.get((group, topic, queue_id), -1)


class Store:
    def __init__(self) -> None:
        self.puts: list = []

    def put_message(self, msg):
        self.puts.append(msg)
        return SimpleNamespace(status="PUT_OK")


def service(clock: list[int], **conf: str):
    local = SimpleNamespace(store_host=Host("127.0.0.1", 10911), config=SimpleNamespace(timer_wheel_enable=False),
                            offsets=Offsets())
    svc = SimpleNamespace(local=local, store=Store(), revive_topic="rmq_sys_REVIVE_LOG_c", broker_name="b",
                          now=lambda: clock[0])
    return svc, PopBufferMergeService(svc, {"enablePopBufferMerge": "true", **conf})


def ck(start: int, offsets: list[int], pop_time: int, invisible: int = 60_000) -> PopCheckPoint:
    c = PopCheckPoint(start_offset=start, pop_time=pop_time, invisible_time=invisible, num=len(offsets), queue_id=0,
                      topic="T", cid="g", broker_name="b")
    for o in offsets:
        c.add_diff(o - start)
    return c


def ack(c: PopCheckPoint, *offsets: int, batch: bool = False) -> AckMsg:
    if batch:
        return AckMsg(-1, c.start_offset, "g", "T", 0, c.pop_time, "b", ack_offset_list=list(offsets))
    return AckMsg(offsets[0], c.start_offset, "g", "T", 0, c.pop_time, "b")


def kinds(store: Store) -> list[str]:
    return [m.properties["TAGS"] for m in store.puts]


def test_acked_in_full_leaves_nothing_and_commits():
    clock = [1_000_000]
    svc, buf = service(clock)
    c = ck(0, [0, 1, 2], clock[0])
    assert buf.add_ck(c, 3, 3)
    assert buf.latest_offset("T@g@0") == 3 and svc.local.offsets.query_offset("g", "T", 0) == -1
    assert buf.add_ak(3, ack(c, 0)) and buf.add_ak(3, ack(c, 1, 2, batch=True))
    buf.scan()
    assert svc.store.puts == [] and buf.buffer == {} and not buf.pending()
    assert svc.local.offsets.query_offset("g", "T", 0) == 3


def test_unacked_is_stored_after_the_stay_time_with_its_acks():
    clock = [1_000_000]
    svc, buf = service(clock)
    c = ck(5, [5, 7, 9], clock[0])
    buf.add_ck(c, 2, 10)
    buf.add_ak(2, ack(c, 7))
    clock[0] += 9_000
    buf.scan()
    assert svc.store.puts == []  # still within popCkStayBufferTime
    assert not buf.add_ak(2, ack(c, 9))  # too close to the end of the stay: the ack is stored by its caller
    clock[0] += 1_001
    buf.scan()
    assert kinds(svc.store) == ["ck", "ack"]
    stored_ck, stored_ack = (json.loads(m.body) for m in svc.store.puts)
    assert (stored_ck["so"], stored_ck["d"], stored_ck["bm"]) == (5, [0, 2, 4], 0)
    assert (stored_ack["ao"], stored_ack["so"], svc.store.puts[1].queue_id) == (7, 5, 2)
    assert buf.buffer == {} and svc.local.offsets.query_offset("g", "T", 0) == 10


def test_near_revive_time_it_is_stored_and_a_short_invisible_time_is_not_held():
    clock = [1_000_000]
    svc, buf = service(clock)
    assert not buf.add_ck(ck(0, [0], clock[0], invisible=4_000), 0, 1)  # < popCkStayBufferTimeOut + 1.5 s
    assert buf.add_ck(ck(1, [1], clock[0], invisible=6_000), 0, 2)
    clock[0] += 3_001
    buf.scan()
    assert kinds(svc.store) == ["ck"]


def test_offsets_move_in_pop_order():
    clock = [1_000_000]
    svc, buf = service(clock)
    first, second = ck(0, [0, 1], clock[0]), ck(2, [2], clock[0] + 1)
    buf.add_ck(first, 0, 2)
    buf.add_ck(second, 1, 3)
    buf.add_ak(1, ack(second, 2))
    buf.scan()
    assert svc.local.offsets.query_offset("g", "T", 0) == -1  # the first is not done: nothing moves
    assert buf.latest_offset("T@g@0") == 3
    buf.add_ak(0, ack(first, 0))
    buf.add_ak(0, ack(first, 1))
    buf.scan()
    assert svc.local.offsets.query_offset("g", "T", 0) == 3 and buf.latest_offset("T@g@0") == -1


def test_just_offset_and_mock_entries_wait_their_turn():
    clock = [1_000_000]
    svc, buf = service(clock)
    held = ck(0, [0], clock[0])
    buf.add_ck(held, 0, 1)
    assert buf.add_ck_just_offset(ck(1, [1], clock[0] + 1, invisible=4_000), 1, 2)
    buf.add_ck_mock("g", "T", 0, 2, 60_000, clock[0] + 2, 2, 5)
    assert kinds(svc.store) == ["ck"]  # the just-offset checkpoint is stored at once
    assert not buf.add_ck_just_offset(ck(1, [1], clock[0] + 1, invisible=4_000), 1, 2)  # same merge key
    buf.scan()
    assert svc.local.offsets.query_offset("g", "T", 0) == -1 and buf.latest_offset("T@g@0") == 5
    buf.add_ak(0, ack(held, 0))
    buf.scan()
    assert svc.local.offsets.query_offset("g", "T", 0) == 5


def test_flush_stores_everything_held_and_stops_merging():
    clock = [1_000_000]
    svc, buf = service(clock, enablePopBatchAck="true")
    c = ck(0, [0, 1, 2], clock[0])
    buf.add_ck(c, 4, 3)
    buf.add_ak(4, ack(c, 0))
    buf.add_ak(4, ack(c, 2))
    buf.flush()
    assert kinds(svc.store) == ["ck", "bAck"]
    assert json.loads(svc.store.puts[1].body)["aol"] == [0, 2]
    assert not buf.pending() and svc.local.offsets.query_offset("g", "T", 0) == 3
    assert not buf.add_ck(ck(3, [3], clock[0]), 0, 4)  # no longer serving: stored by the caller


def test_disabled_holds_nothing():
    clock = [1_000_000]
    svc, buf = service(clock, enablePopBufferMerge="false")
    c = ck(0, [0], clock[0])
    assert not buf.add_ck(c, 0, 1) and not buf.add_ak(0, ack(c, 0)) and buf.latest_offset("T@g@0") == -1
