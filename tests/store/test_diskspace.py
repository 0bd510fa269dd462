"""Full disks without privileges: injected ENOSPC and usage probes (diskspace, RunningFlags, puts).

The same behaviour on a real small file system (tmpfs, root only) is in test_disk_full_tmpfs.py.
"""

from __future__ import annotations

import errno
import logging
import os
from types import SimpleNamespace

import pytest

from rmqtool.store import diskspace
from rmqtool.store.diskspace import DiskFull, disk_used_ratio, map_read_only, reserve_blocks
from rmqtool.store.mappedfile import MappedFileQueue
from rmqtool.store.messagestore import MessageStore, PutMessageStatus
from tests.store.conftest import Clock, make_msg, small_config


def _enospc(*_a):
    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))


def test_reserve_blocks_allocates_every_block(tmp_path):
    path = tmp_path / "f"
    fd = os.open(path, os.O_RDWR | os.O_CREAT)
    try:
        reserve_blocks(fd, 1 << 20, "f")
        st = os.fstat(fd)
        assert st.st_size == 1 << 20 and st.st_blocks * 512 >= 1 << 20
    finally:
        os.close(fd)


def test_reserve_blocks_writes_zeros_where_fallocate_is_not_supported(tmp_path, monkeypatch):
    def unsupported(*_a):
        raise OSError(errno.EOPNOTSUPP, "not supported")

    monkeypatch.setattr(os, "posix_fallocate", unsupported)
    path = tmp_path / "f"
    path.write_bytes(b"keep")
    fd = os.open(path, os.O_RDWR)
    try:
        reserve_blocks(fd, 3 << 20, "f")
        st = os.fstat(fd)
        assert st.st_size == 3 << 20 and st.st_blocks * 512 >= 3 << 20
        assert os.lseek(fd, 0, os.SEEK_HOLE) == 3 << 20  # no hole left
        assert os.pread(fd, 8, 0) == b"keep" + bytes(4)  # and the content is what it was
    finally:
        os.close(fd)


def test_new_mapped_file_on_a_full_disk_is_a_clean_error_and_leaves_nothing(tmp_path, monkeypatch):
    q = MappedFileQueue(tmp_path / "q", 4096)
    q.new_file()
    monkeypatch.setattr(os, "posix_fallocate", _enospc)
    with pytest.raises(DiskFull, match="No space left"):
        q.new_file()
    with pytest.raises(DiskFull):
        q.preallocate(2)
    assert [p.name for p in (tmp_path / "q").iterdir()] == ["00000000000000000000"]
    assert len(q.files) == 1 and not q.pending
    q.close()


def test_disk_used_ratio_is_utilall_rounding(monkeypatch):
    # used = 1000 - 100 = 900 blocks, usable 50: 900 / 950 = 94.7...% -> rounded up to 0.95
    st = SimpleNamespace(f_blocks=1000, f_bfree=100, f_bavail=50, f_frsize=4096)
    monkeypatch.setattr(os, "statvfs", lambda _p: st)
    assert disk_used_ratio("x") == 0.95
    st.f_bfree = st.f_bavail = 1000 - 900
    assert disk_used_ratio("x") == 0.9
    monkeypatch.setattr(os, "statvfs", _enospc)
    assert disk_used_ratio("x") == -1.0


def test_map_read_only_copies_a_sparse_file_where_hole_reads_allocate(tmp_path, monkeypatch):
    path = tmp_path / "sparse"
    with open(path, "wb") as f:
        f.truncate(8 << 20)
        f.seek(5 << 20)
        f.write(b"data in the middle")
    monkeypatch.setattr(diskspace, "hole_reads_allocate", lambda fd: True)
    fd = os.open(path, os.O_RDONLY)
    try:
        mm = map_read_only(fd, 8 << 20)
        assert len(mm) == 8 << 20
        assert mm[(5 << 20) : (5 << 20) + 18] == b"data in the middle"
        assert mm[:16] == bytes(16) and mm[-16:] == bytes(16)
        mm.close()
    finally:
        os.close(fd)


# -- the store ---------------------------------------------------------------------------------
def test_puts_are_refused_above_the_warning_ratio_and_resume_below_it(store_dir, caplog):
    clock = Clock()
    store = MessageStore.open(store_dir, small_config(), clock=clock)
    try:
        assert store.put_message(make_msg(0)).ok
        caplog.set_level(logging.WARNING)
        assert store.check_disk_space(lambda p: 0.91) is True  # > diskSpaceWarningLevelRatio 0.90
        assert "mark disk full" in caplog.text
        r = store.put_messages([make_msg(1), make_msg(2)])
        assert [x.status for x in r] == [PutMessageStatus.SERVICE_NOT_AVAILABLE] * 2
        assert store.get_max_offset_in_queue("TopicTest", 0) == 1  # nothing stored
        # reads go on
        assert [m.body for m in store.get_message("TopicTest", 0, 0).messages] == [make_msg(0).body]
        # between the clean-forcibly (0.85) and the warning ratio the flag stays as it is
        assert store.check_disk_space(lambda p: 0.87) is True
        assert store.check_disk_space(lambda p: 0.80) is False
        assert "so mark disk ok" in caplog.text
        assert store.put_message(make_msg(3)).ok
        assert store.get_max_offset_in_queue("TopicTest", 0) == 2
    finally:
        store.close()


def test_a_put_that_cannot_get_a_commitlog_file_fails_whole_and_the_store_goes_on(store_dir, monkeypatch):
    cfg = small_config()
    store = MessageStore.open(store_dir, cfg, clock=Clock())
    try:
        n = 0
        while len(store.commitlog.mfq.files) < 2:
            assert store.put_message(make_msg(n, body_size=3000)).ok
            n += 1
        before = store.max_phy_offset
        monkeypatch.setattr(os, "posix_fallocate", _enospc)
        # a batch that crosses into a new file: nothing of it may be written
        batch = [make_msg(1000 + i, body_size=3000) for i in range(40)]
        results = store.put_messages(batch)
        assert {r.status for r in results} == {PutMessageStatus.CREATE_MAPPED_FILE_FAILED}
        assert store.max_phy_offset == before
        assert store.get_max_offset_in_queue("TopicTest", 0) == n
        monkeypatch.undo()
        results = store.put_messages(batch)
        assert all(r.ok for r in results)
        got = store.get_message("TopicTest", 0, n, 100, max_bytes=1 << 30)
        assert [m.body for m in got.messages] == [m.body for m in batch]
    finally:
        store.close()
    with MessageStore.open(store_dir, cfg) as again:
        assert again.get_max_offset_in_queue("TopicTest", 0) == n + 40


def test_a_consume_queue_file_that_cannot_be_made_stops_puts_until_restart(store_dir, monkeypatch):
    cfg = small_config()
    store = MessageStore.open(store_dir, cfg, clock=Clock())
    try:
        assert store.put_message(make_msg(0, topic="A")).ok
        monkeypatch.setattr(os, "posix_fallocate", _enospc)
        r = store.put_message(make_msg(1, topic="B"))  # a new queue: its first ConsumeQueue file fails
        assert r.ok  # in the CommitLog, acknowledged, as with Java's asynchronous dispatch
        assert store.put_message(make_msg(2, topic="A")).status == PutMessageStatus.SERVICE_NOT_AVAILABLE
        monkeypatch.undo()
    finally:
        store.close()
    # `abort` was kept: the restart re-dispatches from the CommitLog and B's unit is there
    with MessageStore.open(store_dir, cfg) as again:
        assert not again.last_exit_ok
        assert [m.body for m in again.get_message("B", 0, 0).messages] == [make_msg(1, topic="B").body]
        assert again.put_message(make_msg(3, topic="A")).ok


def test_cleanup_says_what_it_deleted_and_why(store_dir, caplog):
    cfg = small_config(file_reserved_time=1, delete_when="99", delete_file_batch_max=3)
    store = MessageStore.open(store_dir, cfg, clock=Clock())
    try:
        for i in range(120):
            store.put_message(make_msg(i, body_size=2000))
        caplog.set_level(logging.WARNING, logger="rmqtool.store.cleanup")
        assert store.clean_expired_files(disk_usage=lambda p: 0.88) == 3
        lines = [r for r in caplog.records if "deleted 3 CommitLog file(s)" in r.getMessage()]
        assert len(lines) == 1 and lines[0].levelno == logging.WARNING
        text = lines[0].getMessage()
        size = cfg.mapped_file_size_commit_log
        assert f"{0:020d}..{2 * size:020d}" in text and f"offsets [0, {3 * size})" in text
        assert "disk pressure: used 0.88 > diskMaxUsedSpaceRatio 0.75, deleted regardless of age" in text
    finally:
        store.close()


def _sparsify(path):
    """Rewrite `path` as an older rmqtool (or a Java broker) left it: data, then a hole to the end."""
    data = path.read_bytes().rstrip(b"\0")
    size = path.stat().st_size
    path.unlink()
    with open(path, "wb") as f:
        f.write(data)
        f.truncate(size)


def _has_hole(path) -> bool:
    """Are some of the file's blocks not allocated? (st_blocks: SEEK_HOLE also counts reserved but
    unwritten blocks as a hole on ext4 and tmpfs.)"""
    st = os.stat(path)
    return st.st_blocks * 512 < st.st_size


def test_files_of_an_older_sparse_store_get_their_blocks_before_they_are_written(store_dir):
    cfg = small_config(mapped_file_size_consume_queue=4000 * 20)
    with MessageStore.open(store_dir, cfg) as store:
        store.put_message(make_msg(0, topic="A"))
        store.put_message(make_msg(1, topic="B"))
    cl = next((store_dir / "commitlog").iterdir())
    cq_a = next((store_dir / "consumequeue" / "A" / "0").iterdir())
    cq_b = next((store_dir / "consumequeue" / "B" / "0").iterdir())
    for p in (cl, cq_a, cq_b):
        _sparsify(p)
        assert _has_hole(p)
    with MessageStore.open(store_dir, cfg) as store:
        assert not _has_hole(cl)  # the CommitLog's last file: at load
        assert _has_hole(cq_a) and _has_hole(cq_b)  # ConsumeQueues: not before they are written
        assert store.put_message(make_msg(2, topic="A")).ok
        assert not _has_hole(cq_a) and _has_hole(cq_b)
        assert [m.body for m in store.get_message("A", 0, 0).messages] == [make_msg(0).body, make_msg(2).body]


def test_cleanup_by_age_says_expired_and_a_round_that_deletes_nothing_is_silent(store_dir, caplog):
    import datetime
    import time

    cfg = small_config(file_reserved_time=1, delete_file_batch_max=2)
    store = MessageStore.open(store_dir, cfg, clock=Clock())
    try:
        for i in range(80):
            store.put_message(make_msg(i, body_size=2000))
        now = int(time.time() * 1000)
        store.config.delete_when = f"{datetime.datetime.fromtimestamp(now / 1000).hour:02d}"
        caplog.set_level(logging.WARNING, logger="rmqtool.store.cleanup")
        assert store.clean_expired_files(now, disk_usage=lambda p: 0.10) == 0  # all files are young
        assert not caplog.records
        old = time.time() - 7200
        for f in sorted((store_dir / "commitlog").iterdir())[:3]:
            os.utime(f, (old, old))
        assert store.clean_expired_files(now, disk_usage=lambda p: 0.10) == 2
        (rec,) = caplog.records
        assert rec.levelno == logging.WARNING
        assert rec.getMessage().startswith(f"deleted 2 CommitLog file(s) {0:020d}..{65536:020d}, offsets [0, 131072): "
                                           "expired: older than fileReservedTime 1 h")
    finally:
        store.close()


def test_the_batch_path_reserves_blocks_ahead_of_its_writes_and_falls_back_on_a_full_disk(tmp_path, monkeypatch):
    """put_bodies (SEND_BATCH, `rmqtool send` lines) copies records straight into the CommitLog:
    it too must reserve past the chunk reserved so far, else its stores land in a hole (SIGBUS
    on a full disk). Where the disk has no room it does nothing and leaves the batch to
    put_messages, which refuses it with RocketMQ's status."""
    from rmqtool.layouts.net import Host
    from rmqtool.store import mappedfile

    monkeypatch.setattr(mappedfile, "RESERVE_AHEAD", 16 * 1024)  # chunks of 16 KiB in 256 KiB files
    host = Host("127.0.0.1", 1)
    config = small_config(mapped_file_size_commit_log=256 * 1024, mapped_file_size_consume_queue=6000 * 20)

    def batch(store, name):
        return store.put_bodies("TopicTest", 0, [b"b" * 1000] * 10, {"UNIQ_KEY": "u"},
                                [f"{name}-{k}" for k in range(10)], 1, host)

    with MessageStore.open(tmp_path / "s", config) as store:
        assert store.put_message(make_msg(0)).status == PutMessageStatus.PUT_OK
        mf = store.commitlog.mfq.files[-1]
        assert mf.reserved_until == 16 * 1024
        for i in range(5):  # 5 x 11 KiB: past the first chunks, all in this file
            r = batch(store, f"b{i}")
            assert r is not None and r.status == "PUT_OK"
            assert mf.reserved_until >= mf.wrote_position, (i, mf.reserved_until, mf.wrote_position)
        real = os.posix_fallocate

        def full_for_the_commitlog(fd, offset, length):
            if fd == mf.fd:
                _enospc()
            return real(fd, offset, length)

        monkeypatch.setattr(os, "posix_fallocate", full_for_the_commitlog)
        for i in range(5):  # what is reserved is used up, then the batch path gives up
            end = store.commitlog.max_offset
            units = store.get_max_offset_in_queue("TopicTest", 0)
            r = batch(store, f"full{i}")
            if r is None:
                break
            assert mf.reserved_until >= mf.wrote_position
        else:
            raise AssertionError("the batch path kept writing with no blocks to reserve")
        assert store.commitlog.max_offset == end and store.get_max_offset_in_queue("TopicTest", 0) == units
        assert mf.wrote_position < mf.file_size - 20 * 1024  # not a full file: the reservation said no
        assert store.put_messages([make_msg(k, body_size=1000) for k in range(10)])[0].status == \
            PutMessageStatus.CREATE_MAPPED_FILE_FAILED
