"""`config/timercheck`: the timer store's progress, a 4096-byte file rewritten in place (formats.md §5.5).

RocketMQ 5.x `TimerCheckpoint`. Only the first 56 bytes carry data; a missing file reads as zeros.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from rmqtool.layouts.checkpoint import TIMER_CHECKPOINT
from rmqtool.layouts.constants import TIMERCHECK_FILE_SIZE
from rmqtool.store.diskspace import reserve_blocks


@dataclass(slots=True)
class TimerCheckpointValue:
    last_read_time_ms: int = 0
    last_timer_log_flush_pos: int = 0
    last_timer_queue_offset: int = 0
    master_timer_queue_offset: int = 0
    state_version: int = 0
    timestamp: int = 0
    counter: int = 0

    def pack(self) -> bytes:
        return TIMER_CHECKPOINT.pack(self.last_read_time_ms, self.last_timer_log_flush_pos,
                                     self.last_timer_queue_offset, self.master_timer_queue_offset,
                                     self.state_version, self.timestamp, self.counter)

    @classmethod
    def unpack(cls, data: bytes) -> TimerCheckpointValue:
        data = data[: TIMER_CHECKPOINT.size].ljust(TIMER_CHECKPOINT.size, b"\0")
        return cls(*TIMER_CHECKPOINT.unpack(data))


class TimerCheckpoint:
    """The file plus its current values; `flush()` writes them (in place, then fsync)."""

    def __init__(self, path: Path, *, read_only: bool = False) -> None:
        self.path = Path(path)
        self.read_only = read_only
        self._fd = -1
        self._written = b""  # what the last write put into the file
        data = b""
        if self.path.exists():
            data = self.path.read_bytes()
        self.value = TimerCheckpointValue.unpack(data)
        if not read_only:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
            if os.fstat(self._fd).st_size != TIMERCHECK_FILE_SIZE:
                os.ftruncate(self._fd, TIMERCHECK_FILE_SIZE)
            try:
                reserve_blocks(self._fd, TIMERCHECK_FILE_SIZE, self.path.name)
            except BaseException:
                os.close(self._fd)
                self._fd = -1
                raise

    def update_data_version(self, state_version: int, now_ms: int) -> None:
        """`DataVersion.nextVersion(stateVersion)`."""
        self.value.state_version = state_version
        self.value.timestamp = now_ms
        self.value.counter += 1

    def write(self) -> None:
        """Put the values into the file (page cache); survives a SIGKILL, not a power cut.

        Skipped when they are what the file already holds: the timer service calls this after
        every run, most of which move nothing.
        """
        if self._fd >= 0:
            data = self.value.pack()
            if data != self._written:
                os.pwrite(self._fd, data, 0)
                self._written = data

    def flush(self) -> None:
        if self._fd >= 0:
            self.write()
            os.fsync(self._fd)

    def close(self) -> None:
        if self._fd >= 0:
            self.flush()
            os.close(self._fd)
            self._fd = -1
