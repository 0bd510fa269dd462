"""Store configuration: the subset of RocketMQ's MessageStoreConfig/BrokerConfig rmqtool uses.

Attribute names are the Java ones in snake_case so a `broker.conf` maps onto them mechanically;
`from_properties` does that mapping and keeps keys it does not know in `.extra`, so a real
broker's configuration can be passed through without being rejected.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass, field
from pathlib import Path

from rmqtool.errors import InvalidInput

BROKER_ROLES = ("ASYNC_MASTER", "SYNC_MASTER", "SLAVE")


@dataclass
class StoreConfig:
    """MessageStoreConfig / BrokerConfig values, RocketMQ 5.x defaults."""

    store_path_root_dir: Path = field(default_factory=lambda: Path.home() / "store")
    mapped_file_size_commit_log: int = 1073741824
    mapped_file_size_consume_queue: int = 6000000
    flush_disk_type: str = "ASYNC_FLUSH"
    file_reserved_time: int = 72
    delete_when: str = "04"
    disk_max_used_space_ratio: int = 75
    disk_space_clean_forcibly_ratio: int = 85
    disk_space_warning_level_ratio: int = 90
    delete_file_batch_max: int = 10
    clean_resource_interval: int = 10000
    clean_file_forcibly_enable: bool = True
    max_message_size: int = 4194304
    message_index_enable: bool = True
    max_hash_slot_num: int = 5000000
    max_index_num: int = 20000000
    check_crc_on_recover: bool = True
    broker_cluster_name: str = "DefaultCluster"
    broker_name: str = "broker-a"
    broker_ip1: str = "127.0.0.1"
    listen_port: int = 10911
    default_topic_queue_nums: int = 4
    auto_create_topic_enable: bool = True
    message_delay_level: str = "1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h"
    timer_precision_ms: int = 1000
    timer_max_delay_sec: int = 259200
    timer_roll_window_slot: int = 172800
    mapped_file_size_timer_log: int = 104857600
    timer_wheel_enable: bool = True
    flush_delay_offset_interval: int = 10000
    # classic master/slave replication (store/ha/): MessageStoreConfig's HA keys, 5.x defaults;
    # ha_listen_port 0 means listenPort + 1, as BrokerStartup derives it
    broker_role: str = "ASYNC_MASTER"
    ha_listen_port: int = 0
    ha_master_address: str = ""
    in_sync_replicas: int = 1
    ha_send_heartbeat_interval: int = 5000
    ha_housekeeping_interval: int = 20000
    ha_transfer_batch_size: int = 32768
    ha_max_gap_not_in_sync: int = 268435456
    slave_timeout: int = 3000
    # rmqtool-specific knobs (no RocketMQ equivalent): async flush period and sync flush timeout
    flush_interval_commit_log: int = 500
    sync_flush_timeout: int = 5000
    extra: dict[str, str] = field(default_factory=dict)

    @classmethod
    def from_properties(cls, props: dict[str, str], base: StoreConfig | None = None) -> StoreConfig:
        """Apply broker.conf-style camelCase keys (`storePathRootDir`, `brokerIP1`, ...) onto `base`."""
        cfg = dataclasses.replace(base) if base is not None else cls()
        cfg.extra = dict(cfg.extra)
        types = {f.name: f.type for f in dataclasses.fields(cls)}
        for key, raw in props.items():
            name = _JAVA_TO_FIELD.get(key)
            if name is None:
                cfg.extra[key] = raw
                continue
            try:
                converted = property_value(types[name], raw)
            except ValueError:
                raise InvalidInput(f"config {key}={raw!r}: not a number") from None
            setattr(cfg, name, converted)
        role = cfg.broker_role.strip().upper()
        if role not in BROKER_ROLES:
            raise InvalidInput(f"config brokerRole={cfg.broker_role!r}: expected one of {', '.join(BROKER_ROLES)}")
        cfg.broker_role = role
        return cfg

    @property
    def is_slave(self) -> bool:
        return self.broker_role.upper() == "SLAVE"

    @property
    def ha_port(self) -> int:
        """haListenPort, or listenPort + 1 when it is not set."""
        return self.ha_listen_port or self.listen_port + 1

    @property
    def store_host(self) -> tuple[str, int]:
        return (self.broker_ip1, self.listen_port)


def java_property_name(name: str) -> str:
    """A config field's name as Java's BrokerConfig / MessageStoreConfig / ProxyConfig spell it
    (`max_message_size` -> `maxMessageSize`), the key MixAll.properties2Object matches."""
    head, *rest = name.split("_")
    return head + "".join(part[:1].upper() + part[1:] for part in rest)


def property_value(kind: object, raw: str) -> object:
    """A properties-file value as the field's type (`properties2Object`'s conversions); ValueError
    for a number that does not parse. `kind` is the dataclass field's type (or its name)."""
    value = raw.strip()
    if kind in ("int", int):
        return int(value)
    if kind in ("bool", bool):
        return value.lower() == "true"
    if kind in ("Path", Path):
        return Path(value)
    return value


_SPECIAL = {"broker_ip1": "brokerIP1", "check_crc_on_recover": "checkCRCOnRecover"}
_JAVA_TO_FIELD = {
    _SPECIAL.get(f.name, java_property_name(f.name)): f.name for f in dataclasses.fields(StoreConfig) if f.name != "extra"
}

_UNIT_MS = {"s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}
_LEVEL = re.compile(r"^(\d+)([smhd])$")


def parse_delay_levels(text: str) -> list[int]:
    """`messageDelayLevel` -> delay in ms per level (index 0 = level 1), as ScheduleMessageService.parseDelayLevel."""
    out = []
    for token in text.split():
        m = _LEVEL.match(token)
        if not m:
            raise InvalidInput(f"messageDelayLevel token {token!r}: expected <number><s|m|h|d>")
        out.append(int(m.group(1)) * _UNIT_MS[m.group(2)])
    return out
