"""File expiry and the disk-full flag (formats.md §8.4): `DefaultMessageStore.CleanCommitLogService`.

CommitLog files go when the hour is in `deleteWhen`, or the disk is fuller than
`diskMaxUsedSpaceRatio` (immediately, ignoring age, above the clean-forcibly or warning ratio);
a file goes when `lastModified + fileReservedTime <= now`, oldest first, never the last, at most
`deleteFileBatchMax` per round, stopping at the first file too young. Afterwards ConsumeQueue
files and index files wholly below the CommitLog min offset are removed (CleanConsumeQueueService).

That policy is RocketMQ's and it deletes messages no consumer has read yet when the disk is
under pressure; so each round that deletes files says so in one WARNING line (files, the
CommitLog offset range they held, the reason). `isSpaceToDelete` also raises and clears the
store's DISK_FULL flag: above `diskSpaceWarningLevelRatio` (at most 0.90) puts are refused.

The service is given the parts of the store it works on (it does not import MessageStore);
the clock and the disk-usage probe are injected so this is testable.
"""

from __future__ import annotations

import datetime
import logging
import threading
from collections.abc import Callable
from pathlib import Path

from rmqtool.store.commitlog import CommitLog
from rmqtool.store.config import StoreConfig
from rmqtool.store.consumequeue import BLANK_SIZE, UNIT, ConsumeQueueStore
from rmqtool.store.diskspace import disk_used_ratio
from rmqtool.store.index import IndexService
from rmqtool.store.mappedfile import MappedFile
from rmqtool.store.runningflags import RunningFlags

log = logging.getLogger("rmqtool.store.cleanup")

DiskUsage = Callable[[Path], float]


def _clamp(value: float, lo: float, hi: float) -> float:
    return max(lo, min(hi, value))


def is_time_to_delete(delete_when: str, now_ms: int) -> bool:
    """`UtilAll.isItTimeToDo`: the current local hour is one of the `;`-separated hours."""
    hour = datetime.datetime.fromtimestamp(now_ms / 1000).hour
    for item in delete_when.split(";"):
        item = item.strip()
        if item.isdigit() and int(item) == hour:
            return True
    return False


def warning_ratio(cfg: StoreConfig) -> float:
    """`getDiskSpaceWarningLevelRatio`: the configured percent as a ratio, within [0.35, 0.90]."""
    return _clamp(cfg.disk_space_warning_level_ratio / 100, 0.35, 0.90)


def forcibly_ratio(cfg: StoreConfig) -> float:
    """`getDiskSpaceCleanForciblyRatio`: within [0.30, 0.85]."""
    return _clamp(cfg.disk_space_clean_forcibly_ratio / 100, 0.30, 0.85)


def max_used_ratio(cfg: StoreConfig) -> float:
    """`getDiskMaxUsedSpaceRatio`: the percent clamped to [10, 95], as a ratio."""
    return _clamp(cfg.disk_max_used_space_ratio, 10, 95) / 100


class CleanCommitLogService:
    """One store's cleaning rounds and disk-space decisions."""

    def __init__(self, root: Path, config: StoreConfig, commitlog: CommitLog, cqs: ConsumeQueueStore,
                 index: IndexService | None, flags: RunningFlags, flush_lock: threading.Lock) -> None:
        self.root = root
        self.config = config
        self.commitlog = commitlog
        self.cqs = cqs
        self.index = index
        self.flags = flags
        self.flush_lock = flush_lock
        self.disk_usage: DiskUsage = disk_used_ratio
        self.clean_immediately = False

    def _probe_path(self, name: str) -> Path:
        path = self.root / name
        return path if path.exists() else self.root

    def ratios(self, probe: DiskUsage | None = None) -> tuple[float, float]:
        """(CommitLog partition, ConsumeQueue partition) used ratios, -1 when unknown."""
        probe = probe or self.disk_usage
        return probe(self._probe_path("commitlog")), probe(self._probe_path("consumequeue"))

    def is_space_to_delete(self, probe: DiskUsage | None = None) -> bool:
        """`isSpaceToDelete`: is the disk full enough to delete files? Sets `clean_immediately`
        and the DISK_FULL flag as Java does (raised above the warning ratio, cleared below the
        clean-forcibly ratio, left as it is in between)."""
        cfg = self.config
        self.clean_immediately = False
        warning, forcibly = warning_ratio(cfg), forcibly_ratio(cfg)
        physic, logics = self.ratios(probe)
        for what, ratio in (("physic", physic), ("logics", logics)):
            if ratio > warning:
                if self.flags.get_and_make_disk_full():
                    log.error("%s disk maybe full soon %.2f (diskSpaceWarningLevelRatio %.2f), so mark disk full: "
                              "puts are refused until space returns", what, ratio, warning)
                self.clean_immediately = True
                return True
            if ratio > forcibly:
                self.clean_immediately = True
                return True
            if not self.flags.get_and_make_disk_ok():
                log.warning("%s disk space OK %.2f, so mark disk ok: puts are accepted again", what, ratio)
        limit = max_used_ratio(cfg)
        return physic < 0 or physic > limit or logics < 0 or logics > limit

    def clean_at_once(self) -> bool:
        """`cleanFileForciblyEnable && cleanImmediately`: delete regardless of the files' age."""
        return bool(getattr(self.config, "clean_file_forcibly_enable", True)) and self.clean_immediately

    def run(self, now_ms: int, probe: DiskUsage | None = None) -> int:
        """One cleaning round; returns the number of CommitLog files deleted."""
        cfg = self.config
        time_up = is_time_to_delete(cfg.delete_when, now_ms)
        space = self.is_space_to_delete(probe)
        deleted: list[MappedFile] = []
        cl = self.commitlog
        if time_up or space:
            with cl.put_lock, self.flush_lock:
                cl.mfq.delete_expired_by_time(cfg.file_reserved_time * 3600 * 1000, now_ms,
                                              immediately=self.clean_at_once(), batch_max=cfg.delete_file_batch_max,
                                              on_delete=deleted.append)
            if deleted:
                self._log_round(deleted, space, probe)
            elif space:
                log.warning("disk space will be full soon, but delete file failed (nothing old enough, "
                            "or only the newest CommitLog file is left)")
        self.clean_logics()
        return len(deleted)

    def _log_round(self, deleted: list[MappedFile], space: bool, probe: DiskUsage | None) -> None:
        cfg = self.config
        first, last = deleted[0], deleted[-1]
        names = first.path.name if len(deleted) == 1 else f"{first.path.name}..{last.path.name}"
        if space:
            physic, logics = self.ratios(probe)
            reason = (f"disk pressure: used {max(physic, logics):.2f} > diskMaxUsedSpaceRatio "
                      f"{max_used_ratio(cfg):.2f}"
                      + (", deleted regardless of age" if self.clean_at_once() else
                         f", files older than fileReservedTime {cfg.file_reserved_time} h"))
        else:
            reason = f"expired: older than fileReservedTime {cfg.file_reserved_time} h (deleteWhen {cfg.delete_when})"
        log.warning("deleted %d CommitLog file(s) %s, offsets [%d, %d): %s; messages there are gone, "
                    "also for consumers that had not read them", len(deleted), names, first.from_offset,
                    last.from_offset + last.file_size, reason)

    def clean_logics(self) -> None:
        """CleanConsumeQueueService: CQ and index files below the CommitLog min offset."""
        cl = self.commitlog
        min_offset = cl.min_offset
        with cl.put_lock, self.flush_lock:
            for cq in list(self.cqs.queues.values()):
                cq.mfq.delete_expired_by_offset(lambda mf: _cq_file_max_phys(mf) >= min_offset)
                cq.correct_min_offset(min_offset)
            if self.index is not None:
                self.index.delete_expired(min_offset)


def _cq_file_max_phys(mf: MappedFile) -> int:
    """CommitLog offset of a full CQ file's last unit (`deleteExpiredFileByOffset`)."""
    pos = mf.wrote_position - UNIT
    if pos < 0:
        return -1
    off = int.from_bytes(mf.mm[pos : pos + 8], "big", signed=True)
    size = int.from_bytes(mf.mm[pos + 8 : pos + 12], "big", signed=True)
    return -1 if size == BLANK_SIZE else off
