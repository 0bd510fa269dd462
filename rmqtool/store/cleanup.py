"""File expiry (formats.md §8.4): CleanCommitLogService, then ConsumeQueue and index cleanup.

CommitLog files go when the hour is in `deleteWhen`, or the disk is fuller than
`diskMaxUsedSpaceRatio` (immediately, ignoring age, above the clean-forcibly ratio); a file goes
when `lastModified + fileReservedTime <= now`, oldest first, never the last, at most
`deleteFileBatchMax` per round, stopping at the first file too young. Afterwards ConsumeQueue
files and index files wholly below the CommitLog min offset are removed. The clock and the
disk-usage probe are injected so this is testable.
"""

from __future__ import annotations

import datetime
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from rmqtool.store.consumequeue import BLANK_SIZE, UNIT
from rmqtool.store.mappedfile import MappedFile

if TYPE_CHECKING:
    from rmqtool.store.messagestore import MessageStore


def disk_used_ratio(path: Path) -> float:
    """`UtilAll.getDiskPartitionSpaceUsedPercent`: used / total of the partition, -1 on error."""
    try:
        usage = shutil.disk_usage(path)
    except OSError:
        return -1.0
    return (usage.total - usage.free) / usage.total if usage.total else -1.0


def _clamp(value: int, lo: int, hi: int) -> int:
    return max(lo, min(hi, value))


def is_time_to_delete(delete_when: str, now_ms: int) -> bool:
    """`UtilAll.isItTimeToDo`: the current local hour is one of the `;`-separated hours."""
    hour = datetime.datetime.fromtimestamp(now_ms / 1000).hour
    for item in delete_when.split(";"):
        item = item.strip()
        if item.isdigit() and int(item) == hour:
            return True
    return False


def space_decision(store: MessageStore, disk_usage: Callable[[Path], float]) -> tuple[bool, bool]:
    """`isSpaceToDelete`: (over the max used ratio, clean immediately ignoring age)."""
    cfg = store.config
    max_ratio = _clamp(cfg.disk_max_used_space_ratio, 10, 95) / 100
    warning = _clamp(cfg.disk_space_warning_level_ratio, 35, 90) / 100
    forcibly = _clamp(cfg.disk_space_clean_forcibly_ratio, 30, 85) / 100
    ratio = disk_usage(store.root)
    immediately = ratio > warning or ratio > forcibly
    return (ratio < 0 or ratio > max_ratio), immediately


def clean_expired_files(store: MessageStore, now_ms: int, *,
                        disk_usage: Callable[[Path], float] | None = None) -> int:
    """One cleaning round; returns the number of CommitLog files deleted."""
    if store.read_only:
        return 0
    cfg = store.config
    probe = disk_usage or disk_used_ratio
    time_up = is_time_to_delete(cfg.delete_when, now_ms)
    space_full, immediately = space_decision(store, probe)
    deleted = 0
    cl = store.commitlog
    if time_up or space_full:
        with cl.put_lock, store.flush_lock:
            deleted = cl.mfq.delete_expired_by_time(cfg.file_reserved_time * 3600 * 1000, now_ms,
                                                    immediately=immediately, batch_max=cfg.delete_file_batch_max)
    clean_logics(store)
    return deleted


def _cq_file_max_phys(mf: MappedFile) -> int:
    """CommitLog offset of a full CQ file's last unit (`deleteExpiredFileByOffset`)."""
    pos = mf.wrote_position - UNIT
    if pos < 0:
        return -1
    off = int.from_bytes(mf.mm[pos : pos + 8], "big", signed=True)
    size = int.from_bytes(mf.mm[pos + 8 : pos + 12], "big", signed=True)
    return -1 if size == BLANK_SIZE else off


def clean_logics(store: MessageStore) -> None:
    """CleanConsumeQueueService: CQ and index files below the CommitLog min offset."""
    cl = store.commitlog
    min_offset = cl.min_offset
    with cl.put_lock, store.flush_lock:
        for cq in list(store.cqs.queues.values()):
            cq.mfq.delete_expired_by_offset(lambda mf: _cq_file_max_phys(mf) >= min_offset)
            cq.correct_min_offset(min_offset)
        if store.index is not None:
            store.index.delete_expired(min_offset)
