"""MessageStore: the storage engine facade (RocketMQ's DefaultMessageStore).

Opening takes the lock, loads every file, recovers (formats.md §8.2) and starts the flusher.
The put path (`put_messages`, `put_batch`) is the `PutPath` mixin (putpath.py). Readers go
through the ConsumeQueues and the CommitLog.
"""

from __future__ import annotations

import collections
import dataclasses
import logging
import os
import struct
import threading
import time
from collections.abc import Callable, Container
from pathlib import Path
from typing import Any

from rmqtool.errors import StoreError
from rmqtool.layouts.constants import (
    MESSAGE_MAGIC_CODE,
    MESSAGE_MAGIC_CODE_V2,
    TRANSACTION_COMMIT_TYPE,
    TRANSACTION_NOT_TYPE,
    TRANSACTION_ROLLBACK_TYPE,
    TRANSACTION_TYPE_MASK,
)
from rmqtool.layouts.message import (
    Blank,
    MessageExt,
    RecordError,
    decode_record,
)
from rmqtool.layouts.net import Host
from rmqtool.store.checkpoint import StoreCheckpoint
from rmqtool.store.cleanup import CleanCommitLogService, DiskUsage
from rmqtool.store.commitlog import CommitLog
from rmqtool.store.config import StoreConfig, parse_delay_levels
from rmqtool.store.consumequeue import BLANK_SIZE, ConsumeQueueStore
from rmqtool.store.dispatch import Dispatcher, DispatchRequest, request_from_record
from rmqtool.store.flush import FlushService
from rmqtool.store.index import IndexService
from rmqtool.store.lockfile import StoreLock, abort_from_this_boot, abort_path, create_abort, remove_abort
from rmqtool.store.putpath import PutMessageStatus, PutPath, PutResult
from rmqtool.store.reads import GetMessageResult, GetMessageStatus, get_message
from rmqtool.store.runningflags import RunningFlags

log = logging.getLogger(__name__)

__all__ = ["MessageStore", "PutResult", "GetMessageResult", "GetMessageStatus", "PutMessageStatus",
           "DispatchRequest"]


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


class MessageStore(PutPath):
    """One store directory, open for writing (locked) or read-only."""

    def __init__(self, root: Path, config: StoreConfig, clock: Callable[[], int], read_only: bool) -> None:
        self.root = root
        self.config = config
        self.clock = clock
        self.read_only = read_only
        # each may carry `property_keys`: a message with none of them it leaves as it is, and
        # `put_message` does not call it then (the schedule hook's DELAY and timer keys)
        self.put_hooks: list[Callable[[MessageExt], MessageExt]] = []
        self.dispatch_listeners: list[Callable[[DispatchRequest], None]] = []
        # `MessageArrivingListener`: (topic, queueId) of each queue a put gave new units, once per
        # put, after the put lock. Long polling and the timer service need no more than that, and
        # it spares the put path a DispatchRequest per message. Each listener comes with the
        # topics it listens to (`add_arrival_listener`), so a put on any other calls nothing.
        self.arrival_listeners: tuple[tuple[Container[str] | None, Callable[[str, int], None]], ...] = ()
        self.delay_levels_ms = parse_delay_levels(config.message_delay_level)
        self.store_host = Host(config.broker_ip1, config.listen_port)
        self.sync_flush = config.flush_disk_type == "SYNC_FLUSH"
        self.commitlog = CommitLog(root / "commitlog", config.mapped_file_size_commit_log, read_only=read_only)
        self.cqs = ConsumeQueueStore(root / "consumequeue", config.mapped_file_size_consume_queue, read_only=read_only)
        self.index = (IndexService(root / "index", config.max_hash_slot_num, config.max_index_num, read_only=read_only)
                      if config.message_index_enable else None)
        self.dispatcher = Dispatcher(self.cqs, self.index, clock)
        self.checkpoint: StoreCheckpoint | None = None
        self.flush_service: FlushService | None = None
        self.last_exit_ok = True
        self.page_cache_intact = False  # after a crash, set by `_open`: did only the writing process die?
        self.closed = False
        self._lock = StoreLock(root)
        self._pending: collections.deque[DispatchRequest] = collections.deque()
        self._listener_lock = threading.RLock()
        self.flush_lock = threading.Lock()  # flushing vs. file deletion by cleanup
        self.running_flags = RunningFlags()
        self.cleaner = CleanCommitLogService(root, config, self.commitlog, self.cqs, self.index, self.running_flags,
                                             self.flush_lock)
        self._refused = 0  # puts refused in a row (logged once per 50,000, as HookUtils does)
        # the master side of replication (store/ha DefaultHAService), attached by whoever starts it:
        # woken after every put, and waited on for SYNC_MASTER acknowledgements
        self.ha_service: Any = None

    # -- lifecycle --------------------------------------------------------------------------------
    @classmethod
    def open(cls, root: str | Path, config: StoreConfig | None = None, *, clock: Callable[[], int] | None = None,
             read_only: bool = False) -> MessageStore:
        """Open (and recover) the store at `root`. StoreError if unusable, StoreLocked if held."""
        root = Path(root)
        config = dataclasses.replace(config) if config is not None else StoreConfig()
        config.store_path_root_dir = root
        if root.exists() and not root.is_dir():
            raise StoreError(f"store path {root} is not a directory")
        if not root.exists():
            if read_only:
                raise StoreError(f"no store at {root}")
            try:
                root.mkdir(parents=True)
            except OSError as e:
                raise StoreError(f"cannot create store directory {root}: {e.strerror}") from None
        store = cls(root, config, clock or _now_ms, read_only)
        store._open()
        return store

    def _open(self) -> None:
        if not self.read_only:
            self._lock.acquire()
        try:
            self.last_exit_ok = not abort_path(self.root).exists()
            # after a crash, did only the writing process die (`abort_from_this_boot`)? Asked once:
            # the index's load and the recovery's starting point must take the same answer (a
            # clock stepped between two readings of the boot time could split them)
            self.page_cache_intact = (not self.last_exit_ok and not self.read_only
                                      and abort_from_this_boot(self.root))
            self.checkpoint = StoreCheckpoint(self.root / "checkpoint", read_only=self.read_only)
            self.commitlog.load()
            self.cqs.load()
            if self.index is not None:
                self.index.load(self.last_exit_ok, self.checkpoint.index_msg_timestamp,
                                page_cache_intact=self.page_cache_intact)
            self._recover()
            if not self.read_only:
                create_abort(self.root)
                self.cleaner.is_space_to_delete()  # the DISK_FULL flag holds from the first put
                self.flush_service = FlushService(self._flush_commitlog, self._flush_logics,
                                                  self.config.flush_interval_commit_log)
                self.flush_service.start()
        except BaseException:
            self._close_files()
            self._lock.release()
            raise

    def _recover(self) -> None:
        """`DefaultMessageStore.recover`: CQs, then the CommitLog from the trusted point, re-dispatching."""
        max_phy_in_cq = self.cqs.recover()
        cl = self.commitlog
        files = cl.mfq.files
        if not files:
            if not self.read_only:
                self.cqs.truncate_dirty(0)
            return
        needs_dispatch = None
        if self.last_exit_ok and self._cq_end_verified(max_phy_in_cq):
            # clean shutdown: everything up to the newest CQ unit was dispatched before `abort`
            # was removed, so only what lies beyond it (records without CQ units, e.g. PREPARED
            # transaction halves) is scanned and dispatched, as 5.3.2+ does
            start = max_phy_in_cq
            dispatch_from = max_phy_in_cq
        elif self.last_exit_ok:
            start = cl.recover_start_normal()
            if max_phy_in_cq < 0:
                start = files[0].from_offset
            else:
                holder = cl.mfq.find(max_phy_in_cq)
                if holder is not None:
                    start = min(start, holder.from_offset)
            dispatch_from = max_phy_in_cq
        else:
            cp = self.checkpoint
            assert cp is not None
            min_ts = cp.min_timestamp()
            indexed_to = self._index_kept_to()
            if self.index is not None and indexed_to is None:
                # getMinTimestampIndex, with the same 3 s slack as the other marks: records stored
                # in the same millisecond as the last full index file's end must be re-indexed too
                min_ts = min(min_ts, max(0, cp.index_msg_timestamp - 3000))
            start = cl.recover_start_abnormal(min_ts)
            if indexed_to is not None:
                # the kept index holds every key up to the last record it counted: the scan
                # starts no later than that record's file (and no later than the checkpoint's
                # marks allow, as Java's recoverAbnormally), not at the last full index file
                holder = cl.mfq.find(indexed_to)
                start = min(start, holder.from_offset if holder is not None else files[0].from_offset)
            dispatch_from = start
            needs_dispatch = self._needs_redispatch
            if indexed_to is not None:
                # records are dispatched in CommitLog order, ConsumeQueue units before index keys,
                # so with every mapped write still there, each record up to the last index
                # file's endPhyOffset has its units and keys: only those past it are looked at
                dispatch_from = max(dispatch_from, indexed_to + 1)
        on_record = None
        if not self.read_only:
            dispatcher, levels = self.dispatcher, self.delay_levels_ms

            def on_record(buf: memoryview, pos: int, commit_log_offset: int) -> None:
                if commit_log_offset >= dispatch_from:
                    dispatcher.dispatch(request_from_record(buf, pos, commit_log_offset, levels))

        process = cl.scan_valid(start, check_crc=self.config.check_crc_on_recover, on_record=on_record,
                                needs_dispatch=needs_dispatch, dispatch_from=dispatch_from)
        cl.truncate(process)
        self.cqs.truncate_dirty(process)
        cl.topic_queue_table = self.cqs.queue_offset_table()
        self.cqs.correct_min_offsets(cl.min_offset)
        if cl.mfq.files:
            last = cl.mfq.files[-1]
            ts = cl.first_record_timestamp(last)
            cl.last_store_timestamp = ts or 0

    def _index_kept_to(self) -> int | None:
        """After a process crash: the last index file's endPhyOffset (every key up to that record
        is in), None when the index was not kept (`IndexService.load`) or its last file is empty."""
        index = self.index
        if index is None or not index.files or not self.page_cache_intact:
            return None
        last = index.files[-1]
        return last.end_phy_offset if last.index_count > 1 else None

    def _cq_end_verified(self, max_phy_in_cq: int) -> bool:
        """Does the newest CQ unit point at a real record (magic and size)? Else distrust the CQs."""
        if max_phy_in_cq < 0:
            return False
        for cq in self.cqs.queues.values():
            if cq.max_physic_offset != max_phy_in_cq:
                continue
            unit = cq.get_unit(cq.max_offset_in_queue - 1)
            if unit is None or unit[0] + unit[1] != max_phy_in_cq:
                return False
            head = self.commitlog.read_bytes(unit[0], 8) if unit[1] >= 8 else None
            if head is None:
                mf = self.commitlog.mfq.find(unit[0])
                if mf is None or unit[0] - mf.from_offset + unit[1] > self.commitlog.file_size:
                    return False
                pos = unit[0] - mf.from_offset
                head = mf.mm[pos : pos + 8]
            size, magic = struct.unpack(">ii", head)
            return size == unit[1] and magic in (MESSAGE_MAGIC_CODE, MESSAGE_MAGIC_CODE_V2)
        return False

    def _needs_redispatch(self, offset: int, topic: str, queue_id: int, queue_offset: int, sys_flag: int,
                          total: int) -> bool:
        """Abnormal recovery: skip decoding records whose CQ unit and index entries already exist."""
        tran = sys_flag & TRANSACTION_TYPE_MASK
        if tran == TRANSACTION_NOT_TYPE or tran == TRANSACTION_COMMIT_TYPE:
            cq = self.cqs.queues.get((topic, queue_id))
            if cq is None or offset + total > cq.max_physic_offset:
                return True
        index = self.index
        if index is not None and tran != TRANSACTION_ROLLBACK_TYPE:
            # endPhyOffset is the last record whose keys are all in (the header is written after
            # them), so only records past it are re-indexed; an empty file has indexed nothing
            last = index.files[-1] if index.files else None
            if (last is None or last.index_count >= last.index_num or last.index_count <= 1
                    or offset > last.end_phy_offset):
                return True
        return False

    def start_index_process(self) -> bool:
        """Build the index in a second process from now on (indexproc.py); opt-in, off by default.

        The put path then appends CommitLog records and ConsumeQueue units only and the child
        builds the same index files on the other core, as ReputMessageService does behind the
        append. False (indexing stays in-process) without an index, read-only, where memfd is
        missing, or when the child does not start. Call it from a thread that lives as long as
        the store: the kernel kills the child when the thread that started it ends
        (PR_SET_PDEATHSIG), which the store then handles as a dead child (in-process from then on).
        """
        from rmqtool.store.indexclient import IndexProcess, IndexProcessError

        index = self.index
        if index is None or self.read_only or self.closed or index.offloaded or not hasattr(os, "memfd_create"):
            return False
        with self.commitlog.put_lock:
            proc = IndexProcess(self)
            try:
                index.flush()
                proc.start(self.commitlog.max_offset, index.last_full_end_timestamp)
            except (IndexProcessError, OSError) as e:
                log.warning("index process not started (%s): indexing in-process", e)
                proc.discard()
                return False
            index.close()  # the child writes the files from now on
            self.index = self.dispatcher.index = self.cleaner.index = proc  # type: ignore[assignment]
        return True

    def defer_index(self, wake: Callable[[Callable[[], None]], None]) -> bool:
        """Build index entries behind the append from now on (indexdefer.py): the put path queues
        them and the index's `drain` writes them; `wake(drain)` is called when a build is queued after
        a drain (serve schedules `drain` on its event loop). False without an in-process index."""
        from rmqtool.store.indexdefer import DeferredIndex

        index = self.index
        if index is None or self.read_only or self.closed or index.offloaded or isinstance(index, DeferredIndex):
            return False
        with self.commitlog.put_lock:
            deferred = DeferredIndex(index, wake, self.dispatch_failed)
            self.index = self.dispatcher.index = self.cleaner.index = deferred  # type: ignore[assignment]
        return True

    def close(self) -> None:
        """Clean shutdown: flush everything, write the checkpoint, remove `abort`, release `lock`."""
        if self.closed:
            return
        with self.commitlog.put_lock:
            self.closed = True
        if self.flush_service is not None:
            self.flush_service.stop()
        if self.index is not None and self.index.offloaded:
            self.index.drain()  # type: ignore[attr-defined]
        if not self.read_only:
            self._flush_commitlog()
            self._flush_logics()
        self._close_files()
        if not self.read_only:
            if not self.running_flags.has_write_error():
                remove_abort(self.root)
            self._lock.release()

    def _close_files(self) -> None:
        self.commitlog.close()
        self.cqs.close()
        if self.index is not None:
            self.index.close()
        if self.checkpoint is not None:
            self.checkpoint.close()

    def __enter__(self) -> MessageStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- flush ------------------------------------------------------------------------------------
    def _flush_commitlog(self) -> int:
        ts = self.commitlog.last_store_timestamp
        with self.flush_lock:
            offset = self.commitlog.flush()
        if ts and self.checkpoint is not None:
            self.checkpoint.physic_msg_timestamp = ts
            self.checkpoint.confirm_phy_offset = offset
            self.checkpoint.write()
        return offset

    def _flush_logics(self) -> None:
        with self.flush_lock:
            self._flush_logics_locked()

    def _flush_logics_locked(self) -> None:
        ts = self.dispatcher.last_cq_store_timestamp
        self.cqs.flush()
        cp = self.checkpoint
        if cp is None:
            return
        if ts:
            cp.logics_msg_timestamp = ts
        if self.index is not None:
            self.index.flush()
            if self.index.last_full_end_timestamp > cp.index_msg_timestamp:
                cp.index_msg_timestamp = self.index.last_full_end_timestamp
        cp.flush()

    def flush(self) -> None:
        """Make everything appended so far durable, with the checkpoint."""
        if self.read_only or self.closed:
            return
        self._flush_commitlog()
        self._flush_logics()

    # -- get --------------------------------------------------------------------------------------
    def get_message(self, topic: str, queue_id: int, offset: int, max_msgs: int = 32, *,
                    tags_codes: set[int] | None = None, filter: Callable[[MessageExt], bool] | None = None,
                    max_bytes: int = 256 * 1024, decode: bool = True) -> GetMessageResult:
        """`DefaultMessageStore.getMessage` (`reads.get_message`)."""
        return get_message(self.cqs, self.commitlog, topic, queue_id, offset, max_msgs, tags_codes=tags_codes,
                           filter=filter, max_bytes=max_bytes, decode=decode)

    # -- lookups ----------------------------------------------------------------------------------
    def get_max_offset_in_queue(self, topic: str, queue_id: int) -> int:
        cq = self.cqs.find(topic, queue_id)
        return cq.max_offset_in_queue if cq else 0

    def get_min_offset_in_queue(self, topic: str, queue_id: int) -> int:
        cq = self.cqs.find(topic, queue_id)
        return cq.min_offset_in_queue if cq else 0

    def get_commit_log_offset_in_queue(self, topic: str, queue_id: int, offset: int) -> int:
        cq = self.cqs.find(topic, queue_id)
        unit = cq.get_unit(offset) if cq else None
        return unit[0] if unit and unit[1] != BLANK_SIZE else 0

    def look_message_by_offset(self, commit_log_offset: int, size: int | None = None) -> MessageExt | None:
        if size is None:
            size = self.commitlog.record_size_at(commit_log_offset)
            if size is None or size <= 0:
                return None
        raw = self.commitlog.read_bytes(commit_log_offset, size)
        if raw is None:
            return None
        try:
            return decode_record(raw, check_crc=False)
        except (RecordError, Blank):
            return None

    def read_record_bytes(self, commit_log_offset: int, size: int) -> bytes:
        raw = self.commitlog.read_bytes(commit_log_offset, size)
        if raw is None:
            raise StoreError(f"no {size} bytes at commitlog offset {commit_log_offset}")
        return raw

    def query_message(self, topic: str, key: str, max_num: int = 32, begin_ts: int = 0,
                      end_ts: int | None = None) -> list[MessageExt]:
        """Messages whose UNIQ_KEY or a KEYS token is `key` (IndexFile lookup, newest first)."""
        if self.index is None:
            return []
        end = self.clock() if end_ts is None else end_ts
        out: list[MessageExt] = []
        seen: set[int] = set()
        for phys in self.index.query_offsets(topic, key, max_num * 4, begin_ts, end):
            if phys in seen:
                continue
            seen.add(phys)
            msg = self.look_message_by_offset(phys)
            if msg is None or msg.topic != topic:
                continue
            if msg.uniq_key != key and key not in (msg.keys or "").split(" "):
                continue  # a hash collision
            out.append(msg)
            if len(out) >= max_num:
                break
        return out

    def get_message_store_timestamp(self, topic: str, queue_id: int, offset: int) -> int:
        cq = self.cqs.find(topic, queue_id)
        unit = cq.get_unit(offset) if cq else None
        if unit is None or unit[1] == BLANK_SIZE:
            return -1
        msg = self.look_message_by_offset(unit[0], unit[1])
        return msg.store_timestamp if msg else -1

    def get_earliest_message_time(self, topic: str, queue_id: int) -> int:
        return self.get_message_store_timestamp(topic, queue_id, self.get_min_offset_in_queue(topic, queue_id))

    def get_offset_in_queue_by_time(self, topic: str, queue_id: int, timestamp: int) -> int:
        """First queue offset whose message was stored at or after `timestamp` (max offset if none)."""
        cq = self.cqs.find(topic, queue_id)
        if cq is None:
            return 0
        lo, hi = cq.min_offset_in_queue, cq.max_offset_in_queue
        while lo < hi:
            mid = (lo + hi) // 2
            ts = self.get_message_store_timestamp(topic, queue_id, mid)
            if ts >= timestamp:
                hi = mid
            else:
                lo = mid + 1
        return lo

    def topic_queues(self) -> dict[str, list[int]]:
        out: dict[str, list[int]] = {}
        for topic, qid in list(self.cqs.queues):
            out.setdefault(topic, []).append(qid)
        return {t: sorted(q) for t, q in sorted(out.items())}

    @property
    def min_phy_offset(self) -> int:
        return self.commitlog.min_offset

    @property
    def max_phy_offset(self) -> int:
        return self.commitlog.max_offset

    def clean_expired_files(self, now_ms: int | None = None, *, disk_usage: DiskUsage | None = None) -> int:
        """One round of `CleanCommitLogService` + CQ/index cleanup; returns CommitLog files deleted."""
        if self.read_only:
            return 0
        return self.cleaner.run(self.clock() if now_ms is None else now_ms, disk_usage)

    def check_disk_space(self, disk_usage: DiskUsage | None = None) -> bool:
        """Refresh the DISK_FULL flag (`isSpaceToDelete` without deleting); True while puts are refused."""
        if self.read_only:
            return False
        self.cleaner.is_space_to_delete(disk_usage)
        return not self.running_flags.is_writeable()
