"""The master's replication service (DefaultHAService + AcceptSocketService + GroupTransferService).

`HAService(store).start(host)` listens on haListenPort (listenPort + 1 unless set) and serves
every slave that connects (connection.py). The store calls `handle_ha` after each put: it wakes
the transfers and, on a SYNC_MASTER with inSyncReplicas >= 2, waits as `CommitLog.handleHA` +
`GroupTransferService.doWaitTransfer` do until enough slaves have acknowledged the put's end
offset, answering FLUSH_SLAVE_TIMEOUT after slaveTimeout. 5.x classic mode has no
SLAVE_NOT_AVAILABLE: with no slave connected the send also waits and times out.

For the broker (haStatus, slave reads): `connections()`, `slave_count`, `push_to_slave_max_offset`,
`in_sync_replicas_nums`. A slave-side `HAClient` may be attached as `.client`; then
`update_master_address` / `update_ha_master_address` reach it, as Java's HAService forwards them.
"""

from __future__ import annotations

import logging
import socket
import threading
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from rmqtool.layouts import properties as P
from rmqtool.store.ha.connection import HAConnection

log = logging.getLogger("rmqtool.ha")


@dataclass(frozen=True)
class HAConnectionInfo:
    """One slave as haStatus shows it (HARuntimeInfo.HAConnectionRuntimeInfo)."""

    addr: str
    slave_ack_offset: int
    diff: int
    in_sync: bool
    transferred_bytes: int


class HAService:
    """Master side of classic replication for one MessageStore."""

    def __init__(self, store: Any) -> None:
        self.store = store
        self.config = store.config
        self.client: Any = None
        self.push2slave_max_offset = 0
        self.port = 0
        self._conns: list[HAConnection] = []
        self._lock = threading.Lock()
        self._acked = threading.Condition()
        self._data = threading.Condition()
        self._listener: socket.socket | None = None
        self._accept_thread: threading.Thread | None = None
        self._stopped = threading.Event()

    # -- lifecycle ----------------------------------------------------------------------------
    def start(self, host: str = "127.0.0.1", port: int | None = None) -> int:
        """Listen (port: haListenPort, listenPort + 1 by default; 0 = any) and accept slaves."""
        port = self.config.ha_port if port is None else port
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        sock = socket.socket(family, socket.SOCK_STREAM)
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind((host, port))
            sock.listen(16)
        except OSError:
            sock.close()
            raise
        sock.settimeout(1.0)
        self._listener = sock
        self.port = sock.getsockname()[1]
        self._accept_thread = threading.Thread(target=self._accept_loop, name="ha-accept", daemon=True)
        self._accept_thread.start()
        self.store.ha_service = self
        return self.port

    def stop(self) -> None:
        self._stopped.set()
        if self.store.ha_service is self:
            self.store.ha_service = None
        if self._listener is not None:
            self._listener.close()
        if self._accept_thread is not None:
            self._accept_thread.join(3)
        for conn in self.connections_snapshot():
            conn.close()
            conn.join(3)
        with self._acked:
            self._acked.notify_all()

    def _accept_loop(self) -> None:
        assert self._listener is not None
        while not self._stopped.is_set():
            try:
                sock, addr = self._listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            conn = HAConnection(self, sock, addr[:2])
            with self._lock:
                self._conns.append(conn)
            log.info("HA slave connected from %s", conn.client_addr)
            conn.start()

    def remove_connection(self, conn: HAConnection) -> None:
        with self._lock:
            if conn in self._conns:
                self._conns.remove(conn)
        with self._acked:
            self._acked.notify_all()

    def connections_snapshot(self) -> list[HAConnection]:
        with self._lock:
            return list(self._conns)

    # -- transfer progress --------------------------------------------------------------------
    def notify_transfer_some(self, offset: int) -> None:
        with self._acked:
            if offset > self.push2slave_max_offset:
                self.push2slave_max_offset = offset
            self._acked.notify_all()

    def wait_for_data(self, offset: int, timeout: float) -> None:
        """A writer with nothing to send sleeps here until a put (`allWaitForRunning(100)`)."""
        with self._data:
            if self.store.commitlog.max_offset <= offset:
                self._data.wait(timeout)

    def wakeup_all(self) -> None:
        with self._data:
            self._data.notify_all()

    def handle_ha(self, end_offset: int, msgs: Iterable[Any]) -> str | None:
        """After a put ending at `end_offset`: None when done, else the PutMessageStatus to answer."""
        self.wakeup_all()
        cfg = self.config
        if cfg.broker_role != "SYNC_MASTER" or cfg.in_sync_replicas <= 1:
            return None
        # needHandleHA: a message with WAIT=false does not wait for the slaves
        if not any((m.properties.get(P.WAIT) or "true").lower() != "false" for m in msgs):
            return None
        if self.wait_acked(end_offset, cfg.in_sync_replicas, cfg.slave_timeout / 1000):
            return None
        log.warning("transfer message to slave timeout, offset : %d, request acks: %d", end_offset,
                    cfg.in_sync_replicas)
        return "FLUSH_SLAVE_TIMEOUT"

    def acks(self, next_offset: int) -> int:
        """Replicas (the master included) holding everything below `next_offset`."""
        return 1 + sum(1 for c in self.connections_snapshot() if c.slave_ack_offset >= next_offset)

    def wait_acked(self, next_offset: int, need_acks: int, timeout: float) -> bool:
        """GroupTransferService: until `need_acks` replicas have `next_offset`, or `timeout` passes."""
        import time

        deadline = time.monotonic() + timeout
        with self._acked:
            while True:
                if self.acks(next_offset) >= need_acks:
                    return True
                left = deadline - time.monotonic()
                if left <= 0 or self._stopped.is_set():
                    return False
                self._acked.wait(left)

    # -- what the broker shows ----------------------------------------------------------------
    @property
    def slave_count(self) -> int:
        return len(self.connections_snapshot())

    def in_sync_replicas_nums(self, master_put_where: int | None = None) -> int:
        where = self.store.commitlog.max_offset if master_put_where is None else master_put_where
        gap = self.config.ha_max_gap_not_in_sync
        return 1 + sum(1 for c in self.connections_snapshot() if where - c.slave_ack_offset < gap)

    def is_slave_ok(self, master_put_where: int) -> bool:
        return self.slave_count > 0 and master_put_where - self.push2slave_max_offset < self.config.ha_max_gap_not_in_sync

    def connections(self) -> list[HAConnectionInfo]:
        where = self.store.commitlog.max_offset
        gap = self.config.ha_max_gap_not_in_sync
        return [HAConnectionInfo(c.client_addr, c.slave_ack_offset, where - max(c.slave_ack_offset, 0),
                                 where - c.slave_ack_offset < gap, c.transferred_bytes)
                for c in self.connections_snapshot()]

    # -- slave side, forwarded ----------------------------------------------------------------
    def update_master_address(self, addr: str) -> None:
        if self.client is not None:
            self.client.update_master_address(addr)

    def update_ha_master_address(self, addr: str) -> None:
        if self.client is not None:
            self.client.update_ha_master_address(addr)
