"""Index entries built in a second process behind the append (opt-in: `MessageStore.start_index_process`).

RocketMQ builds IndexFile keys in `ReputMessageService` with `CommitLogDispatcherBuildIndex`,
behind the append; here a child process does it on the other core. The put path appends
CommitLog records and ConsumeQueue units only and publishes the start offset of the newest
complete record in a shared counter (a memfd both map); the child maps the CommitLog files
itself (same page cache), reads each record past its position and writes the index files
with the same `build_index_batch` the in-process path uses, so the files come out byte for byte
the same. Look-ups, expiry and close go to the child over a pipe, one request at a time: a
look-up waits until the child has indexed every record published when it was asked (at most
`LOOKUP_WAIT_S`, then it answers with what is there). The parent holds no writable index
file while the child runs. If the child dies, the parent notices at its next flush, look-up,
expiry or close, logs it and falls back to in-process indexing: it opens the index files as
recovery does after a process crash (`roll_back_past_header`) and indexes what the child had
not. The child asks the kernel to kill it when the parent dies (PR_SET_PDEATHSIG) and stops at
EOF on its pipe, so after kill -9 of the parent recovery re-indexes from the index files'
endPhyOffset as it does today.
"""

from __future__ import annotations

import ctypes
import logging
import mmap
import os
import signal
import struct
import sys
import time
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

from rmqtool.layouts.constants import (
    BLANK_MAGIC_CODE,
    INDEX_ENTRY_SIZE,
    TRANSACTION_ROLLBACK_TYPE,
    TRANSACTION_TYPE_MASK,
)
from rmqtool.layouts.index import INDEX_ENTRY
from rmqtool.store.dispatch import request_from_record
from rmqtool.store.index import IndexRecord, IndexService, index_key_hashes, record_keys

log = logging.getLogger("rmqtool.store.indexproc")

LOOKUP_WAIT_S = 3.0  # the longest a look-up waits for the child to reach its offset
REQUEST_TIMEOUT_S = 10.0  # no answer in this long (past a look-up's wait): the child is taken as dead
CLOSE_TIMEOUT_S = 120.0  # a clean close waits this long for the child's drain
CHUNK = 4096  # records per index call: requests and the parent's EOF are looked at between chunks
FLUSH_EVERY_S = 0.5  # the child's own index flush (FlushRealTimeService's interval)
_SHM_SIZE = 64
_Q = struct.Struct("<q")
# shared counters: [0] start offset of the newest complete record (-1: none yet), written by the
# parent; [8] offset below which every record is indexed, [16] endTimestamp of the last full index
# file the child flushed (the checkpoint's indexMsgTimestamp), written by the child
_PUBLISHED, _DONE, _FULL_TS = 0, 8, 16


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

        ROLLBACK halves are left out (`IndexService.buildIndex` is not called for them), as are
        records without a key (they write nothing). A blank at a file's end moves to the next file.
        """
        out: list[IndexRecord] = []
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
            total, magic = struct.unpack_from(">ii", buf, at)
            if magic == BLANK_MAGIC_CODE or total <= 0:
                pos = base + size
                continue
            req = request_from_record(buf, at, pos, [])
            if req.sys_flag & TRANSACTION_TYPE_MASK != TRANSACTION_ROLLBACK_TYPE and (req.uniq_key or req.keys):
                out.append((req.topic, pos, req.store_timestamp, req.uniq_key, req.keys))
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


def catch_up(service: IndexService, reader: RecordReader, pos: int, last: int) -> int:
    """Index every record starting in [pos, last]; returns the offset after the last one read."""
    while pos <= last:
        records, nxt = reader.records(pos, last, CHUNK)
        if records:
            service.build_index_batch(records)
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


def child_main(argv: list[str]) -> None:
    """`python -m rmqtool.store.indexproc INDEX_DIR COMMITLOG_DIR FILE_SIZE SLOTS NUM START SHM_FD PARENT RECOVER`."""
    index_dir, cl_dir = Path(argv[0]), Path(argv[1])
    file_size, slots, num, start, shm_fd, parent = (int(a) for a in argv[2:8])
    recover = argv[8] == "1"
    _die_with_parent(parent)
    shm = mmap.mmap(shm_fd, _SHM_SIZE)
    requests, replies = Connection(0, writable=False), Connection(1, readable=False)
    reader = RecordReader(cl_dir, file_size)
    if recover:
        service = open_after_crash(index_dir, slots, num)
        pos = resume_point(service, reader, start)
    else:
        service = IndexService(index_dir, slots, num)
        service.load(True, 0)
        pos = start
    _Q.pack_into(shm, _DONE, pos)
    replies.send(("ready", pos))
    waiting: list[tuple[Any, ...]] = []  # look-ups waiting for their offset
    last_flush = time.monotonic()
    idle = 0.001
    while True:
        published = _Q.unpack_from(shm, _PUBLISHED)[0]
        if published >= pos:
            records, nxt = reader.records(pos, published, CHUNK)
            if records:
                service.build_index_batch(records)
            stuck = nxt == pos  # a file not there (yet): try again after a pause
            pos = nxt
            _Q.pack_into(shm, _DONE, pos)
            _Q.pack_into(shm, _FULL_TS, service.last_full_end_timestamp)
            idle = 0.001
        else:
            stuck = False
        busy = published >= pos and not stuck
        if waiting:
            now = time.monotonic()
            for req in [r for r in waiting if r[7] < pos or r[8] <= now]:
                waiting.remove(req)
                replies.send((req[1], service.query_offsets(*req[2:7])))
        now = time.monotonic()
        if now - last_flush >= FLUSH_EVERY_S:
            service.flush()
            _Q.pack_into(shm, _FULL_TS, service.last_full_end_timestamp)
            last_flush = now
        if not requests.poll(0 if busy else (0.0005 if waiting else idle)):
            idle = min(idle * 2, 0.02)
            continue
        try:
            req = requests.recv()
        except (EOFError, OSError):
            os._exit(0)  # the parent is gone: write nothing more, recovery takes over
        kind = req[0]
        if kind == "q":
            waiting.append(req)
        elif kind == "d":
            replies.send((req[1], service.delete_expired(req[2])))
        elif kind == "c":
            pos = catch_up(service, reader, pos, _Q.unpack_from(shm, _PUBLISHED)[0])
            service.flush()
            _Q.pack_into(shm, _DONE, pos)
            _Q.pack_into(shm, _FULL_TS, service.last_full_end_timestamp)
            service.close()
            reader.close()
            replies.send((req[1], pos))
            return


if __name__ == "__main__":
    child_main(sys.argv[1:])
