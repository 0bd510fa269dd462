"""`config/consumerOffset.json`: committed consumer offsets (`ConsumerOffsetManager`).

Key `topic@group`, inner map queueId -> the **next** offset to consume. 5.x writes
`dataVersion`, the derived `groupTopicMap` (ignored on load) and `offsetTable`.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from rmqtool.layouts.javahash import hashmap_order
from rmqtool.store.jsonconfig import Bean, ConfigManager, DataVersion, int_keys

TOPIC_GROUP_SEPARATOR = "@"
# `new ConcurrentHashMap<>(512)` -> 1024 buckets; getGroupTopicMap's HashMap(128), HashSet(8).
_TABLE_BUCKETS = 1024
# ConsumerOffsetManager bumps the data version every consumerOffsetUpdateVersionStep commits.
CONSUMER_OFFSET_UPDATE_VERSION_STEP = 500


class ConsumerOffsetManager(ConfigManager):
    """Offsets per `topic@group` and queue; `query_offset` answers -1 when none was committed."""

    file_name = "consumerOffset.json"

    def __init__(self, config_dir: Path, *, clock: Callable[[], int] | None = None) -> None:
        super().__init__(config_dir)
        self.clock = clock or (lambda: int(time.time() * 1000))
        self.data_version = DataVersion(timestamp=self.clock())
        self.offset_table: dict[str, dict[int, int]] = {}
        self._lock = threading.Lock()
        self._changes = 0
        self.dirty = False

    def encode(self) -> Any:
        # only the copy under the lock: the config writer's thread orders and copies the
        # entries (milliseconds for 1000 groups) while commit_offset, on the event loop, goes on;
        # each queue map is copied whole at once (a C-level copy, under the GIL)
        with self._lock:
            entries = dict(self.offset_table)
        table = {k: dict(sorted(entries[k].items())) for k in hashmap_order(list(entries), _TABLE_BUCKETS)}
        return Bean(dataVersion=self.data_version.to_bean(), groupTopicMap=self.group_topic_map(),
                    offsetTable=table)

    def decode(self, data: Any) -> None:
        with self._lock:
            for key, queues in (data.get("offsetTable") or {}).items():
                if isinstance(queues, dict):
                    self.offset_table[key] = {q: int(v) for q, v in int_keys(queues).items()}
            self.data_version = DataVersion.from_json(data.get("dataVersion"), self.clock())

    def group_topic_map(self) -> dict[str, list[str]]:
        """`getGroupTopicMap`: group -> topics, in Java HashMap/HashSet iteration order."""
        groups: dict[str, list[str]] = {}
        for key in hashmap_order(list(self.offset_table), _TABLE_BUCKETS):
            parts = key.split(TOPIC_GROUP_SEPARATOR)
            if len(parts) == 2:
                topics = groups.setdefault(parts[1], [])
                if parts[0] not in topics:
                    topics.append(parts[0])
        return {g: hashmap_order(groups[g], 8) for g in hashmap_order(list(groups), 128)}

    def commit_offset(self, group: str, topic: str, queue_id: int, offset: int) -> None:
        """`commitOffset`: remember the next offset to consume (also when it goes backwards)."""
        key = f"{topic}{TOPIC_GROUP_SEPARATOR}{group}"
        with self._lock:
            self.offset_table.setdefault(key, {})[queue_id] = offset
            self._changes += 1
            self.dirty = True
            if self._changes % CONSUMER_OFFSET_UPDATE_VERSION_STEP == 0:
                self.data_version.next_version(self.clock())

    def query_offset(self, group: str, topic: str, queue_id: int) -> int:
        """`queryOffset`: the committed next offset, or -1."""
        queues = self.offset_table.get(f"{topic}{TOPIC_GROUP_SEPARATOR}{group}")
        if queues is None:
            return -1
        return queues.get(queue_id, -1)

    def query_offsets(self, group: str, topic: str) -> dict[int, int]:
        return dict(self.offset_table.get(f"{topic}{TOPIC_GROUP_SEPARATOR}{group}", {}))

    def which_topic_by_consumer(self, group: str) -> set[str]:
        return {k.split(TOPIC_GROUP_SEPARATOR)[0] for k in self.offset_table
                if k.split(TOPIC_GROUP_SEPARATOR)[-1] == group}

    def remove_offset(self, group: str) -> None:
        with self._lock:
            for key in [k for k in self.offset_table if k.split(TOPIC_GROUP_SEPARATOR)[-1] == group]:
                del self.offset_table[key]
            self.dirty = True

    def clean_offset_by_topic(self, topic: str) -> None:
        """`cleanOffsetByTopic`: every group's offsets of `topic` (a deleted topic)."""
        with self._lock:
            for key in [k for k in self.offset_table if k.split(TOPIC_GROUP_SEPARATOR)[0] == topic]:
                del self.offset_table[key]
            self.dirty = True

    def persist(self) -> None:
        super().persist()
        self.dirty = False

    def put_all_from_master(self, table: dict[str, dict[int, int]], data_version: DataVersion) -> None:
        """A slave merges its master's offsets over its own (`offsetTable.putAll`) and takes the
        master's DataVersion (SlaveSynchronize.syncConsumerOffset)."""
        with self._lock:
            self.offset_table.update(table)
            self.data_version = data_version
            self.dirty = True
        self.persist()
