"""The slave's write path: master bytes into the CommitLog verbatim, then into its own queues.

`DefaultMessageStore.appendToCommitLog` + `CommitLog.appendData` + `ReputMessageService`: the
bytes a master transfers are copied into the slave's CommitLog at the same offsets (so its files
are byte-identical to the master's), and every record that is complete is dispatched into the
slave's own ConsumeQueues and index as a local append would be. A transfer may end inside a
record; that record is written and dispatched when the next transfer brings the rest.

Nothing already in the slave's CommitLog is ever rewritten: an append must start exactly at the
slave's max offset, and the first bytes after a (re)connection must begin a record that says it
lives at that offset (its PHYSICALOFFSET field) and continues that queue's offsets, else the
slave's data does not continue the master's and `ReplicaDiverged` stops the replication.
"""

from __future__ import annotations

import struct
from typing import Any

from rmqtool.errors import StoreError
from rmqtool.layouts.constants import (
    BLANK_MAGIC_CODE,
    MESSAGE_MAGIC_CODE,
    MESSAGE_MAGIC_CODE_V2,
    TRANSACTION_COMMIT_TYPE,
    TRANSACTION_NOT_TYPE,
    TRANSACTION_ROLLBACK_TYPE,
    TRANSACTION_TYPE_MASK,
)
from rmqtool.store.commitlog import check_record_fast
from rmqtool.store.dispatch import request_from_record

_II = struct.Struct(">ii")
# totalSize, magic, bodyCRC, queueId, flag, queueOffset, physicalOffset, sysFlag
_RECORD_HEAD = struct.Struct(">iiiiiqqi")
_RECORD_HEAD_SIZE = _RECORD_HEAD.size


class ReplicaError(StoreError):
    """The master's bytes cannot be stored as a replica (corrupt record, file size mismatch)."""


class ReplicaDiverged(ReplicaError):
    """The slave's CommitLog does not continue the master's: replicating would corrupt it."""


class ReplicaAppender:
    """Appends replicated bytes to a writable (slave) MessageStore and dispatches them."""

    def __init__(self, store: Any) -> None:
        self.store = store
        self.cl = store.commitlog
        self.file_size = self.cl.file_size
        # recovery dispatched (and truncated to) whole records: everything below max offset is done
        self.dispatch_from = self.cl.max_offset
        self.records = 0
        self.pending = b""  # the start of a record the master has not sent all of yet
        self._blank_file: int | None = None  # base of the file whose end-of-file blank is being copied

    @property
    def max_offset(self) -> int:
        return self.cl.max_offset

    def check_continues(self, offset: int, data: bytes | memoryview) -> bool | None:
        """Do `data` (the first bytes the master sends from `offset`) continue this store?

        True: yes; None: too few bytes to tell yet; raises ReplicaDiverged when they cannot.
        """
        n = len(data)
        if n < 8:
            return None
        size, magic = _II.unpack_from(data, 0)
        in_file = offset % self.file_size
        if magic == BLANK_MAGIC_CODE:
            if size != self.file_size - in_file:
                raise ReplicaError(f"the master's end-of-file blank at {offset} is {size} bytes, this store's files "
                                   f"leave {self.file_size - in_file}: its CommitLog file size differs")
            return True
        if magic not in (MESSAGE_MAGIC_CODE, MESSAGE_MAGIC_CODE_V2):
            raise ReplicaDiverged(f"the master's bytes at offset {offset} do not start a record (magic {magic:#x}): "
                                  "this store's CommitLog does not continue the master's")
        if n < _RECORD_HEAD_SIZE:
            return None
        _t, _m, _c, queue_id, _f, queue_offset, phys, sys_flag = _RECORD_HEAD.unpack_from(data, 0)
        if phys != offset:
            raise ReplicaDiverged(f"the master's record at offset {offset} says it lives at {phys}: "
                                  "this store's CommitLog does not continue the master's")
        tran = sys_flag & TRANSACTION_TYPE_MASK
        if tran == TRANSACTION_NOT_TYPE or tran == TRANSACTION_COMMIT_TYPE:
            expected = self.cl.topic_queue_table.get(self._topic_key(data, queue_id))
            if expected is not None and expected != queue_offset:
                raise ReplicaDiverged(f"the master's record at offset {offset} has queue offset {queue_offset}, "
                                      f"this store's queue is at {expected}: its CommitLog does not continue the "
                                      "master's")
        return True

    @staticmethod
    def _topic_key(data: bytes | memoryview, queue_id: int) -> tuple[str, int] | None:
        """(topic, queueId) of the record at the start of `data`, None if not all of it is there."""
        mv = memoryview(data)
        total = _II.unpack_from(mv, 0)[0]
        if total > len(mv):
            return None
        got = check_record_fast(mv, 0, total, False)
        if got[0] != total:
            return None
        return (str(mv[got[1] : got[1] + got[2]], "utf-8", "replace"), queue_id)

    @property
    def next_offset(self) -> int | None:
        """Where the master's next transfer must start: after what is written and held back.
        None in an empty store, where the master picks the start (a file start)."""
        if not self.cl.mfq.files and not self.pending:
            return None
        return self.cl.max_offset + len(self.pending)

    def reset(self) -> None:
        """A new connection: the master starts again from what is written; the held-back tail goes."""
        self.pending = b""

    def append(self, offset: int, data: bytes | memoryview) -> list[tuple[str, int]]:
        """Store the master's bytes `data` from `offset` (the store's next offset, or a file start
        in an empty store) and dispatch the records they complete; returns the (topic, queueId)
        pairs that got units.

        Only whole records are written (and the blank closing a file with its padding): the
        tail of a record cut by the transfer waits in memory for the rest, so a reader of the
        store (inspect, verify, a pull) never sees half a record, and a restart loses nothing
        the master will not send again from the offset this store reports.
        """
        cl = self.cl
        mfq = cl.mfq
        fs = self.file_size
        with cl.put_lock:
            if self.store.closed:
                raise StoreError("store is closed")
            expected = self.next_offset
            if expected is not None:
                if offset != expected:
                    raise ReplicaDiverged(f"transfer at offset {offset}, this store continues at {expected}")
            elif offset % fs:
                raise ReplicaError(f"the master starts at offset {offset}, not at a {fs}-byte CommitLog file start: "
                                   "its CommitLog file size differs from this store's")
            else:
                self.dispatch_from = offset
            if self.pending:
                buf: bytes | memoryview = self.pending + bytes(data)
                start = cl.max_offset
            else:
                buf, start = data, offset
            whole = self._whole_prefix(start, buf)
            view = memoryview(buf)
            pos = 0
            while pos < whole:
                mf = mfq.last
                if mf is None or mf.is_full():
                    mf = mfq.new_file(start + pos)
                n = min(mf.remaining, whole - pos)
                mf.append(view[pos : pos + n])
                pos += n
            self.pending = bytes(view[whole:])
            return self._dispatch_locked()

    def _whole_prefix(self, start: int, buf: bytes | memoryview) -> int:
        """How many bytes of `buf` (from CommitLog offset `start`) are whole records or blank padding."""
        fs = self.file_size
        n = len(buf)
        pos = 0
        off = start
        while pos < n:
            in_file = off % fs
            if self._blank_file == off - in_file:  # the padding after a blank runs to the file end
                take = min(fs - in_file, n - pos)
                pos += take
                off += take
                if off % fs == 0:
                    self._blank_file = None
                continue
            if n - pos < 8:
                break
            size, magic = _II.unpack_from(buf, pos)
            if magic == BLANK_MAGIC_CODE:
                self._blank_file = off - in_file
                continue
            if size < 8 or size > fs - in_file:
                raise ReplicaError(f"the master sent no valid record at offset {off} (size {size}, magic {magic:#x})")
            if n - pos < size:
                break
            pos += size
            off += size
        return pos

    def _dispatch_locked(self) -> list[tuple[str, int]]:
        """`ReputMessageService.doReput` up to the write position, whole records only.

        The units of each queue and the index keys of all records are collected and written
        together (`put_batch`, `build_index_batch`: byte for byte what one `dispatch` per record
        writes), which is most of what a slave spends per record.
        """
        cl = self.cl
        store = self.store
        fs = self.file_size
        levels = store.delay_levels_ms
        table = cl.topic_queue_table
        units: dict[tuple[str, int], list[tuple[int, int, int, int]]] = {}
        index_records: list[tuple[str, int, int, str | None, str | None]] = []
        indexing = store.index is not None
        last_cq_ts = 0
        end = cl.max_offset
        offset = self.dispatch_from
        try:
            while offset < end:
                mf = cl.mfq.find(offset)
                if mf is None:
                    break
                base = mf.from_offset
                pos = offset - base
                if pos >= fs:
                    offset = base + fs
                    continue
                wrote = mf.wrote_position
                mv = memoryview(mf.mm)
                try:
                    while wrote - pos >= 8:  # the records of this file, one view for all
                        size, magic = _II.unpack_from(mv, pos)
                        if magic == BLANK_MAGIC_CODE:
                            if size != fs - pos:
                                raise ReplicaError(f"end-of-file blank at {offset} is {size} bytes, the file "
                                                   f"leaves {fs - pos}: the master's CommitLog file size differs "
                                                   "from this store's")
                            pos = fs
                            offset = base + fs
                            break
                        if magic not in (MESSAGE_MAGIC_CODE, MESSAGE_MAGIC_CODE_V2) or size < 91 or size > fs - pos:
                            raise ReplicaError(f"the master sent no valid record at offset {offset} (size {size}, "
                                               f"magic {magic:#x})")
                        if size > wrote - pos:
                            break  # the rest comes with the next transfer
                        total, _tp, _tl, _q, _qo, sys_flag = check_record_fast(mv, pos, pos + size, False)
                        if total != size:
                            raise ReplicaError(f"the master's record at offset {offset} does not check "
                                               "(checkMessageAndReturnSize)")
                        req = request_from_record(mv, pos, offset, levels)
                        tran = sys_flag & TRANSACTION_TYPE_MASK
                        if tran == TRANSACTION_NOT_TYPE or tran == TRANSACTION_COMMIT_TYPE:
                            key = (req.topic, req.queue_id)
                            table[key] = req.consume_queue_offset + 1
                            queue = units.get(key)
                            if queue is None:
                                units[key] = queue = []
                            queue.append((offset, size, req.tags_code, req.consume_queue_offset))
                            last_cq_ts = req.store_timestamp
                        if indexing and tran != TRANSACTION_ROLLBACK_TYPE:
                            index_records.append((req.topic, offset, req.store_timestamp, req.uniq_key, req.keys))
                        cl.last_store_timestamp = req.store_timestamp
                        self.records += 1
                        offset += size
                        pos += size
                finally:
                    mv.release()
                if pos < fs:
                    break  # this file's write position: nothing more yet
        finally:
            self.dispatch_from = offset
            find = store.cqs.find_or_create
            for (topic, queue_id), queue in units.items():
                find(topic, queue_id).put_batch(queue)
            if last_cq_ts:
                store.dispatcher.last_cq_store_timestamp = last_cq_ts
            if index_records:
                store.index.build_index_batch(index_records)
        return list(units)
