"""The CommitLog: append pre-encoded records, read them back, recover the valid prefix (formats.md §2, §8.2).

It knows nothing about ConsumeQueues or the index: recovery hands every good record it scans to
a callback (the dispatcher), so there is one dispatch path for live appends and for recovery.
Offsets are always file base + position, never a second counter.
"""

from __future__ import annotations

import os
import struct
import threading
from collections.abc import Callable, Iterator
from operator import attrgetter
from pathlib import Path

from rmqtool.errors import StoreError
from rmqtool.layouts.constants import (
    BLANK_MAGIC_CODE,
    BORNHOST_V6_FLAG,
    END_FILE_MIN_BLANK_LENGTH,
    MESSAGE_MAGIC_CODE,
    MESSAGE_MAGIC_CODE_V2,
    STOREHOSTADDRESS_V6_FLAG,
    TRANSACTION_COMMIT_TYPE,
    TRANSACTION_NOT_TYPE,
    TRANSACTION_TYPE_MASK,
)
from rmqtool.layouts.crc import crc32
from rmqtool.layouts.message import Blank, MessageExt, RecordError, decode_record
from rmqtool.store.mappedfile import MappedFile, MappedFileQueue
from rmqtool.store.scanparallel import scan_ahead

_Q = struct.Struct(">q")
_BLANK = struct.Struct(">ii")
_I32 = struct.Struct(">i")
_pack_q = _Q.pack_into
_QQ = struct.Struct(">qq")  # QUEUEOFFSET, PHYSICALOFFSET (bytes 20..36)
_HEAD = struct.Struct(">iiiiiqqiq")  # totalSize .. bornTimestamp (48 bytes)
_unpack_head = _HEAD.unpack_from
_unpack_mid = struct.Struct(">iqi").unpack_from  # reconsumeTimes, preparedTransactionOffset, bodyLength
_unpack_i16 = struct.Struct(">h").unpack_from
_unpack_i8 = struct.Struct(">b").unpack_from
_crc32 = crc32
_total_size = attrgetter("total_size")
_BLANK_RESULT = -1
_BAD_RESULT = -2

# (offset, topic, queue_id, queue_offset, sys_flag, total_size) -> decode and dispatch this record?
NeedsDispatch = Callable[[int, str, int, int, int, int], bool]


def check_record_fast(mv: memoryview, pos: int, end: int, check_crc: bool) -> tuple[int, int, int, int, int, int]:
    """`checkMessageAndReturnSize` without building a MessageExt: the same checks as `decode_record`.

    Returns (total_size, topic_pos, topic_len, queue_id, queue_offset, sys_flag); total_size is
    `_BLANK_RESULT` at an end-of-file blank and `_BAD_RESULT` for anything decode_record rejects.
    The body CRC is computed on a memoryview slice, so nothing is copied.
    """
    bad = (_BAD_RESULT, 0, 0, 0, 0, 0)
    if end - pos < 8:
        return bad
    try:
        (total, magic, crc, queue_id, _flag, queue_offset, _phys, sys_flag, _born) = _unpack_head(mv, pos)
    except struct.error:
        if end - pos >= 8 and _BLANK.unpack_from(mv, pos)[1] == BLANK_MAGIC_CODE:
            return (_BLANK_RESULT, 0, 0, 0, 0, 0)
        return bad
    if magic == BLANK_MAGIC_CODE:
        return (_BLANK_RESULT, 0, 0, 0, 0, 0)
    if (magic != MESSAGE_MAGIC_CODE and magic != MESSAGE_MAGIC_CODE_V2) or total < 91 or total > end - pos:
        return bad
    rec_end = pos + total
    p = pos + 48 + (20 if sys_flag & BORNHOST_V6_FLAG else 8) + 8 + (20 if sys_flag & STOREHOSTADDRESS_V6_FLAG else 8)
    if p + 16 > rec_end:
        return bad
    body_len = _unpack_mid(mv, p)[2]
    p += 16
    if body_len < 0 or p + body_len > rec_end:
        return bad
    if check_crc and _crc32(mv[p : p + body_len]) & 0x7FFFFFFF != crc:
        return bad
    p += body_len
    if magic == MESSAGE_MAGIC_CODE_V2:
        if p + 2 > rec_end:
            return bad
        topic_len = _unpack_i16(mv, p)[0]
        p += 2
    else:
        if p + 1 > rec_end:
            return bad
        topic_len = _unpack_i8(mv, p)[0]
        p += 1
    if topic_len < 0 or p + topic_len > rec_end:
        return bad
    topic_pos = p
    p += topic_len
    if p + 2 > rec_end:
        return bad
    props_len = _unpack_i16(mv, p)[0]
    p += 2
    if props_len < 0 or p + props_len != rec_end:
        return bad
    return (total, topic_pos, topic_len, queue_id, queue_offset, sys_flag)


# the fixed part of a record with IPv4 hosts, unpacked at once: totalSize, magic, bodyCRC,
# queueId, queueOffset, sysFlag, bodyLength (flag, physicalOffset, times, hosts, reconsumeTimes
# and preparedTransactionOffset skipped); the body starts right after it
_FIXED_V4 = struct.Struct(">iiii4xq8xi32x12xi")
_unpack_fixed_v4 = _FIXED_V4.unpack_from
_V6_FLAGS = BORNHOST_V6_FLAG | STOREHOSTADDRESS_V6_FLAG


def _scan_file(mv: memoryview, pos: int, file_size: int, base: int, check_crc: bool,
               on_record: Callable[[memoryview, int, int], None] | None,
               needs_dispatch: NeedsDispatch | None, dispatch_from: int = 0,
               limit: int | None = None) -> tuple[int, int]:
    """`scan_valid` over one file from `pos`: (position reached, last result of the check).

    With `limit` it returns at the first record boundary at or past it, as at the file's end.

    Recovery spends its time here, once per record, so the usual record (magic V1, IPv4
    hosts) is checked with one unpack, the CRC and a few comparisons that accept exactly what
    `check_record_fast` accepts; anything else (a blank, V2, IPv6, a bad record) is handed to
    `check_record_fast`, whose answer is final. Topic names are decoded once per distinct name.
    """
    crc32, unpack, fast_end = _crc32, _unpack_fixed_v4, file_size - 91
    stop = file_size if limit is None else min(limit, file_size)
    topics: dict[bytes, str] = {}
    total = 0
    while True:
        if pos <= fast_end:
            total, magic, crc, queue_id, queue_offset, sys_flag, body_len = unpack(mv, pos)
            rec_end = pos + total
            p = pos + 88 + body_len
            if (magic == MESSAGE_MAGIC_CODE and not sys_flag & _V6_FLAGS and 91 <= total <= file_size - pos
                    and 0 <= body_len and p < rec_end
                    and (not check_crc or crc32(mv[pos + 88 : p]) & 0x7FFFFFFF == crc)):
                topic_len = mv[p]
                topic_pos = p + 1
                q = topic_pos + topic_len
                props_len = rec_end - q - 2
                if topic_len < 128 and 0 <= props_len < 0x8000 and mv[q] == props_len >> 8 and (
                        mv[q + 1] == props_len & 0xFF):
                    if on_record is not None and pos >= dispatch_from:
                        if needs_dispatch is None:
                            on_record(mv, pos, base + pos)
                        else:
                            raw = mv[topic_pos:q].tobytes()
                            topic = topics.get(raw)
                            if topic is None:
                                topics[raw] = topic = str(raw, "utf-8", "replace")
                            if needs_dispatch(base + pos, topic, queue_id, queue_offset, sys_flag, total):
                                on_record(mv, pos, base + pos)
                    pos = rec_end
                    if pos >= stop:
                        return pos, total
                    continue
        total, topic_pos, topic_len, queue_id, queue_offset, sys_flag = check_record_fast(mv, pos, file_size, check_crc)
        if total < 0:
            return pos, total
        if on_record is not None and pos >= dispatch_from and (
                needs_dispatch is None
                or needs_dispatch(base + pos, str(mv[topic_pos : topic_pos + topic_len], "utf-8", "replace"),
                                  queue_id, queue_offset, sys_flag, total)):
            on_record(mv, pos, base + pos)
        pos += total
        if pos >= stop:
            return pos, total


class CommitLog:
    """Append-only record stream over a MappedFileQueue of `mapped_file_size_commit_log` files."""

    def __init__(self, directory: Path, file_size: int, *, read_only: bool = False) -> None:
        self.mfq = MappedFileQueue(directory, file_size, read_only=read_only)
        self.file_size = file_size
        self.read_only = read_only
        # the put lock: store timestamp, queue offsets and positions are assigned under it
        self.put_lock = threading.Lock()
        # topic-queue offset table (`CommitLog.topicQueueTable`): next queue offset per (topic, queueId)
        self.topic_queue_table: dict[tuple[str, int], int] = {}
        self.last_store_timestamp = 0  # store time of the newest appended record

    def load(self) -> None:
        self.mfq.load()

    # -- write ------------------------------------------------------------------------------------
    def append_batch_locked(self, msgs: list[MessageExt], parts: list[bytearray | bytes], now_ms: int) -> None:
        """Append encoded records in order (caller holds `put_lock`), as
        `DefaultAppendMessageCallback.doAppend` does each, copying runs of records into the
        mapped file with one slice assignment each.

        `parts` holds `encode_record_parts(msg)` of each message, 4 pieces per record, the first
        a bytearray: its QUEUEOFFSET, PHYSICALOFFSET and STORETIMESTAMP are patched in place.
        A record that would leave fewer than 8 spare bytes in the file goes to the next file
        after an end-of-file blank, so a run ends there. Fills each msg's offsets and time.
        """
        file_size = self.file_size
        mfq = self.mfq
        mf = mfq.files[-1] if mfq.files else None
        # every file the batch will need exists, its blocks reserved as far as the batch goes,
        # before a byte is written, so a full disk (DiskFull) fails the whole batch and leaves
        # the log as it was
        mfq.preallocate(self._new_files_needed(msgs, mf))
        mfq.reserve_for_append(sum(map(_total_size, msgs)), END_FILE_MIN_BLANK_LENGTH)
        if mf is None or mf.wrote_position >= file_size:
            mf = mfq.new_file(0)
        run_pos = pos = mf.wrote_position
        base = mf.from_offset
        run_from = 0  # first part of the run not yet copied
        table = self.topic_queue_table
        pack_qq, pack_q = _QQ.pack_into, _pack_q
        for i, (msg, head) in enumerate(zip(msgs, parts[::4], strict=True)):
            n = msg.total_size
            if n + END_FILE_MIN_BLANK_LENGTH > file_size - pos:
                self.write_run_locked(mf, run_pos, b"".join(parts[run_from : 4 * i]))
                self._write_blank(mf)
                mf = mfq.new_file(0)
                run_pos = pos = mf.wrote_position
                base = mf.from_offset
                run_from = 4 * i
            sys_flag = msg.sys_flag
            tran = sys_flag & TRANSACTION_TYPE_MASK
            if tran == TRANSACTION_NOT_TYPE or tran == TRANSACTION_COMMIT_TYPE:
                key = (msg.topic, msg.queue_id)
                queue_offset = table.get(key, 0)
                table[key] = queue_offset + 1
            else:
                queue_offset = 0  # PREPARED / ROLLBACK records take no queue offset
            phys = base + pos
            pack_qq(head, 20, queue_offset, phys)
            pack_q(head, 56 if not sys_flag & BORNHOST_V6_FLAG else 68, now_ms)
            msg.queue_offset = queue_offset
            msg.commit_log_offset = phys
            msg.store_timestamp = now_ms
            pos += n
        self.write_run_locked(mf, run_pos, b"".join(parts[run_from:]))
        self.last_store_timestamp = now_ms

    @staticmethod
    def write_run_locked(mf: MappedFile, pos: int, data: bytes) -> None:
        """Copy encoded records into `mf` at its write position `pos` (caller holds `put_lock`).

        Through `pwrite` on the file rather than a store into its mapping: the bytes land in the
        same page cache the mapping reads (readers and `flush`'s fdatasync see them at once), but
        without a page fault per fresh 4 KiB page of the log, which cost more CPU than the copy
        itself (1-2.5 µs per 1 KiB record against 0.3 µs, measured). Java's MappedFile writes
        through the mapping, or with transientStorePoolEnable through a FileChannel as here.
        """
        if data:
            done = os.pwrite(mf.fd, data, pos)
            while done < len(data):  # a regular file writes in full; keep going if it did not
                done += os.pwrite(mf.fd, memoryview(data)[done:], pos + done)
        mf.wrote_position = pos + len(data)

    def _new_files_needed(self, msgs: list[MessageExt], mf: MappedFile | None) -> int:
        """How many new files appending `msgs` opens (the same end-of-file rule as the append)."""
        file_size = self.file_size
        needed = 0
        if mf is None or mf.wrote_position >= file_size:
            needed, pos = 1, 0
        else:
            pos = mf.wrote_position
        if pos + sum(map(_total_size, msgs)) + END_FILE_MIN_BLANK_LENGTH <= file_size:
            return needed  # the whole batch fits where it starts: no record can cross an end
        for msg in msgs:
            n = msg.total_size
            if n + END_FILE_MIN_BLANK_LENGTH > file_size - pos:
                needed += 1
                pos = 0
            pos += n
        return needed

    def _write_blank(self, mf: MappedFile) -> None:
        max_blank = self.file_size - mf.wrote_position
        _BLANK.pack_into(mf.mm, mf.wrote_position, max_blank, BLANK_MAGIC_CODE)
        mf.wrote_position = self.file_size

    # -- read -------------------------------------------------------------------------------------
    @property
    def min_offset(self) -> int:
        return self.mfq.min_offset()

    @property
    def max_offset(self) -> int:
        return self.mfq.max_offset()

    def read_bytes(self, offset: int, size: int) -> bytes | None:
        """The `size` bytes at `offset`, or None when they are not (or no longer) in the log."""
        mf = self.mfq.find(offset)
        if mf is None or size <= 0:
            return None
        pos = offset - mf.from_offset
        if pos + size > mf.wrote_position:
            return None
        try:
            return mf.mm[pos : pos + size]
        except ValueError:  # the file was deleted by cleanup meanwhile
            return None

    def record_size_at(self, offset: int) -> int | None:
        mf = self.mfq.find(offset)
        if mf is None:
            return None
        pos = offset - mf.from_offset
        if pos + 4 > mf.wrote_position:
            return None
        return _I32.unpack_from(mf.mm, pos)[0]

    def decode_at(self, offset: int, *, check_crc: bool = False, read_body: bool = True) -> MessageExt:
        """Decode and check the record at `offset`; raises RecordError/Blank as `decode_record`."""
        mf = self.mfq.find(offset)
        if mf is None:
            raise RecordError("truncated", f"offset {offset} is not in the commitlog")
        return decode_record(mf.mm, offset - mf.from_offset, mf.wrote_position, check_crc=check_crc,
                             read_body=read_body)

    def iter_records(self, start: int, *, check_crc: bool = False, read_body: bool = True,
                     limit: int | None = None) -> Iterator[MessageExt]:
        """Records from `start` up to the write position (or `limit`), jumping end-of-file blanks."""
        offset = start
        end = self.max_offset if limit is None else limit
        while offset < end:
            mf = self.mfq.find(offset)
            if mf is None:
                return
            try:
                msg = decode_record(mf.mm, offset - mf.from_offset, mf.wrote_position, check_crc=check_crc,
                                    read_body=read_body)
            except Blank:
                offset = mf.from_offset + self.file_size
                continue
            yield msg
            offset += msg.total_size

    # -- recovery ---------------------------------------------------------------------------------
    def scan_valid(self, start: int, *, check_crc: bool, on_record: Callable[[memoryview, int, int], None] | None,
                   needs_dispatch: NeedsDispatch | None = None, dispatch_from: int = 0) -> int:
        """Check every record from `start` as `checkMessageAndReturnSize`; returns processOffset.

        Files are read in full (their write positions are not known yet). The scan stops at
        the first record that fails (bad magic, CRC, size, truncation, or the zero tail);
        a blank moves on to the next file if there is one. Records are checked with
        `check_record_fast`; only those `needs_dispatch` accepts (all, without it) are handed
        to `on_record(file_view, position_in_file, commit_log_offset)`, and none before
        `dispatch_from` (checked, not offered). The records before `dispatch_from` (all, without
        `on_record`) are checked on every core when there are many (`scanparallel`).
        """
        files = self.mfq.files
        if files and (on_record is None or dispatch_from > start):
            check_end = files[-1].from_offset + self.file_size if on_record is None else dispatch_from
            ahead = scan_ahead(self, start, check_end, check_crc)
            if ahead is not None:
                start = ahead  # a record boundary the scan from `start` passes, or where it ends
        return self.scan_range(start, check_crc=check_crc, on_record=on_record, needs_dispatch=needs_dispatch,
                               dispatch_from=dispatch_from)

    def scan_range(self, start: int, *, check_crc: bool, on_record: Callable[[memoryview, int, int], None] | None,
                   needs_dispatch: NeedsDispatch | None = None, dispatch_from: int = 0,
                   stop: int | None = None) -> int:
        """`scan_valid` on this core alone; with `stop`, it also ends at the first record
        boundary at or past `stop` (an offset below `stop` is where the valid records end)."""
        files = self.mfq.files
        if not files:
            return start
        file_size = self.file_size
        offset = start
        if offset >= files[-1].from_offset + file_size:
            return offset  # past the last file: where a scan that closed it ended
        mf = self.mfq.find(offset)
        if mf is None:
            return files[0].from_offset
        idx = files.index(mf)
        while True:
            if stop is not None and offset >= stop:
                return offset
            base = mf.from_offset
            mv = memoryview(mf.mm)
            try:
                pos, total = _scan_file(mv, offset - base, file_size, base, check_crc, on_record, needs_dispatch,
                                        dispatch_from - base, None if stop is None else stop - base)
            finally:
                mv.release()
            if total == _BAD_RESULT:
                return base + pos
            if total == _BLANK_RESULT or pos >= file_size:
                if idx + 1 >= len(files):
                    # a blank closes the last file: the stream ends at the file boundary
                    return base + file_size if total == _BLANK_RESULT else base + pos
                idx += 1
                mf = files[idx]
                offset = mf.from_offset
            else:
                return base + pos  # stopped at a boundary at or past `stop`

    def first_record_timestamp(self, mf: MappedFile) -> int | None:
        """STORETIMESTAMP of a file's first record, None if it does not start with a record."""
        try:
            msg = decode_record(mf.mm, 0, self.file_size, check_crc=False, read_body=False)
        except (Blank, RecordError):
            return None
        return msg.store_timestamp

    def recover_start_normal(self) -> int:
        """Normal exit: scan from the 3rd-last file (`recoverNormally`)."""
        files = self.mfq.files
        return files[max(0, len(files) - 3)].from_offset if files else 0

    def recover_start_abnormal(self, min_timestamp: int) -> int:
        """Abnormal exit: the last file whose first record was stored no later than `min_timestamp`."""
        files = self.mfq.files
        for mf in reversed(files):
            ts = self.first_record_timestamp(mf)
            if ts is not None and ts <= min_timestamp:
                return mf.from_offset
        return files[0].from_offset if files else 0

    def truncate(self, process_offset: int) -> None:
        """Cut the torn tail: positions set, later files deleted, torn bytes zeroed."""
        if self.mfq.files and process_offset < self.mfq.files[0].from_offset:
            raise StoreError(f"commitlog recovery offset {process_offset} is below the first file")
        self.mfq.truncate_dirty_files(process_offset, zero=not self.read_only)

    def flush(self) -> int:
        return self.mfq.flush()

    def close(self) -> None:
        self.mfq.close()
