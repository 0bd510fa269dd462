"""Index entries built in a second process behind the append (opt-in: `MessageStore.start_index_process`).

RocketMQ builds IndexFile keys in `ReputMessageService` with `CommitLogDispatcherBuildIndex`,
behind the append; here a child process does it on the other core. The put path appends
CommitLog records and ConsumeQueue units and hands the index keys its appender already
gathered (topic, store time, offsets, UNIQ_KEYs, KEYS: what `build_index_columns` takes) to
the child over a pipe; the child hashes and writes them with the same `build_index_columns`,
so the files come out byte for byte as in-process. (Reading the keys back out of the mapped
CommitLog in the child, `RecordReader`, cost 10 us per 1 KiB record against 4 us for the
index itself, so it is only used to catch up after the child died.) Look-ups, expiry and
close go down the same pipe, so each is answered once everything put before it is indexed;
the pipe's size bounds how far the child can lag (a full pipe makes the put wait). The parent
holds no writable index file while the child runs. If the child dies, the parent notices at
its next flush, look-up, expiry or close, logs it and falls back to in-process indexing: it
opens the index files as recovery does after a process crash (`roll_back_past_header`) and
indexes from the CommitLog what the child had not. The child asks the kernel to kill it when
the parent dies (PR_SET_PDEATHSIG) and stops at EOF on its pipe, so after kill -9 of the
parent recovery re-indexes from the index files' endPhyOffset as it does today.
"""

from __future__ import annotations

import ctypes
import io
import logging
import mmap
import os
import pickle
import select
import signal
import struct
import sys
import time
from multiprocessing.connection import Connection
from pathlib import Path

from rmqtool.layouts.constants import (
    BLANK_MAGIC_CODE,
    INDEX_ENTRY_SIZE,
    TRANSACTION_ROLLBACK_TYPE,
    TRANSACTION_TYPE_MASK,
)
from rmqtool.layouts.index import INDEX_ENTRY
from rmqtool.store.dispatch import build_index_columns, request_from_record
from rmqtool.store.index import IndexRecord, IndexService, index_key_hashes, record_keys
from rmqtool.store.indexframe import KIND as FRAME_KIND
from rmqtool.store.indexframe import decode_columns, frame_timestamp

log = logging.getLogger("rmqtool.store.indexproc")

LOOKUP_WAIT_S = 5.0  # the longest a look-up (or expiry) waits for the child's answer
PENDING_MAX = 128  # single puts' keys sent to the child together
REQUEST_TIMEOUT_S = 10.0  # no answer in this long (past a look-up's wait): the child is taken as dead
CLOSE_TIMEOUT_S = 120.0  # a clean close waits this long for the child's drain
CHUNK = 4096  # records per index call when catching up from the CommitLog
FLUSH_EVERY_S = 0.5  # the child's own index flush (FlushRealTimeService's interval)
_SHM_SIZE = 64
READ_SIZE = 1 << 20  # the child's read from the pipe: what the parent may be ahead (indexclient.PIPE_SIZE)
_FRAME = struct.Struct("!i")  # multiprocessing.connection's length prefix, which the parent writes
_Q = struct.Struct("<q")
# counters the child writes in a memfd both map: [0] offset below which every record is indexed,
# [8] endTimestamp of the last full index file it flushed (the checkpoint's indexMsgTimestamp)
_DONE, _FULL_TS = 0, 8


_unpack_ii = struct.Struct(">ii").unpack_from


class RecordReader:
    """Reads the records of a CommitLog directory through read-only mappings of its files."""

    def __init__(self, directory: Path, file_size: int) -> None:
        self.directory = directory
        self.file_size = file_size
        self._base = -1
        self._mm: mmap.mmap | None = None
        self._mv: memoryview | None = None

    def _map(self, base: int) -> memoryview | None:
        if self._base != base:
            self.close()
            path = self.directory / f"{base:020d}"
            try:
                with open(path, "rb") as f:
                    self._mm = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
            except (OSError, ValueError):
                return None
            self._base = base
            self._mv = memoryview(self._mm)
        return self._mv

    def records(self, start: int, last: int, limit: int) -> tuple[list[IndexRecord], int]:
        """Index work of the records starting in [start, last], at most `limit`; and where the next starts.

        ROLLBACK halves are left out (`IndexService.buildIndex` is not called for them); records
        without keys stay in, as in the live path (a full file moves on at them). A blank at a
        file's end moves to the next file.
        """
        out: list[IndexRecord] = []
        add = out.append
        pos = start
        size = self.file_size
        while pos <= last and len(out) < limit:
            base = pos - pos % size
            buf = self._map(base)
            if buf is None:
                break
            at = pos - base
            if at + 8 > size:
                pos = base + size
                continue
            total, magic = _unpack_ii(buf, at)
            if magic == BLANK_MAGIC_CODE or total <= 0:
                pos = base + size
                continue
            req = request_from_record(buf, at, pos, [])  # dispatch's reader: the fields the index takes
            if req.sys_flag & TRANSACTION_TYPE_MASK != TRANSACTION_ROLLBACK_TYPE:
                add((req.topic, pos, req.store_timestamp, req.uniq_key, req.keys))
            pos += total
        return out, pos

    def record_size(self, offset: int) -> int:
        base = offset - offset % self.file_size
        buf = self._map(base)
        at = offset - base
        if buf is None or at + 8 > self.file_size:
            return 0
        total, magic = struct.unpack_from(">ii", buf, at)
        return 0 if magic == BLANK_MAGIC_CODE else max(total, 0)

    def close(self) -> None:
        if self._mv is not None:
            self._mv.release()
            self._mv = None
        if self._mm is not None:
            self._mm.close()
            self._mm = None
            self._base = -1


def open_after_crash(directory: Path, hash_slot_num: int, index_num: int) -> IndexService:
    """The index files as a writer left them when it died with the page cache intact (rolled back)."""
    service = IndexService(directory, hash_slot_num, index_num)
    service.load(False, 0, page_cache_intact=True)
    return service


def resume_point(service: IndexService, reader: RecordReader, start: int) -> int:
    """Where indexing goes on after a writer died (rolled back by `open_after_crash`).

    Past the last file's endPhyOffset, the last record whose keys are all in. A last file left
    empty by the roll-back is set back to how it was created (its times and offsets those of the
    full file before it); the record the full file ended in may have had keys left over for
    it, which are put there, as `build_batch` does when a file fills in the middle of a record.
    `start` (the child's last reported position) when the index holds nothing.
    """
    if not service.files:
        return start
    last = service.files[-1]
    if last.index_count > 1:
        end_phy = last.end_phy_offset
        size = reader.record_size(end_phy)
        return end_phy + size if size else start
    if len(service.files) == 1:
        return start
    prev = service.files[-2]
    last.begin_timestamp = last.end_timestamp = prev.end_timestamp
    last.begin_phy_offset = last.end_phy_offset = phy = prev.end_phy_offset
    last.flush_header()
    size = reader.record_size(phy)
    if not size:
        return start
    records, _ = reader.records(phy, phy, 1)
    if records:
        topic, _phy, ts, uniq_key, key_text = records[0]
        keys = record_keys(uniq_key, key_text)
        mm, base, done = prev.mm, prev.entries_base, 0
        while done < prev.index_count - 1 and INDEX_ENTRY.unpack_from(
                mm, base + (prev.index_count - 1 - done) * INDEX_ENTRY_SIZE)[1] == phy:
            done += 1
        if done < len(keys):
            rest = keys[done:]
            last.put_keys(rest, phy, ts, index_key_hashes(rest, topic + "#"))
    return phy + size


def index_records(service: IndexService, records: list[IndexRecord]) -> None:
    """Index records in CommitLog order, each run of one store time with `build_index_columns`
    (what the live put path calls for one batch): the same files as one `build_index` each."""
    i, n = 0, len(records)
    while i < n:
        ts = records[i][2]
        j = i + 1
        while j < n and records[j][2] == ts:
            j += 1
        run = records[i:j]
        build_index_columns(service, [r[0] for r in run], ts, [r[1] for r in run], [r[3] for r in run],
                            [r[4] for r in run])
        i = j


def catch_up(service: IndexService, reader: RecordReader, pos: int, last: int) -> int:
    """Index every record starting in [pos, last]; returns the offset after the last one read."""
    while pos <= last:
        records, nxt = reader.records(pos, last, CHUNK)
        index_records(service, records)
        if nxt == pos:
            break
        pos = nxt
    return pos


# -- the child ---------------------------------------------------------------------------------
def _die_with_parent(parent: int) -> None:
    try:
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass
    if os.getppid() != parent:  # the parent died before the call took effect
        os._exit(0)


class FrameReader:
    """The child's end of the pipe: `Connection`'s framing ('!i' length, then the bytes), read
    as many frames at a time as are waiting, so frames of one store time can be indexed in one
    call and a busy child makes one read per burst. The reads go into one buffer made at the
    start (an `os.read` of the pipe's size allocates and maps that much each time: 35 us a read
    against 3 us)."""

    def __init__(self, fd: int) -> None:
        self._file = io.FileIO(fd, "rb", closefd=False)
        self._buf = bytearray(READ_SIZE)
        self._view = memoryview(self._buf)
        self._start = self._end = 0  # the bytes read and not yet handed out as frames
        self._poll = select.poll()
        self._poll.register(fd, select.POLLIN)

    def read(self, timeout_s: float) -> list[bytes] | None:
        """The whole frames waiting (maybe none: a frame's start only), None when nothing came in
        `timeout_s`; EOFError when the parent is gone."""
        if not self._poll.poll(timeout_s * 1000):
            return None
        start, end = self._start, self._end
        if end == len(self._buf):  # full: move the part read to the front, or grow for a frame this big
            if start:
                self._view[: end - start] = self._view[start:end]
            else:
                self._view.release()
                self._buf.extend(bytes(len(self._buf)))
                self._view = memoryview(self._buf)
            start, end = 0, end - start
        got = self._file.readinto(self._view[end:])
        if not got:
            raise EOFError
        end += got
        buf, out = self._buf, []
        unpack = _FRAME.unpack_from
        while end - start >= 4:
            size = unpack(buf, start)[0]
            if end - start - 4 < size:
                break
            out.append(bytes(self._view[start + 4 : start + 4 + size]))
            start += 4 + size
        if start == end:
            start = end = 0
        self._start, self._end = start, end
        return out


def _index_frames(service: IndexService, frames: list[bytes], i: int) -> tuple[int, int]:
    """Index frames[i] (of `encode_columns`) and the frames of the same store time right after it
    in one `build_index_columns`; returns the index of the next frame and the offset indexed to."""
    topics, ts, phys, uniq_keys, key_texts = decode_columns(frames[i])
    i += 1
    n = len(frames)
    while i < n and frames[i][0] == FRAME_KIND and frame_timestamp(frames[i]) == ts:
        more = decode_columns(frames[i])
        topics += more[0]
        phys += more[2]
        uniq_keys += more[3]
        key_texts += more[4]
        i += 1
    build_index_columns(service, topics, ts, phys, uniq_keys, key_texts)  # type: ignore[arg-type]
    return i, phys[-1] + 1


def child_main(argv: list[str]) -> None:
    """The loop of the child (argv: INDEX_DIR SLOTS NUM START SHM_FD PARENT; indexclient.IndexProcess.start).

    Messages come in put order on stdin: frames of `encode_columns` for one appended batch
    each (`build_index_columns`), or pickled: ("u", topics, storeTimestamp, phys, UNIQ_KEYs,
    KEYS) for a batch a frame cannot hold, ("b", records) for `IndexRecord`s, and the requests
    ("q", id, topic, key, maxNum, begin, end), ("d", id, commitLogMin), ("c", id), each
    answered on stdout once everything sent before it is indexed.
    """
    index_dir = Path(argv[0])
    slots, num, start, shm_fd, parent = (int(a) for a in argv[1:6])
    _die_with_parent(parent)
    shm = mmap.mmap(shm_fd, _SHM_SIZE)
    requests, replies = FrameReader(0), Connection(1, readable=False)
    service = IndexService(index_dir, slots, num)
    service.load(True, 0)
    _Q.pack_into(shm, _DONE, start)
    replies.send(("ready", start))
    last_flush = time.monotonic()
    read, pack, unpack, loads = requests.read, _Q.pack_into, _Q.unpack_from, pickle.loads
    full_ts = 0
    while True:
        try:
            frames = read(FLUSH_EVERY_S)
        except (EOFError, OSError):
            os._exit(0)  # the parent is gone: write nothing more, recovery takes over
        if frames is None:  # idle: flush now
            service.flush()
            last_flush = time.monotonic()
            continue
        i, n = 0, len(frames)
        while i < n:
            if frames[i][0] == FRAME_KIND:
                i, done = _index_frames(service, frames, i)
                pack(shm, _DONE, done)
            else:
                msg = loads(frames[i])
                i += 1
                kind = msg[0]
                if kind == "u":
                    build_index_columns(service, msg[1], msg[2], msg[3], msg[4], msg[5])
                    pack(shm, _DONE, msg[3][-1] + 1)
                elif kind == "b":
                    index_records(service, msg[1])
                    pack(shm, _DONE, msg[1][-1][1] + 1)
                elif kind == "q":
                    replies.send((msg[1], service.query_offsets(*msg[2:7])))
                elif kind == "d":
                    replies.send((msg[1], service.delete_expired(msg[2])))
                elif kind == "c":
                    service.flush()
                    pack(shm, _FULL_TS, service.last_full_end_timestamp)
                    service.close()
                    replies.send((msg[1], unpack(shm, _DONE)[0]))
                    return
            if service.last_full_end_timestamp != full_ts:  # a file filled: flushed before it moved on
                full_ts = service.last_full_end_timestamp
                pack(shm, _FULL_TS, full_ts)
        now = time.monotonic()
        if now - last_flush >= FLUSH_EVERY_S:
            service.flush()
            last_flush = now


if __name__ == "__main__":
    child_main(sys.argv[1:])
