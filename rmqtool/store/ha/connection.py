"""One slave's connection on the master (DefaultHAConnection: ReadSocketService + WriteSocketService).

Two threads per connection, blocking sockets: the reader takes the slave's 8-byte max-offset
reports (the last whole one of each read counts, as Java's `processReadEvent`), the writer sends
12-byte headers and raw CommitLog bytes from where the slave asked, at most haTransferBatchSize
per transfer and never across a CommitLog file end, or an idle header after
haSendHeartbeatInterval. A thread per connection keeps the copy loop out of the broker's event
loop; the GIL is released in every send and receive, and the 32 KiB copies are cheap.

Unlike Java's master (which trusts any 8 bytes), the reader closes the connection on a report
that cannot come from a slave of this store: a negative offset, one past the master's max
offset, one below the previous report, or a first one below the master's oldest file. A first
report inside a record is served as Java serves it: the slave then finds that its data
does not continue the master's and stops (appender.py) rather than this side guessing.
"""

from __future__ import annotations

import logging
import socket
import threading
import time
from typing import Any

from rmqtool.layouts.ha import REPORT_HEADER, REPORT_HEADER_SIZE, TRANSFER_HEADER

log = logging.getLogger("rmqtool.ha")

READ_MAX_BUFFER_SIZE = 1024 * 1024  # DefaultHAConnection.ReadSocketService.READ_MAX_BUFFER_SIZE
MAX_TRANSFERS_PER_WRITE = 32


def _now_ms() -> int:
    return time.monotonic_ns() // 1_000_000


class HAConnection:
    """Master side of one slave; `slave_ack_offset` is what the slave has confirmed storing."""

    def __init__(self, service: Any, sock: socket.socket, addr: tuple[str, int]) -> None:
        self.service = service
        self.sock = sock
        self.client_addr = f"{addr[0]}:{addr[1]}"
        self.slave_request_offset = -1
        self.slave_ack_offset = -1
        self.next_transfer_from = -1
        self.transferred_bytes = 0
        self.closed = threading.Event()
        self.close_reason = ""
        self._requested = threading.Event()
        self._last_read_ms = _now_ms()
        self._reader = threading.Thread(target=self._read_loop, name=f"ha-read {self.client_addr}", daemon=True)
        self._writer = threading.Thread(target=self._write_loop, name=f"ha-write {self.client_addr}", daemon=True)

    def start(self) -> None:
        self._reader.start()
        self._writer.start()

    def close(self, reason: str = "shut down") -> None:
        if self.closed.is_set():
            return
        self.close_reason = reason
        self.closed.set()
        self._requested.set()
        try:
            self.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.sock.close()
        self.service.remove_connection(self)
        log.info("HA connection %s closed: %s", self.client_addr, reason)

    def join(self, timeout: float | None = None) -> None:
        for t in (self._reader, self._writer):
            if t.is_alive() and t is not threading.current_thread():
                t.join(timeout)

    # -- reports from the slave ---------------------------------------------------------------
    def _read_loop(self) -> None:
        cfg = self.service.config
        buf = bytearray()
        try:
            self.sock.settimeout(1.0)
            while not self.closed.is_set():
                try:
                    chunk = self.sock.recv(READ_MAX_BUFFER_SIZE)
                except TimeoutError:
                    chunk = None
                if chunk == b"":
                    self.close("slave closed the connection")
                    return
                if chunk:
                    self._last_read_ms = _now_ms()
                    buf += chunk
                    whole = len(buf) - len(buf) % REPORT_HEADER_SIZE
                    if whole:
                        offset = REPORT_HEADER.unpack_from(buf, whole - REPORT_HEADER_SIZE)[0]
                        del buf[:whole]
                        problem = self._check_report(offset)
                        if problem:
                            self.close(problem)
                            return
                        self.slave_ack_offset = offset
                        if self.slave_request_offset < 0:
                            self.slave_request_offset = offset
                            self._requested.set()
                        self.service.notify_transfer_some(offset)
                if _now_ms() - self._last_read_ms > cfg.ha_housekeeping_interval:
                    self.close(f"no report from the slave for {cfg.ha_housekeeping_interval} ms")
                    return
        except OSError as e:
            self.close(f"read failed: {e}")
        except Exception as e:  # never let a bug leave a half-open connection behind
            log.exception("HA reader %s failed", self.client_addr)
            self.close(f"reader failed: {e}")

    def _check_report(self, offset: int) -> str | None:
        cl = self.service.store.commitlog
        max_offset = cl.max_offset
        if offset < 0 or offset > max_offset:
            return f"slave reported offset {offset}, this master's CommitLog ends at {max_offset}"
        if offset < self.slave_ack_offset:
            return f"slave reported offset {offset} after {self.slave_ack_offset}"
        if self.slave_request_offset < 0 and 0 < offset < cl.min_offset:
            return f"slave asks for offset {offset}, this master's CommitLog starts at {cl.min_offset}"
        return None

    # -- transfers to the slave ---------------------------------------------------------------
    def _write_loop(self) -> None:
        service = self.service
        cfg = service.config
        cl = service.store.commitlog
        file_size = cl.file_size
        batch = max(1, cfg.ha_transfer_batch_size)
        try:
            self.sock.settimeout(cfg.ha_housekeeping_interval / 1000)
            while not self._requested.wait(1.0):
                pass
            if self.closed.is_set():
                return
            if self.slave_request_offset == 0:
                # a new slave gets the last file only, as Java's WriteSocketService does
                master_max = cl.max_offset
                self.next_transfer_from = max(0, master_max - master_max % file_size)
            else:
                self.next_transfer_from = self.slave_request_offset
            last_write = _now_ms()
            while not self.closed.is_set():
                # up to MAX_TRANSFERS_PER_WRITE transfers of at most haTransferBatchSize each in one
                # write: the same stream as Java's one transfer per write, with fewer system calls
                parts: list[bytes] = []
                for _ in range(MAX_TRANSFERS_PER_WRITE):
                    data = self._select(cl, self.next_transfer_from, batch)
                    if not data:
                        break
                    parts += (TRANSFER_HEADER.pack(self.next_transfer_from, len(data)), data)
                    self.next_transfer_from += len(data)
                    self.transferred_bytes += len(data)
                if parts:
                    self.sock.sendall(b"".join(parts))
                    last_write = _now_ms()
                    continue
                if _now_ms() - last_write > cfg.ha_send_heartbeat_interval:
                    self.sock.sendall(TRANSFER_HEADER.pack(self.next_transfer_from, 0))
                    last_write = _now_ms()
                service.wait_for_data(self.next_transfer_from, 0.1)
        except OSError as e:
            self.close(f"write failed: {e}")
        except Exception as e:
            log.exception("HA writer %s failed", self.client_addr)
            self.close(f"writer failed: {e}")

    @staticmethod
    def _select(cl: Any, offset: int, batch: int) -> bytes | None:
        """`getCommitLogData`: up to `batch` bytes from `offset` to the end of what its file holds."""
        mf = cl.mfq.find(offset)
        if mf is None:
            return None
        pos = offset - mf.from_offset
        n = min(batch, mf.wrote_position - pos)
        if n <= 0:
            return None
        try:
            return mf.mm[pos : pos + n]
        except ValueError:  # deleted by cleanup meanwhile
            return None
