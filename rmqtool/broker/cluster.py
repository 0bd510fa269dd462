"""A broker's place in its cluster: id, role, addresses, slave reads (BrokerConfig / MessageStoreConfig).

RocketMQ splits these keys between `BrokerConfig` (brokerId, brokerIP1/2, slaveReadEnable) and
`MessageStoreConfig` (brokerRole, haListenPort, haMasterAddress, accessMessageInMemoryMaxRatio).
They are read here from the store configuration: from its attribute when the store declares one
(the HA engine declares its own keys), else from the broker.conf keys it keeps in `extra`, so the
broker and the store agree on one value whichever module parses it.

As in Java, the role decides the id's meaning only by convention: a SLAVE with brokerId 0 is
refused (`BrokerStartup` exits: "Slave's brokerId must be > 0"), a master's id is forced to 0
(`BrokerStartup`'s `case ASYNC_MASTER/SYNC_MASTER: brokerConfig.setBrokerId(MASTER_ID)`).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from rmqtool.errors import InvalidInput

MASTER_ID = 0
ROLES = ("ASYNC_MASTER", "SYNC_MASTER", "SLAVE")
HA_ADDRESS_MIN_LENGTH = 6  # BrokerController.HA_ADDRESS_MIN_LENGTH


def _value(config: Any, attr: str, key: str) -> Any:
    v = getattr(config, attr, None)
    if v is None:
        v = (getattr(config, "extra", None) or {}).get(key)
    return v


def _int(config: Any, attr: str, key: str, default: int) -> int:
    v = _value(config, attr, key)
    if v is None or v == "":
        return default
    try:
        return int(str(v).strip())
    except ValueError:
        raise InvalidInput(f"config {key}={v!r}: not a number") from None


def _bool(config: Any, attr: str, key: str, default: bool) -> bool:
    v = _value(config, attr, key)
    if v is None:
        return default
    return v if isinstance(v, bool) else str(v).strip().lower() == "true"


def total_physical_memory() -> int:
    """`StoreUtil.TOTAL_PHYSICAL_MEMORY_SIZE`: the machine's RAM in bytes (24 GiB when unknown, as Java)."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return 24 * 1024 * 1024 * 1024


@dataclass
class ClusterSettings:
    broker_id: int = MASTER_ID
    broker_role: str = "ASYNC_MASTER"
    broker_ip1: str = "127.0.0.1"
    broker_ip2: str = "127.0.0.1"
    ha_listen_port: int | None = None  # None: listenPort + 1
    ha_master_address: str | None = None
    slave_read_enable: bool = False  # BrokerConfig's default
    access_message_in_memory_max_ratio: int = 40  # MessageStoreConfig's default

    @classmethod
    def from_config(cls, config: Any) -> ClusterSettings:
        role = str(_value(config, "broker_role", "brokerRole") or "ASYNC_MASTER").strip().upper()
        if role not in ROLES:
            raise InvalidInput(f"config brokerRole={role!r}: expected one of {', '.join(ROLES)}")
        broker_id = _int(config, "broker_id", "brokerId", MASTER_ID)
        if role == "SLAVE" and broker_id <= 0:
            raise InvalidInput("config brokerId: Slave's brokerId must be > 0")
        if role != "SLAVE":
            broker_id = MASTER_ID
        ip1 = str(getattr(config, "broker_ip1", None) or "127.0.0.1")
        ip2 = str(_value(config, "broker_ip2", "brokerIP2") or ip1).strip()
        ha_port = _value(config, "ha_listen_port", "haListenPort")
        ha_master = _value(config, "ha_master_address", "haMasterAddress")
        ratio = _int(config, "access_message_in_memory_max_ratio", "accessMessageInMemoryMaxRatio", 40)
        if not 0 <= ratio <= 100:
            raise InvalidInput(f"config accessMessageInMemoryMaxRatio={ratio}: expected 0..100")
        return cls(broker_id, role, ip1, ip2,
                   int(ha_port) if ha_port not in (None, "") else None,
                   str(ha_master).strip() or None if ha_master is not None else None,
                   _bool(config, "slave_read_enable", "slaveReadEnable", False), ratio)

    @property
    def is_slave(self) -> bool:
        return self.broker_role == "SLAVE"

    def ha_port(self, listen_port: int) -> int:
        return self.ha_listen_port if self.ha_listen_port else listen_port + 1

    def ha_server_addr(self, listen_port: int) -> str:
        """`BrokerController.getHAServerAddr`: brokerIP2 and the HA port."""
        return f"{self.broker_ip2}:{self.ha_port(listen_port)}"

    @property
    def fixed_ha_master(self) -> str | None:
        """haMasterAddress when it is long enough to be one: then the register answer's is ignored
        (`updateMasterHAServerAddrPeriodically = false`)."""
        a = self.ha_master_address
        return a if a is not None and len(a) >= HA_ADDRESS_MIN_LENGTH else None

    def suggest_pulling_from_slave(self, fall_behind: int | None) -> bool:
        """`DefaultMessageStore.getMessage`: the pulled data lies further behind the CommitLog's end
        than `accessMessageInMemoryMaxRatio` percent of RAM, so it is no longer in the page cache."""
        if fall_behind is None:
            return False
        return fall_behind > int(total_physical_memory() * (self.access_message_in_memory_max_ratio / 100.0))
