"""The `lock` and `abort` files (formats.md §7.1, §7.2).

`lock` is held for the life of a writable store: flock (so a second rmqtool in any process is
refused) plus a POSIX record lock on byte [0, 1), which is what a Java broker's
`FileChannel.tryLock(0, 1, false)` takes, so a real broker and rmqtool also exclude each other.
POSIX locks belong to the process and vanish when any descriptor of the file closes, so a
per-process registry refuses a second open in the same process before a descriptor is opened.
`abort` holds the PID while open and is removed on clean close; its presence means a crash.
"""

from __future__ import annotations

import fcntl
import os
import threading
from pathlib import Path

from rmqtool.errors import StoreError, StoreLocked

_HELD: set[str] = set()
_HELD_LOCK = threading.Lock()


class StoreLock:
    def __init__(self, root: Path) -> None:
        self.path = root / "lock"
        self.key = os.path.realpath(root)
        self.fd = -1

    def acquire(self) -> None:
        with _HELD_LOCK:
            if self.key in _HELD:
                raise StoreLocked(f"store {self.key} is already open in this process")
            try:
                fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
            except OSError as e:
                raise StoreError(f"cannot open {self.path}: {e.strerror}") from None
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB, 1, 0)
            except OSError:
                os.close(fd)
                raise StoreLocked(f"store {self.key} is locked by another process (a broker or rmqtool)") from None
            try:
                os.pwrite(fd, b"lock", 0)  # as Java's lockFile write; no room for it on a full disk is fine
            except OSError:
                pass
            self.fd = fd
            _HELD.add(self.key)

    def release(self) -> None:
        with _HELD_LOCK:
            if self.fd >= 0:
                os.close(self.fd)  # releases both locks
                self.fd = -1
                _HELD.discard(self.key)


def abort_path(root: Path) -> Path:
    return root / "abort"


def create_abort(root: Path) -> None:
    """`createTempFile`: the PID as text (5.x).

    The file's existence is what recovery reads; on a full disk the PID may not fit (ENOSPC on
    the write), and the empty file (an inode, no block) still marks the store as in use.
    """
    path = abort_path(root)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    except OSError as e:
        raise StoreError(f"cannot create {path.name}: {e.strerror}") from None
    try:
        os.write(fd, str(os.getpid()).encode())
    except OSError:
        pass  # no room for the PID: the empty file is enough
    finally:
        os.close(fd)


def remove_abort(root: Path) -> None:
    try:
        abort_path(root).unlink()
    except FileNotFoundError:
        pass


def _boot_time() -> float | None:
    """When this system booted (`btime` of /proc/stat, whole seconds), None where unknown."""
    try:
        with open("/proc/stat", "rb") as f:
            for line in f:
                if line.startswith(b"btime "):
                    return float(line.split()[1])
    except (OSError, ValueError, IndexError):
        return None
    return None


def abort_from_this_boot(root: Path) -> bool:
    """Was `abort` created after the system last booted (a process crash, not a system crash)?

    After a crash of the writing process alone, every byte it stored through its mappings is
    still in the page cache, so files it kept consistent write by write (the index) can be
    trusted up to their own header. After a power loss or kernel crash they cannot, and
    recovery must rebuild them as IndexService.load does. Java's broker ignores the
    distinction; reading the file's time changes nothing on disk. False when unsure.
    """
    boot = _boot_time()
    if boot is None:
        return False
    try:
        created = abort_path(root).stat().st_mtime
    except OSError:
        return False
    return created > boot + 2

