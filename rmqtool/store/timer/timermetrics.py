"""`config/timermetrics`: how many timer messages wait, per real topic (formats.md §5.6).

RocketMQ's `TimerMetrics`: +1 when a unit goes into the TimerLog (`doEnqueue`), -1 for a delete
marker, -1 when a message is taken out for its put (`TimerDequeuePutMessageService`), rolled or
not; messages that were due on arrival (TIMER_ENQUEUE_MS = Long.MAX_VALUE) never count. The
broker persists it with every timer flush, as fastjson's compact `BrowserCompatible` text:
`{"dataVersion":{...},"timingCount":{"<topic>":{"count":C,"timeStamp":T},...}}`, topics in the
iteration order of the `ConcurrentHashMap(1024)` that holds them. `mqadmin` and the broker's
metrics read it; so does `inspect config`.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from rmqtool.errors import StoreError
from rmqtool.layouts.javahash import java_string_hash
from rmqtool.store.jsonconfig import DataVersion, read_file, write_file
from rmqtool.store.jsonconfig import _string as fastjson_string

FILE_NAME = "timermetrics"
_TABLE_SIZE = 2048  # ConcurrentHashMap(1024): tableSizeFor(1024 + 512 + 1)


def concurrent_hash_map_order(keys: list[str], table_size: int = _TABLE_SIZE) -> list[str]:
    """String keys in the order a Java `ConcurrentHashMap` of `table_size` buckets iterates them.

    Bucket = `spread(hashCode) & (n - 1)`; keys sharing a bucket keep their insertion order.
    """
    while len(keys) > table_size * 3 // 4:  # the table doubles past its load factor
        table_size *= 2

    def bucket(key: str) -> int:
        h = java_string_hash(key) & 0xFFFFFFFF
        return ((h ^ (h >> 16)) & 0x7FFFFFFF) & (table_size - 1)

    return [k for _, _, k in sorted((bucket(k), i, k) for i, k in enumerate(keys))]


def _compact(value: Any) -> str:
    """fastjson compact text for the shapes used here: string-keyed maps of maps and integers."""
    if isinstance(value, dict):
        return "{" + ",".join(f"{fastjson_string(k)}:{_compact(v)}" for k, v in value.items()) + "}"
    return str(int(value))


class TimerMetrics:
    """The per-topic counts of waiting timer messages, with the file they live in."""

    def __init__(self, config_dir: Path, *, read_only: bool = False) -> None:
        self.path = Path(config_dir) / FILE_NAME
        self.read_only = read_only
        self.timing_count: dict[str, list[int]] = {}  # topic -> [count, timeStamp]
        self.data_version = DataVersion()
        self._dirty = False

    def load(self) -> bool:
        """`ConfigManager.load`: the file, else its `.bak`; False when neither parses."""
        data = read_file(self.path)
        if not isinstance(data, dict):
            return False
        table = data.get("timingCount")
        for topic, metric in (table.items() if isinstance(table, dict) else ()):
            if isinstance(metric, dict):
                try:
                    self.timing_count[str(topic)] = [int(metric.get("count", 0)), int(metric.get("timeStamp", 0))]
                except (TypeError, ValueError):
                    continue
        self.data_version = DataVersion.from_json(data.get("dataVersion"))
        return True

    def assign_from_master(self, data: dict[str, Any]) -> bool:
        """SlaveSynchronize.syncTimerMetrics: the master's table (its TimerMetricsSerializeWrapper
        JSON) replaces ours when its DataVersion differs, with that version; persisted. True if taken."""
        version = DataVersion.from_json(data.get("dataVersion"))
        ours = self.data_version
        if (ours.counter, ours.timestamp, ours.state_version) == (version.counter, version.timestamp,
                                                                  version.state_version):
            return False
        table: dict[str, list[int]] = {}
        for topic, metric in (data.get("timingCount") or {}).items():
            if isinstance(metric, dict):
                table[str(topic)] = [int(metric.get("count", 0)), int(metric.get("timeStamp", 0))]
        self.data_version = version
        self.timing_count = table
        self._dirty = True
        self.persist()
        return True

    def add(self, topic: str | None, value: int, now_ms: int) -> None:
        """`addAndGet`: count `value` more (or fewer) messages waiting for `topic`."""
        if not topic:
            return
        pair = self.timing_count.get(topic)
        if pair is None:
            pair = self.timing_count[topic] = [0, now_ms]
        self.data_version.next_version(now_ms)
        pair[0] += value
        pair[1] = now_ms
        self._dirty = True

    def count(self, topic: str) -> int:
        """`getTimingCount(topic)`."""
        pair = self.timing_count.get(topic)
        return pair[0] if pair else 0

    def to_text(self) -> str:
        dv = self.data_version
        table = {t: {"count": self.timing_count[t][0], "timeStamp": self.timing_count[t][1]}
                 for t in concurrent_hash_map_order(list(self.timing_count))}
        return _compact({"dataVersion": {"counter": dv.counter, "stateVersion": dv.state_version,
                                         "timestamp": dv.timestamp},
                         "timingCount": table})

    def persist(self) -> None:
        """Write the file (old one kept as `.bak`) when anything changed since the last write."""
        if self.read_only or not self._dirty:
            return
        try:
            write_file(self.path, self.to_text())
        except StoreError as e:  # a full disk: kept dirty, written by a later flush
            if not getattr(self, "_persist_failed", False):
                logging.getLogger(__name__).warning("%s; timer metrics are written when the disk lets it", e)
            self._persist_failed = True
            return
        self._persist_failed = False
        self._dirty = False
