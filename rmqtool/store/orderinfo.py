"""Orderly POP: `ConsumerOrderInfoManager` and its `OrderInfo`.

An orderly pop writes no checkpoint (its receipt handles carry revive queue 999); instead the
broker remembers, per topic@group and queue, which offsets the last pop handed out, when, and
which of them were acked. The queue stays blocked for other pops until every one is acked or
its invisible time ran out; the consumer offset moves only on acks (`commitAndNext`). A message
handed out again counts one more consume (`offsetConsumedCount`), which the client sees as its
reconsume times. Kept in config/consumerOrderInfo.json, as Java keeps it.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from rmqtool.layouts.pop import retry_flag
from rmqtool.store.jsonconfig import Bean, dumps, read_file, write_file


@dataclass
class OrderInfo:
    pop_time: int
    invisible_time: int | None
    offset_list: list[int]  # [first offset, then each one's distance from it]
    last_consume_timestamp: int = 0
    commit_offset_bit: int = 0
    attempt_id: str | None = None
    offset_next_visible_time: dict[int, int] | None = None
    offset_consumed_count: dict[int, int] = field(default_factory=dict)

    @staticmethod
    def build_offset_list(queue_offsets: list[int]) -> list[int]:
        if len(queue_offsets) == 1:
            return list(queue_offsets)
        first = queue_offsets[0]
        return [first] + [o - first for o in queue_offsets[1:]]

    def queue_offset(self, index: int) -> int:
        return self.offset_list[0] if index == 0 else self.offset_list[0] + self.offset_list[index]

    def queue_offsets(self) -> list[int]:
        return [self.queue_offset(i) for i in range(len(self.offset_list))]

    def is_not_ack(self, index: int) -> bool:
        return not self.commit_offset_bit >> index & 1

    def need_block(self, attempt_id: str | None, invisible_time: int, now_ms: int) -> bool:
        if not self.offset_list:
            return False
        if self.attempt_id is not None and self.attempt_id == attempt_id:
            return False
        if self.invisible_time is None or self.invisible_time <= 0:
            self.invisible_time = invisible_time
        for i in range(len(self.offset_list)):
            if self.is_not_ack(i):
                visible = self.pop_time + self.invisible_time
                if self.offset_next_visible_time:
                    visible = self.offset_next_visible_time.get(self.queue_offset(i), visible)
                if now_ms < visible:
                    return True
        return False

    def next_offset(self) -> int:
        if not self.offset_list:
            return -2
        for i in range(len(self.offset_list)):
            if self.is_not_ack(i):
                return self.queue_offset(i)
        return self.queue_offset(len(self.offset_list) - 1) + 1

    def merge_consumed_count(self, prev: OrderInfo) -> None:
        if prev.attempt_id is not None and prev.attempt_id == self.attempt_id:
            self.offset_consumed_count = dict(prev.offset_consumed_count)
            return
        before = set(prev.queue_offsets())
        self.offset_consumed_count = {o: prev.offset_consumed_count.get(o, 0) + 1
                                      for o in self.queue_offsets() if o in before}

    def to_bean(self) -> Bean:
        """fastjson's view of Java's OrderInfo: JSON names, nulls left out, Long-keyed maps unquoted."""
        return Bean(a=self.attempt_id, cm=self.commit_offset_bit, i=self.invisible_time,
                    l=self.last_consume_timestamp, o=list(self.offset_list), popTime=self.pop_time,
                    oc=dict(sorted(self.offset_consumed_count.items())) or None,
                    ot=dict(sorted(self.offset_next_visible_time.items())) if self.offset_next_visible_time else None)

    @classmethod
    def from_json_obj(cls, d: dict) -> OrderInfo:
        return cls(pop_time=int(d.get("popTime", 0)), invisible_time=d.get("i"),
                   offset_list=[int(x) for x in d.get("o") or []], last_consume_timestamp=int(d.get("l", 0)),
                   commit_offset_bit=int(d.get("cm", 0)), attempt_id=d.get("a"),
                   offset_next_visible_time={int(k): int(v) for k, v in (d.get("ot") or {}).items()} or None,
                   offset_consumed_count={int(k): int(v) for k, v in (d.get("oc") or {}).items()})


class ConsumerOrderInfoManager:
    """`ConsumerOrderInfoManager`: OrderInfo per topic@group and queue, persisted as JSON."""

    def __init__(self, config_dir: Path | None, clock: Callable[[], int]) -> None:
        self.path = config_dir / "consumerOrderInfo.json" if config_dir is not None else None
        self.clock = clock
        self.table: dict[str, dict[int, OrderInfo]] = {}
        self._lock = threading.Lock()
        self.dirty = False

    @staticmethod
    def key(topic: str, group: str) -> str:
        return f"{topic}@{group}"

    def load(self) -> None:
        """The file as Java's broker or we wrote it (fastjson: unquoted Integer keys), else its `.bak`."""
        if self.path is None:
            return
        data = read_file(self.path)
        try:
            table = (data or {}).get("table") or {}
            self.table = {k: {int(q): OrderInfo.from_json_obj(v) for q, v in qs.items()} for k, qs in table.items()}
        except (ValueError, TypeError, AttributeError):
            self.table = {}  # an unreadable file only loses the blocks, as Java's decode failure does

    def persist(self) -> None:
        """`ConfigManager.persist`: fastjson pretty text of {"table": ...}, the old file kept as `.bak`."""
        if self.path is None or not self.dirty:
            return
        with self._lock:
            data = Bean(table={k: {q: oi.to_bean() for q, oi in sorted(qs.items())}
                               for k, qs in self.table.items() if qs})
            self.dirty = False
        write_file(self.path, dumps(data))

    def get(self, topic: str, group: str, queue_id: int) -> OrderInfo | None:
        return self.table.get(self.key(topic, group), {}).get(queue_id)

    def check_block(self, attempt_id: str | None, topic: str, group: str, queue_id: int, invisible_time: int,
                    now_ms: int | None = None) -> bool:
        oi = self.get(topic, group, queue_id)
        if oi is None:
            return False
        return oi.need_block(attempt_id, invisible_time, self.clock() if now_ms is None else now_ms)

    def update(self, attempt_id: str | None, is_retry: bool, topic: str, group: str, queue_id: int, pop_time: int,
               invisible_time: int, queue_offsets: list[int], order_count_info: list[str] | None = None) -> int:
        """Record what an orderly pop handed out; returns the least consume count of those messages
        (the queue entry of orderCountInfo) and appends the per-offset entries to `order_count_info`."""
        with self._lock:
            qs = self.table.setdefault(self.key(topic, group), {})
            new = OrderInfo(pop_time, invisible_time, OrderInfo.build_offset_list(queue_offsets), self.clock(), 0,
                            attempt_id)
            old = qs.get(queue_id)
            if old is not None:
                new.merge_consumed_count(old)
            qs[queue_id] = new
            self.dirty = True
        counts = new.offset_consumed_count
        if order_count_info is not None:
            flag = retry_flag(topic)
            for off, times in counts.items():
                order_count_info.append(f"{flag} qo{queue_id}%{off} {times}")
        if not counts or len(counts) != len(new.offset_list):
            return 0
        return min(counts.values())

    def commit_and_next(self, topic: str, group: str, queue_id: int, queue_offset: int, pop_time: int) -> int:
        """`commitAndNext`: the consumer offset after acking `queue_offset`; -1 unknown offset, -2 stale pop."""
        with self._lock:
            oi = self.get(topic, group, queue_id)
            if oi is None:
                return queue_offset + 1
            if not oi.offset_list:
                return -1
            if pop_time != oi.pop_time:
                return -2
            try:
                i = oi.queue_offsets().index(queue_offset)
            except ValueError:
                return -1
            oi.commit_offset_bit |= 1 << i
            self.dirty = True
            return oi.next_offset()

    def update_next_visible_time(self, topic: str, group: str, queue_id: int, queue_offset: int, pop_time: int,
                                 next_visible_time: int) -> None:
        with self._lock:
            oi = self.get(topic, group, queue_id)
            if oi is None or pop_time != oi.pop_time:
                return
            if oi.offset_next_visible_time is None:
                oi.offset_next_visible_time = {}
            oi.offset_next_visible_time[queue_offset] = next_visible_time
            self.dirty = True

    def clear_block(self, topic: str, group: str, queue_id: int) -> None:
        with self._lock:
            self.table.get(self.key(topic, group), {}).pop(queue_id, None)
            self.dirty = True
