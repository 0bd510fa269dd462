"""The latency fault strategy and queue selection, pinned to protocol.md §7.2."""

from __future__ import annotations

import random

import pytest

from rmqtool.client.fault import (
    LATENCY_MAX,
    NOT_AVAILABLE_DURATION,
    LatencyFaultTolerance,
    MQFaultStrategy,
    SendWhichQueue,
    TopicPublishInfo,
)
from rmqtool.client.message import MessageQueue


class Clock:
    def __init__(self, t: int = 1_000_000) -> None:
        self.t = t

    def __call__(self) -> int:
        return self.t


def queues(*brokers: str, n: int = 4, topic: str = "T") -> list[MessageQueue]:
    return [MessageQueue(topic, b, i) for b in brokers for i in range(n)]


def test_tables_are_the_4_9_8_ones():
    assert LATENCY_MAX == (50, 100, 550, 1000, 2000, 3000, 15000)
    assert NOT_AVAILABLE_DURATION == (0, 0, 30000, 60000, 120000, 180000, 600000)


@pytest.mark.parametrize("latency, duration", [
    (0, 0), (49, 0), (50, 0), (80, 0), (100, 0), (549, 0), (550, 30000), (600, 30000), (999, 30000),
    (1000, 60000), (2000, 120000), (2999, 120000), (3000, 180000), (14999, 180000), (15000, 600000),
    (30000, 600000),
])
def test_not_available_duration_is_the_largest_step_reached(latency, duration):
    assert MQFaultStrategy(True).compute_not_available_duration(latency) == duration


def test_failure_isolates_the_broker_for_600s_and_success_updates_too():
    clock = Clock()
    s = MQFaultStrategy(True, clock=clock)
    s.update_fault_item("broker-a", 10, isolation=True)  # a failure counts as 30000 ms
    ft = s.fault_tolerance
    assert ft.items["broker-a"].start_timestamp == clock.t + 600_000
    assert not ft.is_available("broker-a")
    clock.t += 599_999
    assert not ft.is_available("broker-a")
    clock.t += 1
    assert ft.is_available("broker-a")
    s.update_fault_item("broker-a", 600, isolation=False)  # 600 ms -> 30 s
    assert ft.items["broker-a"].start_timestamp == clock.t + 30_000
    s.update_fault_item("broker-a", 80, isolation=False)  # 80 ms -> available at once
    assert ft.is_available("broker-a")


def test_fault_strategy_is_off_by_default_and_then_records_nothing():
    s = MQFaultStrategy()
    assert s.send_latency_fault_enable is False
    s.update_fault_item("broker-a", 0, isolation=True)
    assert s.fault_tolerance.items == {}


def test_default_selection_is_round_robin_and_a_retry_avoids_the_last_broker():
    tp = TopicPublishInfo(queues("broker-a", "broker-b", n=2), send_which_queue=SendWhichQueue(seed=1))
    s = MQFaultStrategy()
    start = tp.send_which_queue._index
    picks = [s.select_one_message_queue(tp, None) for _ in range(4)]
    assert picks == [tp.queues[(start + k) % 4] for k in range(1, 5)]
    for _ in range(20):
        assert s.select_one_message_queue(tp, "broker-a").broker_name == "broker-b"
        assert s.select_one_message_queue(tp, "broker-b").broker_name == "broker-a"


def test_a_retry_with_a_single_broker_moves_to_the_next_queue():
    tp = TopicPublishInfo(queues("broker-a", n=4), send_which_queue=SendWhichQueue(seed=3))
    s = MQFaultStrategy()
    first = s.select_one_message_queue(tp, None)
    second = s.select_one_message_queue(tp, first.broker_name)
    assert second.queue_id == (first.queue_id + 1) % 4


def test_fault_mode_skips_an_isolated_broker():
    clock = Clock()
    s = MQFaultStrategy(True, clock=clock, rng=random.Random(0))
    tp = TopicPublishInfo(queues("broker-a", "broker-b", n=4), send_which_queue=SendWhichQueue(seed=5))
    s.update_fault_item("broker-a", 3000, isolation=True)
    for _ in range(50):
        assert s.select_one_message_queue(tp, None).broker_name == "broker-b"
    clock.t += 600_000
    seen = {s.select_one_message_queue(tp, None).broker_name for _ in range(8)}
    assert seen == {"broker-a", "broker-b"}


def test_fault_mode_with_every_broker_down_picks_the_least_bad_one():
    clock = Clock()
    s = MQFaultStrategy(True, clock=clock, rng=random.Random(0))
    tp = TopicPublishInfo(queues("broker-a", "broker-b", "broker-c", n=2))
    s.update_fault_item("broker-a", 5000, isolation=False)   # 180 s
    s.update_fault_item("broker-b", 700, isolation=False)    # 30 s, lowest latency
    s.update_fault_item("broker-c", 20000, isolation=False)  # 600 s
    # three items: the better half is one item -> always the lowest latency
    for _ in range(10):
        mq = s.select_one_message_queue(tp, None)
        assert mq.broker_name == "broker-b" and 0 <= mq.queue_id < 2


def test_pick_one_at_least_orders_available_first_then_latency_then_start():
    clock = Clock()
    ft = LatencyFaultTolerance(clock, random.Random(1))
    assert ft.pick_one_at_least() is None
    ft.update_fault_item("x", 900, 10_000)
    assert ft.pick_one_at_least() == "x"  # a single item is always chosen
    ft.update_fault_item("y", 5000, 0)  # available, though slower
    ft.update_fault_item("z", 100, 20_000)
    ft.update_fault_item("w", 100, 5_000)
    # sorted: y (available), w (100, earlier start), z (100), x (900); half = 2 -> y, w alternate
    picks = {ft.pick_one_at_least() for _ in range(10)}
    assert picks == {"y", "w"}


def test_least_bad_broker_without_write_queues_is_dropped():
    clock = Clock()
    s = MQFaultStrategy(True, clock=clock, rng=random.Random(0))
    tp = TopicPublishInfo(queues("broker-a", n=2))
    s.update_fault_item("broker-a", 0, isolation=True)
    s.update_fault_item("gone", 0, isolation=True)
    s.fault_tolerance.items["gone"].current_latency = -1  # sorts first among the unavailable
    mq = s.select_one_message_queue(tp, None)
    assert mq.broker_name == "broker-a"
    assert "gone" not in s.fault_tolerance.items
