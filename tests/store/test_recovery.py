"""Recovery on real files: normal and abnormal exits, torn tails, CQ/index rebuilt past what they hold."""

from __future__ import annotations

import os
import shutil
import struct

import pytest

from rmqtool.store.messagestore import MessageStore
from tests.store.conftest import make_msg


def fill(store_dir, cfg, n, **kw):
    with MessageStore.open(store_dir, cfg) as store:
        return [store.put_message(make_msg(i, queue_id=i % 3, **kw)) for i in range(n)]


def crash_copy(store_dir, cfg, n):
    """Write n messages and leave the store as a crash would: `abort` present, no clean close."""
    results = fill(store_dir, cfg, n)
    (store_dir / "abort").write_text("12345")
    return results


def all_bodies(store):
    out = []
    for q in range(3):
        r = store.get_message("TopicTest", q, 0, 10_000, max_bytes=1 << 30)
        out += [(m.commit_log_offset, m.body) for m in r.messages]
    return [b for _, b in sorted(out)]


def commitlog_file(store_dir, offset, size):
    return store_dir / "commitlog" / f"{offset - offset % size:020d}"


@pytest.mark.parametrize("cut", ["mid-record", "garbage-after", "crc-flip", "bad-magic"])
def test_abnormal_recovery_cuts_the_torn_tail(store_dir, cfg, cut):
    results = crash_copy(store_dir, cfg, 120)
    size = cfg.mapped_file_size_commit_log
    victim = results[100]
    f = commitlog_file(store_dir, victim.wrote_offset, size)
    pos = victim.wrote_offset % size
    with open(f, "r+b") as fh:
        if cut == "mid-record":
            fh.seek(pos + victim.wrote_bytes // 2)
            fh.write(bytes(size - pos - victim.wrote_bytes // 2))
        elif cut == "garbage-after":
            end = results[-1].wrote_offset % size + results[-1].wrote_bytes
            if results[-1].wrote_offset // size == victim.wrote_offset // size:
                fh.seek(end)
                fh.write(b"\xde\xad\xbe\xef" * 16)
            fh.seek(pos)
            fh.write(b"\x00\x00\x00\x10garbage!")
        elif cut == "crc-flip":
            fh.seek(pos + victim.wrote_bytes - 40)  # inside the body/properties: body byte flipped below
            fh.seek(pos + 100)
            b = fh.read(1)
            fh.seek(pos + 100)
            fh.write(bytes([b[0] ^ 0xFF]))
        else:
            fh.seek(pos + 4)
            fh.write(b"\x01\x02\x03\x04")
    # later files (if any) hold records after the cut: they must go too
    with MessageStore.open(store_dir, cfg) as store:
        assert not store.last_exit_ok
        assert store.max_phy_offset == victim.wrote_offset
        assert all_bodies(store) == [make_msg(i).body for i in range(100)]
        last = store.commitlog.mfq.files[-1]
        assert last.path.name == f.name
        assert last.mm[pos:] == bytes(size - pos)
        assert sorted(p.name for p in (store_dir / "commitlog").iterdir())[-1] == f.name
        # queue offsets continue right after the surviving messages
        assert store.put_message(make_msg(100, queue_id=100 % 3)).queue_offset == 100 // 3
    with MessageStore.open(store_dir, cfg) as store:
        assert all_bodies(store) == [make_msg(i).body for i in range(101)]


def test_missing_consume_queues_and_index_are_rebuilt_after_a_crash(store_dir, cfg):
    crash_copy(store_dir, cfg, 150)
    shutil.rmtree(store_dir / "consumequeue")
    shutil.rmtree(store_dir / "index")
    with MessageStore.open(store_dir, cfg) as store:
        assert all_bodies(store) == [make_msg(i).body for i in range(150)]
        assert [m.uniq_key for m in store.query_message("TopicTest", "UNIQ00000077")] == ["UNIQ00000077"]
        assert len(store.query_message("TopicTest", "common", 1000, 0, 2**62)) == 150


def test_consume_queue_behind_the_commitlog_is_rebuilt_on_normal_open(store_dir, cfg):
    results = fill(store_dir, cfg, 60)
    # drop the two newest units of every queue, as if dispatch had not caught up before the exit
    for q in range(3):
        files = sorted((store_dir / "consumequeue" / "TopicTest" / str(q)).iterdir())
        data = bytearray(files[-1].read_bytes())
        n_units = sum(1 for i in range(0, len(data), 20) if data[i + 8 : i + 12] != b"\0\0\0\0")
        data[(n_units - 2) * 20 :] = bytes(len(data) - (n_units - 2) * 20)
        files[-1].write_bytes(bytes(data))
    with MessageStore.open(store_dir, cfg) as store:
        assert store.get_max_offset_in_queue("TopicTest", 0) == 20
        got = store.get_message("TopicTest", 0, 0, 100)
        assert [m.commit_log_offset for m in got.messages] == [r.wrote_offset for r in results[0::3]]


def test_consume_queue_units_beyond_the_commitlog_are_truncated(store_dir, cfg):
    results = crash_copy(store_dir, cfg, 30)
    size = cfg.mapped_file_size_commit_log
    f = commitlog_file(store_dir, results[20].wrote_offset, size)
    with open(f, "r+b") as fh:
        fh.truncate(0)
        fh.truncate(size)
    if results[20].wrote_offset % size:
        pass
    with MessageStore.open(store_dir, cfg) as store:
        cut = store.max_phy_offset
        assert cut <= results[20].wrote_offset
        for q in range(3):
            last = store.get_max_offset_in_queue("TopicTest", q)
            if last:
                assert store.get_commit_log_offset_in_queue("TopicTest", q, last - 1) < cut


def test_zero_length_last_file_is_deleted_and_wrong_size_fails(store_dir, cfg):
    from rmqtool.errors import StoreError

    fill(store_dir, cfg, 5)
    extra = store_dir / "commitlog" / f"{cfg.mapped_file_size_commit_log:020d}"
    extra.touch()
    with MessageStore.open(store_dir, cfg) as store:
        assert store.put_message(make_msg(5)).queue_offset == 2
    first = store_dir / "commitlog" / f"{0:020d}"
    os.truncate(first, 1000)
    with pytest.raises(StoreError):
        MessageStore.open(store_dir, cfg)


@pytest.mark.parametrize("read_only", [True, False])
def test_empty_index_file_left_by_a_kill_during_creation_is_skipped(store_dir, cfg, read_only):
    """A kill between open(O_CREAT) and ftruncate leaves a 0-byte index file: it held no key."""
    crash_copy(store_dir, cfg, 40)
    newest = sorted((store_dir / "index").iterdir())[-1]
    empty = newest.with_name(str(int(newest.name) + 1))
    empty.touch()
    store = MessageStore.open(store_dir, cfg, read_only=read_only)
    try:
        assert [m.uniq_key for m in store.query_message("TopicTest", "UNIQ00000037")] == ["UNIQ00000037"]
        if not read_only:
            store.put_message(make_msg(40))
            assert [m.uniq_key for m in store.query_message("TopicTest", "UNIQ00000040")] == ["UNIQ00000040"]
    finally:
        store.close()
    assert empty.exists() == read_only


def test_read_only_open_reads_valid_prefix_without_writing(store_dir, cfg):
    results = crash_copy(store_dir, cfg, 20)
    size = cfg.mapped_file_size_commit_log
    f = commitlog_file(store_dir, results[15].wrote_offset, size)
    with open(f, "r+b") as fh:
        fh.seek(results[15].wrote_offset % size + 4)
        fh.write(b"XXXX")
    before = {p: p.read_bytes() for p in store_dir.rglob("*") if p.is_file()}
    store = MessageStore.open(store_dir, cfg, read_only=True)
    try:
        assert store.max_phy_offset == results[15].wrote_offset
        assert store.look_message_by_offset(results[3].wrote_offset).body == make_msg(3).body
    finally:
        store.close()
    after = {p: p.read_bytes() for p in store_dir.rglob("*") if p.is_file()}
    assert before == after


def test_record_size_check_rejects_a_record_whose_fields_disagree(store_dir, cfg):
    results = crash_copy(store_dir, cfg, 10)
    size = cfg.mapped_file_size_commit_log
    f = commitlog_file(store_dir, results[7].wrote_offset, size)
    with open(f, "r+b") as fh:
        pos = results[7].wrote_offset % size
        fh.seek(pos)
        fh.write(struct.pack(">i", results[7].wrote_bytes + 1))
    with MessageStore.open(store_dir, cfg) as store:
        assert store.max_phy_offset == results[7].wrote_offset
