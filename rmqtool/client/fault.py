"""Queue selection for sends and the latency fault strategy (protocol.md §7.2).

Java: `TopicPublishInfo#selectOneMessageQueue`, `MQFaultStrategy`, `LatencyFaultToleranceImpl`
(4.9.8 tables; 5.x tables available as `LATENCY_MAX_5X` / `NOT_AVAILABLE_DURATION_5X`). The fault
strategy is off by default, as `sendLatencyFaultEnable` is in Java.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from rmqtool.client.message import MessageQueue

LATENCY_MAX = (50, 100, 550, 1000, 2000, 3000, 15000)
NOT_AVAILABLE_DURATION = (0, 0, 30000, 60000, 120000, 180000, 600000)
LATENCY_MAX_5X = (50, 100, 550, 1800, 3000, 5000, 15000)
NOT_AVAILABLE_DURATION_5X = (0, 0, 2000, 5000, 6000, 10000, 30000)
ISOLATION_LATENCY = 30000  # a failed try counts as this latency ("isolation")

_POSITIVE_MASK = 0x7FFFFFFF


def _now_ms() -> int:
    return int(time.time() * 1000)


class SendWhichQueue:
    """`ThreadLocalIndex`: starts at a random non-negative int, `increment_and_get` masks to 31 bits."""

    def __init__(self, seed: int | None = None) -> None:
        self._index = random.Random(seed).getrandbits(31)

    def increment_and_get(self) -> int:
        self._index = (self._index + 1) & 0xFFFFFFFF
        return self._index & _POSITIVE_MASK


@dataclass(slots=True)
class TopicPublishInfo:
    """The writable queues of a topic (`topicRouteData2TopicPublishInfo`), sorted by broker name."""

    queues: list[MessageQueue]
    order_topic: bool = False
    have_topic_router_info: bool = True
    send_which_queue: SendWhichQueue = field(default_factory=SendWhichQueue)

    def ok(self) -> bool:
        return bool(self.queues)

    def select_one(self, last_broker_name: str | None = None) -> MessageQueue:
        """Round robin; on a retry, the first queue whose broker is not the one that just failed."""
        n = len(self.queues)
        if last_broker_name is not None:
            for _ in range(n):
                mq = self.queues[self.send_which_queue.increment_and_get() % n]
                if mq.broker_name != last_broker_name:
                    return mq
        return self.queues[self.send_which_queue.increment_and_get() % n]

    def write_queue_nums(self, broker_name: str) -> int:
        """`getQueueIdByBroker`: how many write queues the broker has for this topic (-1 if none)."""
        n = sum(1 for mq in self.queues if mq.broker_name == broker_name)
        return n if n else -1


@dataclass(slots=True)
class FaultItem:
    name: str
    current_latency: int
    start_timestamp: int  # unavailable until this time (ms)

    def is_available(self, now: int) -> bool:
        return now - self.start_timestamp >= 0

    def sort_key(self, now: int) -> tuple[int, int, int]:
        """`FaultItem.compareTo`: available first, then lower latency, then earlier start."""
        return (0 if self.is_available(now) else 1, self.current_latency, self.start_timestamp)


class LatencyFaultTolerance:
    """`LatencyFaultToleranceImpl`: brokers unavailable until a deadline, picked least-bad when all are."""

    def __init__(self, clock: Callable[[], int] = _now_ms, rng: random.Random | None = None) -> None:
        self.clock = clock
        self.items: dict[str, FaultItem] = {}
        self._which_item_worst = SendWhichQueue(None if rng is None else rng.getrandbits(31))
        self._rng = rng or random.Random()

    def update_fault_item(self, name: str, current_latency: int, not_available_duration: int) -> None:
        start = self.clock() + not_available_duration
        item = self.items.get(name)
        if item is None:
            self.items[name] = FaultItem(name, current_latency, start)
        else:
            item.current_latency, item.start_timestamp = current_latency, start

    def is_available(self, name: str) -> bool:
        item = self.items.get(name)
        return item is None or item.is_available(self.clock())

    def remove(self, name: str | None) -> None:
        if name is not None:
            self.items.pop(name, None)

    def pick_one_at_least(self) -> str | None:
        """Shuffle, sort, then take from the better half in turn (the first if there is one item)."""
        items = list(self.items.values())
        if not items:
            return None
        self._rng.shuffle(items)
        now = self.clock()
        items.sort(key=lambda it: it.sort_key(now))
        half = len(items) // 2
        if half <= 0:
            return items[0].name
        return items[self._which_item_worst.increment_and_get() % half].name


class MQFaultStrategy:
    """`MQFaultStrategy`: plain round robin avoiding the last failed broker, or latency-aware selection."""

    def __init__(self, send_latency_fault_enable: bool = False, *, clock: Callable[[], int] = _now_ms,
                 latency_max: Sequence[int] = LATENCY_MAX,
                 not_available_duration: Sequence[int] = NOT_AVAILABLE_DURATION,
                 rng: random.Random | None = None) -> None:
        if len(latency_max) != len(not_available_duration):
            raise ValueError("latency_max and not_available_duration must have the same length")
        self.send_latency_fault_enable = send_latency_fault_enable
        self.latency_max = tuple(latency_max)
        self.not_available_duration = tuple(not_available_duration)
        self.fault_tolerance = LatencyFaultTolerance(clock, rng)

    def compute_not_available_duration(self, current_latency: int) -> int:
        """The duration of the largest `i` with `latency >= latencyMax[i]`; 0 below the first step."""
        for i in range(len(self.latency_max) - 1, -1, -1):
            if current_latency >= self.latency_max[i]:
                return self.not_available_duration[i]
        return 0

    def update_fault_item(self, broker_name: str, current_latency: int, isolation: bool) -> None:
        """Called after every try, successful or not (§7.1 step 7)."""
        if self.send_latency_fault_enable:
            duration = self.compute_not_available_duration(ISOLATION_LATENCY if isolation else current_latency)
            self.fault_tolerance.update_fault_item(broker_name, current_latency, duration)

    def select_one_message_queue(self, tp: TopicPublishInfo, last_broker_name: str | None) -> MessageQueue:
        if not self.send_latency_fault_enable:
            return tp.select_one(last_broker_name)
        ft = self.fault_tolerance
        n = len(tp.queues)
        index = tp.send_which_queue.increment_and_get()
        for _ in range(n):
            pos = (index & _POSITIVE_MASK) % n
            index += 1
            mq = tp.queues[pos]
            if ft.is_available(mq.broker_name):
                return mq
        not_best = ft.pick_one_at_least()
        write_queue_nums = tp.write_queue_nums(not_best) if not_best is not None else -1
        if write_queue_nums > 0:
            mq = tp.select_one()
            return MessageQueue(mq.topic, not_best, tp.send_which_queue.increment_and_get() % write_queue_nums)
        ft.remove(not_best)
        return tp.select_one()
