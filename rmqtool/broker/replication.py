"""The broker's replication role (BrokerController's HA part): which side of store/ha it runs.

A master (ASYNC_MASTER, SYNC_MASTER) listens for slaves on haListenPort (listenPort + 1 unless
set) with an `HAService`; a SLAVE follows `haMasterAddress` with an `HAClient` (the name
server's REGISTER_BROKER answer may give the address later: `update_ha_master_address`) and
runs no service that writes its store (delay-level delivery, timers): a slave's CommitLog is its
master's, byte for byte, as Java's `changeSpecialServiceStatus` keeps those services off on a slave.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from rmqtool.errors import RemotingError
from rmqtool.store.ha import HAClient, HAService

log = logging.getLogger("rmqtool.serve")

SLAVE_SERVICES = ("clean-expired",)  # what a slave keeps: deleting expired files is local


@dataclass
class Replication:
    """What serve started: `service` on a master, `client` on a slave (each None otherwise)."""

    service: HAService | None = None
    client: HAClient | None = None

    @property
    def ha_port(self) -> int | None:
        return self.service.port if self.service is not None else None

    def update_ha_master_address(self, addr: str | None) -> None:
        if self.client is not None and addr:
            self.client.update_ha_master_address(addr)

    def update_master_address(self, addr: str | None) -> None:
        if self.client is not None:
            self.client.update_master_address(addr)

    def stop(self) -> None:
        if self.client is not None:
            self.client.stop()
        if self.service is not None:
            self.service.stop()


def start_replication(local: Any, host: str, *, ephemeral: bool) -> Replication:
    """Start the side of replication `brokerRole` asks for on `local`'s store.

    `ephemeral`: the broker port was chosen by the system (tests); then listenPort + 1 may be
    taken and any free port is used for HA instead, unless haListenPort was set.
    """
    store = local.store
    cfg = store.config
    if cfg.is_slave:
        local.services[:] = [s for s in local.services if getattr(s, "name", None) in SLAVE_SERVICES]
        client = HAClient(store, cfg.ha_master_address or None,
                          on_error=lambda m: log.error("replication from the master stopped: %s", m))
        client.start()
        return Replication(client=client)
    service = HAService(store)
    try:
        service.start(host, cfg.ha_port)
    except OSError as e:
        if not ephemeral or cfg.ha_listen_port:
            raise RemotingError(f"cannot listen for slaves on {host}:{cfg.ha_port} (haListenPort): "
                                f"{e.strerror or e}") from None
        service.start(host, 0)
    return Replication(service=service)
