"""The slave's replication client (DefaultHAClient), one thread with a blocking socket.

It connects to the master's HA address, reports its max CommitLog offset right away (Java
waits for the first heartbeat; reporting at once is what the master waits for anyway), after
every write that moves it and every haSendHeartbeatInterval, and hands each transfer to the
`ReplicaAppender`. A header whose offset is not the slave's max offset drops the connection (and
reconnects, as Java's `dispatchReadRequest`); a master silent for haHousekeepingInterval too.
A master whose data does not continue this store's (`ReplicaDiverged`) or cannot be stored
(`ReplicaError`) stops the client for good with `error` set: nothing is overwritten.
"""

from __future__ import annotations

import logging
import socket
import threading
import time
from collections.abc import Callable
from typing import Any

from rmqtool.layouts.ha import (
    REPORT_HEADER,
    SLAVE_READ_MAX_BUFFER_SIZE,
    TRANSFER_HEADER,
    TRANSFER_HEADER_SIZE,
)
from rmqtool.store.ha.appender import ReplicaAppender, ReplicaError

log = logging.getLogger("rmqtool.ha")

# DefaultHAClient waits 5 s after a failed connect or a closed connection; a slave that is back
# sooner loses less when its master restarts, and a connect attempt a second costs nothing
RECONNECT_WAIT_S = 1.0


def parse_host_port(addr: str) -> tuple[str, int]:
    host, sep, port = addr.strip().rpartition(":")
    if not sep or not host or not port.isdigit():
        raise ValueError(f"{addr!r} is not HOST:PORT")
    return host.strip("[]"), int(port)


class HAClient:
    """Follows one master into a writable store whose CommitLog it owns."""

    def __init__(self, store: Any, master_ha_addr: str | None = None, *,
                 on_error: Callable[[str], None] | None = None, reconnect_wait_s: float = RECONNECT_WAIT_S) -> None:
        self.store = store
        self.config = store.config
        self.appender = ReplicaAppender(store)
        self.master_ha_address = master_ha_addr or self.config.ha_master_address or None
        self.master_address: str | None = None
        self.on_error = on_error
        self.reconnect_wait_s = reconnect_wait_s
        self.error: str | None = None
        self.connected = False
        self.received_bytes = 0
        self.last_master_offset = -1  # offset of the newest header, heartbeats included
        self.last_read_ms = 0
        self.last_idle = False  # the newest header was a heartbeat: nothing more to send right now
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._sock: socket.socket | None = None
        self._thread = threading.Thread(target=self._run, name="ha-client", daemon=True)

    # -- API ----------------------------------------------------------------------------------
    def start(self) -> None:
        self._thread.start()

    def stop(self, timeout: float = 5.0) -> None:
        self._stop.set()
        self._wake.set()
        sock = self._sock
        if sock is not None:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        if self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join(timeout)

    @property
    def alive(self) -> bool:
        return self._thread.is_alive()

    def update_ha_master_address(self, addr: str | None) -> None:
        """Follow `addr` (HOST:HAPORT) from the next connection on; what the name server tells a slave."""
        if addr and addr != self.master_ha_address:
            log.info("HA master address %s -> %s", self.master_ha_address, addr)
            self.master_ha_address = addr
            self._wake.set()

    def update_master_address(self, addr: str | None) -> None:
        self.master_address = addr

    @property
    def max_offset(self) -> int:
        return self.appender.max_offset

    # -- loop ---------------------------------------------------------------------------------
    def _run(self) -> None:
        while not self._stop.is_set():
            addr = self.master_ha_address
            if not addr:
                self._wait(self.reconnect_wait_s)
                continue
            try:
                host, port = parse_host_port(addr)
                sock = socket.create_connection((host, port), timeout=3)
            except (OSError, ValueError) as e:
                log.info("HA client cannot connect to %s: %s", addr, e)
                self._wait(self.reconnect_wait_s)
                continue
            self._sock = sock
            self.connected = True
            try:
                self._transfer(sock)
            except ReplicaError as e:
                self._fail(str(e))
            except OSError as e:
                log.info("HA connection to %s lost: %s", addr, e)
            except Exception as e:
                log.exception("HA client failed")
                self._fail(f"replication failed: {e}")
            finally:
                self.connected = False
                self._sock = None
                sock.close()
            if not self._stop.is_set():
                self._wait(self.reconnect_wait_s)

    def _wait(self, seconds: float) -> None:
        self._wake.wait(seconds)
        self._wake.clear()

    def _fail(self, message: str) -> None:
        self.error = message
        log.error("replication stopped: %s", message)
        self._stop.set()
        if self.on_error is not None:
            self.on_error(message)

    def _transfer(self, sock: socket.socket) -> None:
        cfg = self.config
        appender = self.appender
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.settimeout(1.0)
        heartbeat_ms = cfg.ha_send_heartbeat_interval
        housekeeping_ms = cfg.ha_housekeeping_interval
        appender.reset()
        reported = appender.max_offset
        sock.sendall(REPORT_HEADER.pack(reported))
        last_write = last_read = _now_ms()
        buf = bytearray(SLAVE_READ_MAX_BUFFER_SIZE)
        view = memoryview(buf)
        have = 0  # bytes in buf
        checked = False  # the first bytes after connecting continue this store
        while not self._stop.is_set():
            now = _now_ms()
            if now - last_write > heartbeat_ms:
                sock.sendall(REPORT_HEADER.pack(reported))
                last_write = now
            try:
                n = sock.recv_into(view[have:])
            except TimeoutError:
                n = -1
            if n == 0:
                log.info("HA master closed the connection")
                return
            now = _now_ms()
            if n < 0:
                if now - last_read > housekeeping_ms:
                    log.warning("HA master silent for %d ms: reconnecting", now - last_read)
                    return
                continue
            last_read = self.last_read_ms = now
            have += n
            self.received_bytes += n
            pos = 0
            while have - pos >= TRANSFER_HEADER_SIZE:
                master_offset, size = TRANSFER_HEADER.unpack_from(buf, pos)
                mine = appender.next_offset
                if size < 0 or size > SLAVE_READ_MAX_BUFFER_SIZE - TRANSFER_HEADER_SIZE:
                    log.warning("HA master sent a transfer of %d bytes: closing", size)
                    return
                if mine is not None and master_offset != mine:
                    log.warning("HA master offset %d is not this slave's max offset %d: closing", master_offset, mine)
                    return
                if have - pos < TRANSFER_HEADER_SIZE + size:
                    break
                body = view[pos + TRANSFER_HEADER_SIZE : pos + TRANSFER_HEADER_SIZE + size]
                self.last_master_offset = master_offset
                self.last_idle = size == 0
                if size:
                    if not checked:  # raises ReplicaDiverged before anything is written
                        appender.check_continues(master_offset, body)
                        checked = True
                    arrived = appender.append(master_offset, body)
                    if arrived:
                        self.store._notify_arrivals(arrived)
                pos += TRANSFER_HEADER_SIZE + size
            # one report for all the transfers of this read (Java reports after each; the master
            # only keeps the newest anyway, and a SYNC_MASTER's wait ends as early)
            if appender.max_offset > reported:
                reported = appender.max_offset
                sock.sendall(REPORT_HEADER.pack(reported))
                last_write = _now_ms()
            if pos:
                rest = have - pos
                buf[:rest] = buf[pos:have]
                have = rest


def _now_ms() -> int:
    return time.monotonic_ns() // 1_000_000


def wait_until(predicate: Callable[[], bool], timeout: float, step: float = 0.05) -> bool:
    """Poll `predicate` until true or `timeout` seconds pass (tests and the replicate command)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(step)
    return predicate()
