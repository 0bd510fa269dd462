"""VIEW_BROKER_STATS_DATA 315: per-topic put and per-group get counters over the last minute, hour
and day (what `mqadmin statsAll` and `exportMetrics` read).

`BrokerStatsManager` / `StatsItem` of the Java broker: an item (TOPIC_PUT_NUMS keyed by topic,
GROUP_GET_NUMS keyed by `topic@group`) adds up a value and a count of calls; snapshots are taken
every 10 s (7 kept: the minute), every 10 min (7 kept: the hour) and every hour (25 kept: the day),
and each window answers sum, TPS and average per call from its first and last snapshot.
"""

from __future__ import annotations

import collections
import threading
from typing import Any

from rmqtool.remoting import fastjson
from rmqtool.remoting.codes import ResponseCode
from rmqtool.remoting.command import RemotingCommand
from rmqtool.remoting.transport import Connection

TOPIC_PUT_NUMS = "TOPIC_PUT_NUMS"
GROUP_GET_NUMS = "GROUP_GET_NUMS"
# (sampling period ms, snapshots kept) of the minute, hour and day windows
WINDOWS = ((10_000, 7), (600_000, 7), (3_600_000, 25))


class StatsItem:
    def __init__(self, now_ms: int) -> None:
        self.value = 0
        self.times = 0
        self.windows = [collections.deque([(now_ms, 0, 0)], maxlen=keep) for _, keep in WINDOWS]
        self.last_sampled = [now_ms for _ in WINDOWS]

    def add(self, value: int, times: int = 1) -> None:
        self.value += value
        self.times += times

    def sample(self, now_ms: int) -> None:
        for i, (period, _) in enumerate(WINDOWS):
            if now_ms - self.last_sampled[i] >= period:
                self.windows[i].append((now_ms, self.value, self.times))
                self.last_sampled[i] = now_ms

    def snapshot(self, i: int) -> dict[str, Any]:
        """`computeStatsData` of one window (0.0 TPS while it has a single snapshot)."""
        w = self.windows[i]
        (t0, v0, n0), (t1, v1, n1) = w[0], w[-1]
        total, calls = v1 - v0, n1 - n0
        return fastjson.bean(avgpt=total / calls if calls > 0 else 0.0, sum=total,
                             tps=total * 1000.0 / (t1 - t0) if t1 > t0 else 0.0)


class BrokerStatsManager:
    def __init__(self, clock: Any) -> None:
        self.clock = clock
        self.items: dict[tuple[str, str], StatsItem] = {}
        self._lock = threading.Lock()
        # TOPIC_PUT_NUMS of sends, counted by the send handlers in place (messages and calls:
        # dict updates on the event loop's thread, no call on the request path) and added to
        # the items when they are sampled or read (`fold`, on the same thread)
        self.put_msgs: collections.defaultdict[str, int] = collections.defaultdict(int)
        self.put_calls: collections.defaultdict[str, int] = collections.defaultdict(int)

    def inc(self, name: str, key: str, value: int, times: int = 1) -> None:
        item = self.items.get((name, key))
        if item is None:
            with self._lock:
                item = self.items.setdefault((name, key), StatsItem(self.clock()))
        item.add(value, times)

    def fold(self) -> None:
        """The sends counted since the last fold, into their items, as `inc` would have counted them."""
        msgs, calls = self.put_msgs, self.put_calls
        if msgs:
            counted = [(topic, n, calls.get(topic, 0)) for topic, n in msgs.items()]
            msgs.clear()
            calls.clear()
            for topic, n, times in counted:
                self.inc(TOPIC_PUT_NUMS, topic, n, times)

    def sample(self) -> None:
        self.fold()
        now = self.clock()
        for item in list(self.items.values()):
            item.sample(now)


class BrokerStatsProcessor:
    @property
    def broker_stats(self: Any) -> BrokerStatsManager:
        bs = getattr(self, "_broker_stats", None)
        if bs is None:
            bs = self._broker_stats = BrokerStatsManager(self.clock)
        return bs

    def count_put(self: Any, topic: str, msgs: int) -> None:
        self.broker_stats.inc(TOPIC_PUT_NUMS, topic, msgs)

    def count_get(self: Any, topic: str, group: str, msgs: int) -> None:
        self.broker_stats.inc(GROUP_GET_NUMS, f"{topic}@{group}", msgs)

    async def process_view_broker_stats(self: Any, cmd: RemotingCommand, conn: Connection) -> RemotingCommand:
        ext = cmd.ext_fields or {}
        name, key = ext.get("statsName", ""), ext.get("statsKey", "")
        stats = self.broker_stats
        stats.fold()
        item = stats.items.get((name, key))
        if item is None:
            return cmd.response(ResponseCode.SYSTEM_ERROR, remark=f"The stats <{name}> <{key}> not exist")
        body = fastjson.bean(statsDay=item.snapshot(2), statsHour=item.snapshot(1), statsMinute=item.snapshot(0))
        return cmd.response(body=fastjson.dumpb(body))
