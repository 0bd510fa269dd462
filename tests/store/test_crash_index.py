"""Abnormal recovery after a process crash: the index is kept and rolled back to its header,
and the one-unpack record check of the scan accepts exactly what `check_record_fast` accepts."""

from __future__ import annotations

import os
import shutil

from hypothesis import given, settings
from hypothesis import strategies as st

from rmqtool.layouts.index import INDEX_HEADER
from rmqtool.layouts.message import encode_record
from rmqtool.layouts.net import Host
from rmqtool.store import messagestore
from rmqtool.store.commitlog import _scan_file, check_record_fast
from rmqtool.store.lockfile import abort_from_this_boot, abort_path
from rmqtool.store.messagestore import MessageStore
from tests.store.conftest import make_msg


def _reference_scan(buf: bytes, check_crc: bool) -> tuple[int, list[int]]:
    """The plain loop over `check_record_fast`: (position reached, record positions)."""
    mv, pos, seen = memoryview(buf), 0, []
    while pos < len(buf):
        total = check_record_fast(mv, pos, len(buf), check_crc)[0]
        if total < 0:
            break
        seen.append(pos)
        pos += total
    return pos, seen


def _log(n: int) -> bytearray:
    out = bytearray()
    for i in range(n):
        m = make_msg(i, body_size=20 + 7 * i)
        if i % 3 == 2:
            m.born_host = Host("::1", 1234)  # IPv6: the fallback path
        m.commit_log_offset = len(out)
        out += encode_record(m)
    return out


@settings(max_examples=300, deadline=None)
@given(st.integers(1, 6), st.lists(st.tuples(st.integers(0, 10_000), st.integers(0, 255)), max_size=3),
       st.integers(0, 400), st.booleans())
def test_fast_scan_accepts_exactly_what_check_record_fast_accepts(n, flips, cut, check_crc):
    buf = _log(n)
    for where, value in flips:
        buf[where % len(buf)] = value
    buf = bytes(buf[: max(1, len(buf) - cut)])
    seen: list[int] = []
    pos, _ = _scan_file(memoryview(buf), 0, len(buf), 0, check_crc, lambda _mv, p, _o: seen.append(p), None)
    ref_pos, ref_seen = _reference_scan(buf, check_crc)
    assert seen == ref_seen
    assert pos == ref_pos


def _crash_copy(store_dir, cfg, tmp_path, torn: bool, one_key_counted: bool = False):
    """A store with 40 messages indexed and a 41st appended whose index header never got written
    (`torn`), or counts only its first key (`one_key_counted`: Java writes the header per key),
    copied while open (what kill -9 leaves: `abort` present, mapped writes all there)."""
    store = MessageStore.open(store_dir, cfg)
    try:
        for i in range(40):
            store.put_message(make_msg(i))
        last = store.index.files[-1]
        header = bytes(last.mm[:40])
        count = last.index_count
        phy = store.put_message(make_msg(40, KEYS="key40 common")).wrote_offset
        if torn:
            last.mm[:40] = header  # the writer died after the keys, before the header
        if one_key_counted:
            last.mm[:40] = header
            INDEX_HEADER.pack_into(last.mm, 0, last.begin_timestamp, last.end_timestamp, last.begin_phy_offset,
                                   phy, last.hash_slot_count, count + 1)
        copy = tmp_path / "crashed"
        shutil.copytree(store_dir, copy, ignore=shutil.ignore_patterns("lock"))
    finally:
        store.close()
    assert abort_path(copy).exists()
    return copy


def _assert_each_indexed_once(store):
    for i in range(41):
        assert [m.uniq_key for m in store.query_message("TopicTest", f"UNIQ{i:08d}", 10, 0, 2**62)] == [f"UNIQ{i:08d}"]
        assert [m.uniq_key for m in store.query_message("TopicTest", f"key{i}", 10, 0, 2**62)] == [f"UNIQ{i:08d}"]
    assert len(store.query_message("TopicTest", "common", 100, 0, 2**62)) == 41


def test_torn_index_put_is_rolled_back_and_redone_once(store_dir, cfg, tmp_path):
    copy = _crash_copy(store_dir, cfg, tmp_path, torn=True)
    assert abort_from_this_boot(copy)
    with MessageStore.open(copy, cfg) as store:
        _assert_each_indexed_once(store)


def test_partly_counted_last_record_is_indexed_again_whole(store_dir, cfg, tmp_path):
    copy = _crash_copy(store_dir, cfg, tmp_path, torn=False, one_key_counted=True)
    with MessageStore.open(copy, cfg) as store:
        _assert_each_indexed_once(store)


def test_complete_index_after_crash_is_kept_without_re_indexing(store_dir, cfg, tmp_path):
    copy = _crash_copy(store_dir, cfg, tmp_path, torn=False)
    with MessageStore.open(copy, cfg) as store:
        _assert_each_indexed_once(store)


def test_after_a_system_crash_the_index_is_rebuilt(store_dir, cfg, tmp_path, monkeypatch):
    copy = _crash_copy(store_dir, cfg, tmp_path, torn=True)
    os.utime(abort_path(copy), (0, 0))  # created before this boot: the page cache is not to be trusted
    assert not abort_from_this_boot(copy)
    kept = []
    real_load = messagestore.IndexService.load

    def load(self, last_exit_ok, ts, *, page_cache_intact=False):
        kept.append(page_cache_intact)
        return real_load(self, last_exit_ok, ts, page_cache_intact=page_cache_intact)

    monkeypatch.setattr(messagestore.IndexService, "load", load)
    with MessageStore.open(copy, cfg) as store:
        _assert_each_indexed_once(store)
    assert kept == [False]


@settings(max_examples=100, deadline=None)
@given(st.binary(max_size=5000))
def test_record_crc_is_zlibs(data):
    import zlib

    from rmqtool.layouts.crc import crc32

    assert crc32(data) == zlib.crc32(data)
    assert crc32(memoryview(data)[1:]) == zlib.crc32(data[1:])


def test_batch_dispatch_writes_the_files_one_put_at_a_time_writes(tmp_path, cfg):
    """dispatch_appended (tag codes and keys per batch) against the per-record path, byte for byte."""
    from tests.store.conftest import Clock

    def msgs():
        out = [make_msg(i, queue_id=i % 3, TAGS=f"t{i % 4}") for i in range(60)]
        out[5].properties["KEYS"] = "a b  c"
        del out[7].properties["TAGS"]
        del out[9].properties["UNIQ_KEY"]
        return out

    dirs = []
    for name, batched in (("one", False), ("batch", True)):
        root = tmp_path / name
        with MessageStore.open(root, cfg, clock=Clock()) as store:
            if batched:
                store.put_messages(msgs())
            else:
                for m in msgs():
                    store.put_message(m)
        dirs.append(root)
    for sub in ("consumequeue", "index"):
        files = sorted(p.relative_to(dirs[0]) for p in (dirs[0] / sub).rglob("*") if p.is_file())
        assert files
        for rel in files:
            assert (dirs[0] / rel).read_bytes() == (dirs[1] / rel).read_bytes(), rel


def _killed_after_flush(root, cfg, tmp_path, n: int):
    """`n` 1 KiB messages 10 s apart over several CommitLog files, flushed (checkpoint written),
    then 3 more unflushed; copied while open, as kill -9 leaves it. The index file never fills,
    so the checkpoint's index mark stays 0."""
    from tests.store.conftest import Clock

    clock = Clock()
    store = MessageStore.open(root, cfg, clock=clock)
    try:
        for i in range(n + 3):
            clock.now += 10_000
            store.put_message(make_msg(i, body_size=1024))
            if i == n - 1:
                store.flush()
        assert store.checkpoint.index_msg_timestamp == 0
        files = [mf.from_offset for mf in store.commitlog.mfq.files]
        copy = tmp_path / "crashed"
        shutil.copytree(root, copy, ignore=shutil.ignore_patterns("lock"))
    finally:
        store.close()
    return copy, files


def _scan_starts(monkeypatch) -> list[int]:
    starts: list[int] = []
    real = messagestore.CommitLog.scan_valid

    def scan_valid(self, start, **kw):
        starts.append(start)
        return real(self, start, **kw)

    monkeypatch.setattr(messagestore.CommitLog, "scan_valid", scan_valid)
    return starts


def _assert_all_indexed(store, n: int):
    for i in range(n):
        assert [m.uniq_key for m in store.query_message("TopicTest", f"key{i}", 10, 0, 2**62)] == [f"UNIQ{i:08d}"]
    assert store.get_max_offset_in_queue("TopicTest", 0) == n


def test_a_kept_index_lets_the_scan_start_at_the_checkpoints_file(store_dir, tmp_path, monkeypatch):
    """Java's recoverAbnormally starts at the last file whose first record is no newer than the
    checkpoint's marks; the kept index (process crash) needs nothing earlier than its own end."""
    from tests.store.conftest import small_config

    cfg = small_config(max_index_num=4096, max_hash_slot_num=512)
    copy, files = _killed_after_flush(store_dir, cfg, tmp_path, 200)
    assert len(files) >= 3 and abort_from_this_boot(copy)
    starts = _scan_starts(monkeypatch)
    with MessageStore.open(copy, cfg) as store:
        _assert_all_indexed(store, 203)
    assert starts == [files[-1]]


def test_after_a_system_crash_the_scan_starts_where_the_index_must_be_rebuilt(store_dir, tmp_path, monkeypatch):
    from tests.store.conftest import small_config

    cfg = small_config(max_index_num=4096, max_hash_slot_num=512)
    copy, files = _killed_after_flush(store_dir, cfg, tmp_path, 200)
    os.utime(abort_path(copy), (0, 0))
    starts = _scan_starts(monkeypatch)
    with MessageStore.open(copy, cfg) as store:
        _assert_all_indexed(store, 203)
    assert starts == [files[0]]


def test_the_boot_time_is_asked_once_per_recovery(store_dir, tmp_path, monkeypatch):
    """The index's load and the recovery's starting point take one answer to "did only the
    process die?". Asked twice, a clock stepped between the readings of the boot time could
    make load drop the files newer than the checkpoint while the scan trusted the last one
    left: the record whose keys a dropped file completed lost them (a CI run saw a key lost)."""
    from tests.store.conftest import Clock, small_config

    cfg = small_config(max_index_num=8, max_hash_slot_num=16)  # 7 keys a file: the 4th record's split
    clock = Clock()
    store = MessageStore.open(store_dir, cfg, clock=clock)
    try:
        for i in range(5):
            clock.now += 10_000
            store.put_message(make_msg(i, KEYS=f"key{i}"))
        files = store.index.files
        assert len(files) == 2 and files[0].end_phy_offset == files[1].begin_phy_offset  # split
        store.flush()  # the checkpoint's index mark: the full file's end
        copy = tmp_path / "crashed"
        shutil.copytree(store_dir, copy, ignore=shutil.ignore_patterns("lock"))
    finally:
        store.close()
    answers = iter([False, True])  # a system crash, then a process crash
    asked = []

    def from_this_boot(root):
        asked.append(root)
        return next(answers)

    monkeypatch.setattr(messagestore, "abort_from_this_boot", from_this_boot)
    with MessageStore.open(copy, cfg) as store:
        assert len(asked) == 1 and not store.page_cache_intact
        for i in range(5):
            assert [m.uniq_key for m in store.query_message("TopicTest", f"key{i}", 10, 0, 2**62)] == [f"UNIQ{i:08d}"]
            assert [m.uniq_key for m in store.query_message("TopicTest", f"UNIQ{i:08d}", 10, 0, 2**62)] == \
                [f"UNIQ{i:08d}"]
