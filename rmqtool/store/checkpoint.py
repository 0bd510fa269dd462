"""The `checkpoint` file (StoreCheckpoint, formats.md §8.1): how far each structure is known durable.

A 4096-byte file overwritten in place. Abnormal recovery uses its timestamps to pick the
CommitLog file to re-dispatch from, so each value must only ever describe data already flushed.
"""

from __future__ import annotations

import mmap
import os
from pathlib import Path

from rmqtool.errors import StoreError
from rmqtool.layouts.checkpoint import STORE_CHECKPOINT
from rmqtool.layouts.constants import CHECKPOINT_FILE_SIZE
from rmqtool.store.diskspace import reserve_blocks


class StoreCheckpoint:
    """Mapped `checkpoint`; attributes are written to the file by `flush`."""

    def __init__(self, path: Path, *, read_only: bool = False) -> None:
        self.path = path
        self.read_only = read_only
        self.physic_msg_timestamp = 0
        self.logics_msg_timestamp = 0
        self.index_msg_timestamp = 0
        self.master_flushed_offset = 0
        self.confirm_phy_offset = 0
        self.mm: mmap.mmap | None = None
        self.fd = -1
        if read_only:
            if path.is_file():
                data = path.read_bytes()[: STORE_CHECKPOINT.size]
                if len(data) == STORE_CHECKPOINT.size:
                    self._set(data)
            return
        try:
            self.fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
            if os.fstat(self.fd).st_size < CHECKPOINT_FILE_SIZE:
                os.ftruncate(self.fd, CHECKPOINT_FILE_SIZE)
            reserve_blocks(self.fd, CHECKPOINT_FILE_SIZE, "checkpoint")  # written through the mapping
            self.mm = mmap.mmap(self.fd, CHECKPOINT_FILE_SIZE)
        except OSError as e:
            if self.fd >= 0:
                os.close(self.fd)
                self.fd = -1
            raise StoreError(f"cannot open checkpoint: {e.strerror}") from None
        except StoreError:
            os.close(self.fd)
            self.fd = -1
            raise
        self._set(self.mm[: STORE_CHECKPOINT.size])

    def _set(self, data: bytes) -> None:
        (self.physic_msg_timestamp, self.logics_msg_timestamp, self.index_msg_timestamp,
         self.master_flushed_offset, self.confirm_phy_offset) = STORE_CHECKPOINT.unpack(data)

    def min_timestamp(self) -> int:
        """`getMinTimestamp`: the older of the CommitLog and ConsumeQueue marks, less 3 s of slack."""
        return max(0, min(self.physic_msg_timestamp, self.logics_msg_timestamp) - 3000)

    def min_timestamp_index(self) -> int:
        """`getMinTimestampIndex`: also no later than the last full index file."""
        return min(self.min_timestamp(), self.index_msg_timestamp)

    def write(self) -> None:
        """Put the current values into the mapped file (durable at the next `flush`)."""
        if self.mm is not None:
            STORE_CHECKPOINT.pack_into(self.mm, 0, self.physic_msg_timestamp, self.logics_msg_timestamp,
                                       self.index_msg_timestamp, self.master_flushed_offset, self.confirm_phy_offset)

    def flush(self) -> None:
        if self.mm is not None:
            self.write()
            os.fdatasync(self.fd)

    def close(self) -> None:
        if self.mm is not None:
            self.mm.close()
            os.close(self.fd)
            self.mm = None
