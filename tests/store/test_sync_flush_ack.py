"""SYNC_FLUSH: a put is acknowledged only once its record, and every file before it, is on disk.

kill -9 cannot show an acknowledgement that came before the fdatasync (the page cache outlives
the process), so the crash rounds would pass with such a bug. Here each fdatasync of a CommitLog
file is recorded with how far that file had been written when it began, and every acknowledged
record is checked against it: its own bytes covered by a sync of its file that began after they
were written (group commit waking a putter for a flush that began before its append, or that
covers a lower offset), and each earlier file synced to its end (a record acknowledged in a new
file while the previous file's last records or its end-of-file blank were not durable: recovery
after a power loss stops at that gap and drops the acknowledged record). Files of 4 KiB, many
putters and a slow fdatasync make rolls and overlapping flushes frequent.
"""

from __future__ import annotations

import os
import threading
import time

from rmqtool.store.messagestore import MessageStore, PutMessageStatus
from tests.store.conftest import make_msg, small_config

FILE = 4096


def test_every_acknowledged_record_and_the_files_before_it_were_synced_first(tmp_path, monkeypatch):
    store = MessageStore.open(tmp_path / "s", small_config(mapped_file_size_commit_log=FILE,
                                                          flush_disk_type="SYNC_FLUSH"))
    durable: dict[int, int] = {}  # CommitLog file base -> bytes of it a finished fdatasync covers
    lock = threading.Lock()
    real = os.fdatasync

    def recording_fdatasync(fd: int) -> None:
        mf = next((m for m in list(store.commitlog.mfq.files) if m.fd == fd), None)
        written = mf.wrote_position if mf is not None else 0  # the bytes below it are in place
        time.sleep(0.002)  # a slow disk: appends and acks race the sync
        real(fd)
        if mf is not None:
            with lock:
                durable[mf.from_offset] = max(durable.get(mf.from_offset, 0), written)

    monkeypatch.setattr(os, "fdatasync", recording_fdatasync)
    problems: list[str] = []
    acked = []

    def putter(t: int) -> None:
        for i in range(40):
            r = store.put_message(make_msg(t * 1000 + i, body_size=100 + 37 * (i % 9)))
            assert r.status == PutMessageStatus.PUT_OK
            offset, size = r.wrote_offset, r.wrote_bytes
            base = offset - offset % FILE
            with lock:
                covered = durable.get(base, 0)
                behind = [b for b in range(0, base, FILE) if durable.get(b, 0) < FILE]
            if covered < offset + size - base:
                problems.append(f"record at {offset}+{size} acknowledged, its file synced to {base + covered}")
            if behind:
                problems.append(f"record at {offset} acknowledged, earlier files not synced to their end: {behind[:3]}")
            acked.append(offset)

    try:
        threads = [threading.Thread(target=putter, args=(t,)) for t in range(6)]
        for th in threads:
            th.start()
        for th in threads:
            th.join()
    finally:
        store.close()
    assert len(acked) == 240 and max(acked) > 20 * FILE  # many rolls happened
    assert not problems, problems[:5]
