"""`RunningFlags`: why the store refuses puts (disk full, a ConsumeQueue or index write failed).

The Java store keeps one int of bits; `HookUtils.checkBeforePutMessage` answers a put with
SERVICE_NOT_AVAILABLE while `isWriteable()` is false. DISK_FULL comes and goes with the disk
usage `CleanCommitLogService.isSpaceToDelete` measures; the write-error bits stay until restart
(recovery then re-dispatches what the failed write left out).
"""

from __future__ import annotations

import threading

NOT_READABLE_BIT = 1
NOT_WRITEABLE_BIT = 1 << 1
WRITE_LOGICS_QUEUE_ERROR_BIT = 1 << 2
WRITE_INDEX_FILE_ERROR_BIT = 1 << 3
DISK_FULL_BIT = 1 << 4
FENCED_BIT = 1 << 5
LOGIC_DISK_FULL_BIT = 1 << 6
_NOT_WRITEABLE_MASK = (NOT_WRITEABLE_BIT | WRITE_LOGICS_QUEUE_ERROR_BIT | DISK_FULL_BIT | WRITE_INDEX_FILE_ERROR_BIT
                       | FENCED_BIT | LOGIC_DISK_FULL_BIT)


class RunningFlags:
    """The flag bits; `get_and_make_*` return what Java's return (was the state already so?)."""

    def __init__(self) -> None:
        self.flag_bits = 0
        self._lock = threading.Lock()

    def is_writeable(self) -> bool:
        return not self.flag_bits & _NOT_WRITEABLE_MASK

    def is_disk_full(self) -> bool:
        return bool(self.flag_bits & DISK_FULL_BIT)

    def get_and_make_disk_full(self) -> bool:
        """Set DISK_FULL; True when it was not set before (Java logs the change then)."""
        with self._lock:
            was_ok = not self.flag_bits & DISK_FULL_BIT
            self.flag_bits |= DISK_FULL_BIT
            return was_ok

    def get_and_make_disk_ok(self) -> bool:
        """Clear DISK_FULL; True when it was clear already."""
        with self._lock:
            was_ok = not self.flag_bits & DISK_FULL_BIT
            self.flag_bits &= ~DISK_FULL_BIT
            return was_ok

    def make_logics_queue_error(self) -> None:
        with self._lock:
            self.flag_bits |= WRITE_LOGICS_QUEUE_ERROR_BIT

    def make_index_file_error(self) -> None:
        with self._lock:
            self.flag_bits |= WRITE_INDEX_FILE_ERROR_BIT

    def has_write_error(self) -> bool:
        return bool(self.flag_bits & (WRITE_LOGICS_QUEUE_ERROR_BIT | WRITE_INDEX_FILE_ERROR_BIT))
