"""inspect and verify never write, keep memory flat, and tolerate a tail that moves under them."""

from __future__ import annotations

import builtins
import io
import mmap
import os
import struct
import threading
import tracemalloc

from rmqtool.inspect.commitlog import scan_commitlog
from rmqtool.inspect.dissect import KINDS, dissect
from rmqtool.inspect.files import queue_files
from rmqtool.inspect.model import Filters
from rmqtool.inspect.render import write_hex, write_json
from rmqtool.inspect.verify import check_store
from rmqtool.layouts.message import MessageExt, encode_record
from rmqtool.layouts.net import Host


def test_nothing_is_opened_for_writing(stores, monkeypatch):
    real_open, real_os_open, real_mmap = builtins.open, os.open, mmap.mmap
    seen = []

    def guarded_open(file, mode="r", *a, **k):
        assert not set(mode) & set("wax+"), f"{file} opened with mode {mode}"
        seen.append(file)
        return real_open(file, mode, *a, **k)

    def guarded_os_open(path, flags, *a, **k):
        assert not flags & (os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC), f"{path} opened for writing"
        return real_os_open(path, flags, *a, **k)

    class GuardedMmap(real_mmap):
        def __new__(cls, fileno, length, *a, **k):
            assert k.get("access") == mmap.ACCESS_READ, "mmap must be read-only"
            return real_mmap.__new__(cls, fileno, length, *a, **k)

    monkeypatch.setattr(builtins, "open", guarded_open)
    monkeypatch.setattr(os, "open", guarded_os_open)
    monkeypatch.setattr(mmap, "mmap", GuardedMmap)
    root = stores / "damaged-crc-mismatch"
    assert list(check_store(root))
    assert not list(check_store(stores / "good-bcq-ext"))
    for root in (stores / "damaged-crc-mismatch", stores / "good-bcq-ext"):
        for kind in KINDS:
            path = root if kind in ("store", "consumequeue", "batchconsumequeue", "consumequeue_ext", "index",
                                    "timerlog", "timerwheel", "config", "revive", "inflight") else (
                root / {"commitlog": "commitlog", "checkpoint": "checkpoint", "timercheck": "config/timercheck"}[kind])
            write_hex(dissect(kind, path, Filters(raw=True, follow=True)), io.StringIO())
    assert seen


def _record(offset: int, i: int) -> bytes:
    m = MessageExt(topic="LiveTopic", body=b"x" * 200, properties={"KEYS": f"k{i}"}, queue_offset=i,
                   commit_log_offset=offset, store_host=Host("127.0.0.1", 10911), store_timestamp=1_700_000_000_000 + i)
    return encode_record(m)


def test_inspect_beside_a_writer_sees_a_prefix_and_no_errors(tmp_path):
    """A live broker appends into a preallocated file: readers must stop at the zero tail."""
    d = tmp_path / "commitlog"
    d.mkdir()
    path = d / "00000000000000000000"
    size = 4 << 20
    with open(path, "wb") as fh:
        fh.truncate(size)
    stop = threading.Event()

    def writer():
        fd = os.open(path, os.O_RDWR)
        pos = i = 0
        try:
            while not stop.is_set() and pos < size - 4096:
                rec = _record(pos, i)
                # write the body first and the size last, like a torn write racing a reader
                os.pwrite(fd, rec[4:], pos + 4)
                os.pwrite(fd, rec[:4], pos)
                pos += len(rec)
                i += 1
        finally:
            os.close(fd)

    t = threading.Thread(target=writer)
    t.start()
    try:
        for _ in range(5):
            items = list(dissect("commitlog", d, Filters()))
            offsets = [it.fields["queueOffset"] for it in items if it.kind == "message"]
            assert offsets == list(range(len(offsets)))
            assert all(it.kind in ("message", "problem") for it in items)
            problems = list(scan_commitlog(queue_files(d), tmp_path))
            # a reader racing the writer may see a record's body before its size: that is a torn
            # tail (or bytes after the zero tail) at the moving end, never anything else
            kinds = {p.kind for p in problems}
            assert kinds <= {"torn-tail", "size-mismatch", "crc-mismatch", "bad-magic", "nonzero-after-blank"}, problems
    finally:
        stop.set()
        t.join()
    assert [p.kind for p in scan_commitlog(queue_files(d), tmp_path)] == []


def test_memory_stays_flat_on_a_large_commitlog(tmp_path):
    d = tmp_path / "commitlog"
    d.mkdir()
    size = 16 << 20
    path = d / "00000000000000000000"
    rec0 = _record(0, 0)
    n = (size - 8) // len(rec0)
    with open(path, "wb") as fh:
        fh.truncate(size)
        buf = bytearray()
        for i in range(n):
            r = bytearray(rec0)
            struct.pack_into(">qq", r, 20, i, i * len(rec0))
            buf += r
            if len(buf) > (4 << 20):
                fh.write(buf)
                buf.clear()
        fh.write(buf)
        fh.write(struct.pack(">ii", size - n * len(rec0), -875286124))
    tracemalloc.start()
    problems = list(scan_commitlog(queue_files(d), tmp_path))
    out = io.StringIO()
    count = write_json((it for it in dissect("commitlog", d, Filters()) if it.kind == "message"), _Sink())
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert problems == [] and count == n
    assert peak < 8 << 20, f"peak {peak} bytes for a {size}-byte file"
    _ = out


class _Sink(io.TextIOBase):
    def write(self, s: str) -> int:
        return len(s)
