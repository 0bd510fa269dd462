"""A live replica of any master for offline forensics: what `rmqtool replicate` runs.

`Follower` opens (or creates) a store as a SLAVE (the store lock is held for its whole life, so
no broker and no second rmqtool writes it; `inspect` and `verify` read it meanwhile), follows one
master's HA port with an `HAClient` exactly as a slave broker would, and reports progress
snapshots: the offset stored, the bytes per second received, and the lag behind the master
when its max offset is known. The master sees one more slave and nothing else: its disk is
never touched and a slave's offset reports are all it gets.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rmqtool.store.config import StoreConfig
from rmqtool.store.ha.client import HAClient, parse_host_port


@dataclass
class Progress:
    """One progress line: `lag` is None when the master's max offset is not known."""

    offset: int
    lag: int | None
    mb_per_s: float
    received_bytes: int
    connected: bool
    records: int

    def to_json(self) -> dict[str, Any]:
        return {"offset": self.offset, "lag": self.lag, "mbPerSecond": round(self.mb_per_s, 3),
                "receivedBytes": self.received_bytes, "connected": self.connected, "records": self.records}

    def line(self, master: str) -> str:
        lag = "?" if self.lag is None else f"{self.lag:,}"
        state = "" if self.connected else ", connecting"
        return (f"{master}: offset {self.offset:,}, lag {lag} bytes, {self.mb_per_s:.2f} MB/s, "
                f"{self.records:,} records{state}")


class Follower:
    """Follows `master` (HOST:HAPORT) into the store at `root` until `stop()`."""

    def __init__(self, root: Path, master: str, config: StoreConfig, *,
                 master_max_offset: Callable[[], int | None] | None = None) -> None:
        parse_host_port(master)  # ValueError: not HOST:PORT
        self.root = root
        self.master = master
        self.config = config
        self.config.broker_role = "SLAVE"
        self.master_max_offset = master_max_offset
        self.store: Any = None
        self.client: HAClient | None = None
        self._last = (time.monotonic(), 0)

    def start(self) -> None:
        from rmqtool.store.messagestore import MessageStore

        self.store = MessageStore.open(self.root, self.config)
        self.client = HAClient(self.store, self.master)
        self.client.start()
        self._last = (time.monotonic(), 0)

    @property
    def error(self) -> str | None:
        return self.client.error if self.client is not None else None

    def progress(self) -> Progress:
        """A snapshot; MB/s over the time since the previous snapshot."""
        c = self.client
        assert c is not None
        now, received = time.monotonic(), c.received_bytes
        t0, r0 = self._last
        self._last = (now, received)
        rate = (received - r0) / max(now - t0, 1e-6) / 1e6
        offset = c.max_offset
        lag: int | None = None
        known = self.master_max_offset() if self.master_max_offset is not None else None
        if known is not None:
            lag = max(0, known - offset)
        elif c.connected and (received == r0 or c.last_idle) and not c.appender.pending:
            lag = 0  # the master had nothing more to send for a whole interval
        return Progress(offset, lag, rate, received, c.connected, c.appender.records)

    def stop(self) -> None:
        if self.client is not None:
            self.client.stop()
        if self.store is not None:
            self.store.close()
            self.store = None
