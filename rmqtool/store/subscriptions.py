"""`config/subscriptionGroup.json`: consumer group settings (`SubscriptionGroupManager`).

Groups are auto-created on first use (`autoCreateSubscriptionGroup`, default on) with
RocketMQ 5.x defaults: `retryMaxTimes` 16, `retryQueueNums` 1, CUSTOMIZED retry policy.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rmqtool.store.jsonconfig import Bean, ConfigManager, DataVersion, EntryCache
from rmqtool.validators import check_group

# Groups `SubscriptionGroupManager.init` creates (MixAll names).
SYSTEM_GROUPS = ("TOOLS_CONSUMER", "FILTERSRV_CONSUMER", "SELF_TEST_C_GROUP", "CID_ONS-HTTP-PROXY",
                 "CID_ONSAPI_PULL", "CID_ONSAPI_PERMISSION", "CID_ONSAPI_OWNER", "CID_RMQ_SYS_TRANS")
_TABLE_BUCKETS = 2048  # ConcurrentHashMap(1024)


@dataclass
class SubscriptionGroupConfig:
    """`SubscriptionGroupConfig` (5.x fields)."""

    group_name: str
    consume_enable: bool = True
    consume_from_min_enable: bool = True
    consume_broadcast_enable: bool = True
    consume_message_orderly: bool = False
    retry_queue_nums: int = 1
    retry_max_times: int = 16
    group_retry_policy: dict[str, Any] = field(default_factory=lambda: {"type": "CUSTOMIZED"})
    broker_id: int = 0
    which_broker_when_consume_slowly: int = 1
    notify_consumer_ids_changed_enable: bool = True
    group_sys_flag: int = 0
    consume_timeout_minute: int = 15
    attributes: dict[str, str] = field(default_factory=dict)

    _JSON = {
        "groupName": "group_name", "consumeEnable": "consume_enable",
        "consumeFromMinEnable": "consume_from_min_enable", "consumeBroadcastEnable": "consume_broadcast_enable",
        "consumeMessageOrderly": "consume_message_orderly", "retryQueueNums": "retry_queue_nums",
        "retryMaxTimes": "retry_max_times", "groupRetryPolicy": "group_retry_policy", "brokerId": "broker_id",
        "whichBrokerWhenConsumeSlowly": "which_broker_when_consume_slowly",
        "notifyConsumerIdsChangedEnable": "notify_consumer_ids_changed_enable", "groupSysFlag": "group_sys_flag",
        "consumeTimeoutMinute": "consume_timeout_minute", "attributes": "attributes",
    }

    def to_bean(self) -> Bean:
        bean = Bean({j: getattr(self, a) for j, a in self._JSON.items()})
        bean["groupRetryPolicy"] = Bean(self.group_retry_policy)
        return bean

    @classmethod
    def from_json(cls, name: str, data: dict[str, Any]) -> SubscriptionGroupConfig:
        cfg = cls(group_name=str(data.get("groupName") or name))
        for j, a in cls._JSON.items():
            if j in data and data[j] is not None and j != "groupName":
                default = getattr(cfg, a)
                value = data[j]
                setattr(cfg, a, type(default)(value) if isinstance(default, (bool, int)) else value)
        return cfg


class SubscriptionGroupManager(ConfigManager):
    """Group table + `forbiddenTable` + data version."""

    file_name = "subscriptionGroup.json"
    durable_answer = True  # persisted in the request, as Java's manager is: the answer follows the write

    def __init__(self, config_dir: Path, *, auto_create_subscription_group: bool = True,
                 clock: Callable[[], int] | None = None) -> None:
        super().__init__(config_dir)
        self._texts = EntryCache(_TABLE_BUCKETS)  # the table's text as written last time
        self.clock = clock or (lambda: int(time.time() * 1000))
        self.auto_create = auto_create_subscription_group
        self.data_version = DataVersion(timestamp=self.clock())
        self.table: dict[str, SubscriptionGroupConfig] = {g: SubscriptionGroupConfig(g) for g in SYSTEM_GROUPS}
        self.forbidden_table: dict[str, dict[str, int]] = {}
        self._lock = threading.Lock()

    def encode(self) -> Any:
        return Bean(dataVersion=self.data_version.to_bean(), forbiddenTable=dict(self.forbidden_table),
                    subscriptionGroupTable=self._texts.render(self.table, 2))

    def decode(self, data: Any) -> None:
        for name, cfg in (data.get("subscriptionGroupTable") or {}).items():
            if isinstance(cfg, dict):
                self.table[name] = SubscriptionGroupConfig.from_json(name, cfg)
        forbidden = data.get("forbiddenTable") or {}
        self.forbidden_table = {g: {t: int(v) for t, v in m.items()} for g, m in forbidden.items()
                                if isinstance(m, dict)}
        self.data_version = DataVersion.from_json(data.get("dataVersion"), self.clock())

    def find(self, group: str, *, persist: bool = True) -> SubscriptionGroupConfig | None:
        """`findSubscriptionGroupConfig`: auto-creates a valid group when allowed."""
        cfg = self.table.get(group)
        if cfg is not None or not self.auto_create:
            return cfg
        check_group(group)
        with self._lock:
            cfg = self.table.setdefault(group, SubscriptionGroupConfig(group))
            self.data_version.next_version(self.clock())
        if persist:
            self.persist()
        return cfg

    def update(self, cfg: SubscriptionGroupConfig, *, persist: bool = True) -> None:
        with self._lock:
            self.table[cfg.group_name] = cfg
            self.data_version.next_version(self.clock())
        if persist:
            self.persist()

    def assign_from_master(self, table: dict[str, SubscriptionGroupConfig], data_version: DataVersion) -> None:
        """A slave takes its master's groups and DataVersion (SlaveSynchronize.syncSubscriptionGroupConfig)."""
        with self._lock:
            self.table.clear()
            self.table.update(table)
            self.data_version = data_version
        self.persist()

    def delete(self, group: str, *, persist: bool = True) -> bool:
        """`deleteSubscriptionGroupConfig`: False when there was no such group."""
        with self._lock:
            if self.table.pop(group, None) is None:
                return False
            self.data_version.next_version(self.clock())
        if persist:
            self.persist()
        return True
