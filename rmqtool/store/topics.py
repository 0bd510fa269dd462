"""`config/topics.json`: the broker's topic table (`TopicConfigManager`, `TopicConfig`).

A 5.x broker starts with a set of system topics in memory (`TopicConfigManager.init`), loads the
file over them, and creates user topics on first send from `TBW102` when
`autoCreateTopicEnable` is on (`createTopicInSendMessageMethod`). Retry and DLQ topics are
created on send-back with 1 queue, perm 6 (`createTopicInSendMessageBackMethod`).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rmqtool.errors import InvalidTopic
from rmqtool.layouts.constants import (
    AUTO_CREATE_TOPIC_KEY,
    SCHEDULE_TOPIC,
    TIMER_TOPIC,
    TRANS_HALF_TOPIC,
    TRANS_OP_HALF_TOPIC,
)
from rmqtool.store.jsonconfig import Bean, ConfigManager, DataVersion, EntryCache

# PermName
PERM_PRIORITY = 0x8
PERM_READ = 0x4
PERM_WRITE = 0x2
PERM_INHERIT = 0x1

# TopicConfig.defaultReadQueueNums / defaultWriteQueueNums
DEFAULT_QUEUE_NUMS = 16
SCHEDULE_TOPIC_QUEUE_NUM = 18
REVIVE_QUEUE_NUM = 8  # BrokerConfig.reviveQueueNum
BENCHMARK_TOPIC = "BenchmarkTest"
SELF_TEST_TOPIC = "SELF_TEST_TOPIC"
OFFSET_MOVED_EVENT = "OFFSET_MOVED_EVENT"
# `new ConcurrentHashMap<>(1024)` has a table of 2048 buckets: the order fastjson writes it in.
_TABLE_BUCKETS = 2048


@dataclass
class TopicConfig:
    """`org.apache.rocketmq.common.TopicConfig`."""

    topic_name: str
    read_queue_nums: int = DEFAULT_QUEUE_NUMS
    write_queue_nums: int = DEFAULT_QUEUE_NUMS
    perm: int = PERM_READ | PERM_WRITE
    topic_filter_type: str = "SINGLE_TAG"
    topic_sys_flag: int = 0
    order: bool = False
    attributes: dict[str, str] = field(default_factory=dict)

    @property
    def readable(self) -> bool:
        return bool(self.perm & PERM_READ)

    @property
    def writeable(self) -> bool:
        return bool(self.perm & PERM_WRITE)

    def to_bean(self) -> Bean:
        return Bean(attributes=dict(self.attributes), order=self.order, perm=self.perm,
                    readQueueNums=self.read_queue_nums, topicFilterType=self.topic_filter_type,
                    topicName=self.topic_name, topicSysFlag=self.topic_sys_flag,
                    writeQueueNums=self.write_queue_nums)

    @classmethod
    def from_json(cls, name: str, data: dict[str, Any]) -> TopicConfig:
        return cls(
            topic_name=str(data.get("topicName") or name),
            read_queue_nums=int(data.get("readQueueNums", DEFAULT_QUEUE_NUMS)),
            write_queue_nums=int(data.get("writeQueueNums", DEFAULT_QUEUE_NUMS)),
            perm=int(data.get("perm", PERM_READ | PERM_WRITE)),
            topic_filter_type=str(data.get("topicFilterType", "SINGLE_TAG")),
            topic_sys_flag=int(data.get("topicSysFlag", 0)),
            order=bool(data.get("order", False)),
            attributes={str(k): str(v) for k, v in (data.get("attributes") or {}).items()},
        )


def system_topics(cluster: str, broker_name: str, default_queue_nums: int, auto_create: bool,
                  timer_wheel: bool = True) -> list[TopicConfig]:
    """The topics `TopicConfigManager.init` puts in the table, in its order."""
    out = [TopicConfig(SELF_TEST_TOPIC, 1, 1)]
    if auto_create:
        out.append(TopicConfig(AUTO_CREATE_TOPIC_KEY, default_queue_nums, default_queue_nums,
                               PERM_INHERIT | PERM_READ | PERM_WRITE))
    out += [
        TopicConfig(BENCHMARK_TOPIC, 1024, 1024),
        TopicConfig(cluster, perm=PERM_INHERIT | PERM_READ | PERM_WRITE),  # clusterTopicEnable
        TopicConfig(broker_name, 1, 1, PERM_INHERIT | PERM_READ | PERM_WRITE),  # brokerTopicEnable
        TopicConfig(OFFSET_MOVED_EVENT, 1, 1),
        TopicConfig(SCHEDULE_TOPIC, SCHEDULE_TOPIC_QUEUE_NUM, SCHEDULE_TOPIC_QUEUE_NUM),
        TopicConfig(f"{cluster}_REPLY_TOPIC", 1, 1),
        TopicConfig(f"rmq_sys_REVIVE_LOG_{cluster}", REVIVE_QUEUE_NUM, REVIVE_QUEUE_NUM),
        TopicConfig(f"rmq_sys_SYNC_BROKER_MEMBER_{broker_name}", 1, 1, PERM_INHERIT),
        TopicConfig(TRANS_HALF_TOPIC, 1, 1),
        TopicConfig(TRANS_OP_HALF_TOPIC, 1, 1),
    ]
    if timer_wheel:
        out.append(TopicConfig(TIMER_TOPIC, 1, 1))
    return out


class TopicConfigManager(ConfigManager):
    """`TopicConfigManager`: topic table + data version, persisted as `TopicConfigSerializeWrapper`."""

    file_name = "topics.json"
    durable_answer = True  # persisted in the request, as Java's manager is: the answer follows the write

    def __init__(self, config_dir: Path, *, cluster: str = "DefaultCluster", broker_name: str = "broker-a",
                 default_topic_queue_nums: int = 4, auto_create_topic_enable: bool = True,
                 timer_wheel_enable: bool = True, clock: Callable[[], int] | None = None) -> None:
        super().__init__(config_dir)
        self._texts = EntryCache(_TABLE_BUCKETS)  # the table's text as written last time
        self.clock = clock or (lambda: int(time.time() * 1000))
        self.default_topic_queue_nums = default_topic_queue_nums
        self.auto_create_topic_enable = auto_create_topic_enable
        self.data_version = DataVersion(timestamp=self.clock())
        self.table: dict[str, TopicConfig] = {}
        self._lock = threading.RLock()
        for tc in system_topics(cluster, broker_name, default_topic_queue_nums, auto_create_topic_enable,
                                timer_wheel_enable):
            self.table[tc.topic_name] = tc
        self.system_topic_names = set(self.table)

    # -- ConfigManager ---------------------------------------------------------------------------
    def encode(self) -> Any:
        return Bean(dataVersion=self.data_version.to_bean(),
                    topicConfigTable=self._texts.render(self.table, 2))

    def decode(self, data: Any) -> None:
        for name, tc in (data.get("topicConfigTable") or {}).items():
            if isinstance(tc, dict):
                self.table[name] = TopicConfig.from_json(name, tc)
        self.data_version = DataVersion.from_json(data.get("dataVersion"), self.clock())

    # -- lookups and creation --------------------------------------------------------------------
    def select(self, topic: str) -> TopicConfig | None:
        """`selectTopicConfig`."""
        return self.table.get(topic)

    def _put_new(self, tc: TopicConfig, persist: bool) -> TopicConfig:
        self.table[tc.topic_name] = tc
        self.data_version.next_version(self.clock())
        if persist:
            self.persist()
        return tc

    def create_in_send(self, topic: str, client_queue_nums: int | None = None, topic_sys_flag: int = 0,
                       *, persist: bool = True) -> TopicConfig:
        """`createTopicInSendMessageMethod` from TBW102: min(client's, TBW102's) queues, perm w/o inherit.

        Raises InvalidTopic ("not exist, apply first") when auto-creation is off, as the
        broker's TOPIC_NOT_EXIST answer.
        """
        with self._lock:
            tc = self.table.get(topic)
            if tc is not None:
                return tc
            default = self.table.get(AUTO_CREATE_TOPIC_KEY)
            if not self.auto_create_topic_enable or default is None or not default.perm & PERM_INHERIT:
                raise InvalidTopic(f"topic[{topic}] not exist, apply first please! (autoCreateTopicEnable is off)")
            n = max(0, min(client_queue_nums or self.default_topic_queue_nums, default.write_queue_nums))
            return self._put_new(TopicConfig(topic, n, n, default.perm & ~PERM_INHERIT,
                                             default.topic_filter_type, topic_sys_flag), persist)

    def create_in_send_back(self, topic: str, queue_nums: int = 1, perm: int = PERM_READ | PERM_WRITE,
                            topic_sys_flag: int = 0, *, persist: bool = True) -> TopicConfig:
        """`createTopicInSendMessageBackMethod`: retry (`retryQueueNums`) and DLQ (1) topics."""
        with self._lock:
            tc = self.table.get(topic)
            if tc is not None:
                return tc
            return self._put_new(TopicConfig(topic, queue_nums, queue_nums, perm, topic_sys_flag=topic_sys_flag),
                                 persist)

    def create_if_absent(self, tc: TopicConfig, *, persist: bool = True) -> TopicConfig:
        """`createTopicIfAbsent` (admin create / update)."""
        with self._lock:
            return self.table.get(tc.topic_name) or self._put_new(tc, persist)

    def update(self, tc: TopicConfig, *, persist: bool = True) -> None:
        """`updateTopicConfig`: replace and bump the data version."""
        with self._lock:
            self._put_new(tc, persist)

    def delete(self, topic: str, *, persist: bool = True) -> bool:
        with self._lock:
            if self.table.pop(topic, None) is None:
                return False
            self.data_version.next_version(self.clock())
            if persist:
                self.persist()
            return True

    def assign_from_master(self, table: dict[str, TopicConfig], data_version: DataVersion) -> None:
        """A slave takes its master's whole table and DataVersion (SlaveSynchronize.syncTopicConfig)."""
        with self._lock:
            self.table.clear()
            self.table.update(table)
            self.data_version = data_version
        self.persist()
