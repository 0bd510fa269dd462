"""Open / put / get / reopen on real files with small file sizes."""

from __future__ import annotations

import struct

from rmqtool.layouts.message import decode_record
from rmqtool.store.messagestore import GetMessageStatus, MessageStore
from tests.store.conftest import make_msg


def test_put_then_get_returns_the_same_messages_with_offsets(store_dir, cfg):
    with MessageStore.open(store_dir, cfg) as store:
        results = [store.put_message(make_msg(i, queue_id=i % 2)) for i in range(10)]
        assert [r.queue_offset for r in results] == [0, 0, 1, 1, 2, 2, 3, 3, 4, 4]
        assert results[1].wrote_offset == results[0].wrote_offset + results[0].wrote_bytes
        got = store.get_message("TopicTest", 1, 0, 32)
        assert got.status == GetMessageStatus.FOUND
        assert [m.body for m in got.messages] == [make_msg(i).body for i in (1, 3, 5, 7, 9)]
        assert [m.queue_offset for m in got.messages] == [0, 1, 2, 3, 4]
        assert got.next_begin_offset == 5 and got.max_offset == 5
        # the raw bytes are the record as stored, with the fields the store filled in
        rec = decode_record(got.raw[0])
        assert rec.commit_log_offset == results[1].wrote_offset
        assert rec.store_timestamp == results[1].msg.store_timestamp > 0
        assert str(rec.store_host) == "127.0.0.1:10911"


def test_get_message_statuses(store_dir, cfg):
    with MessageStore.open(store_dir, cfg) as store:
        assert store.get_message("Nope", 0, 0).status == GetMessageStatus.NO_MATCHED_LOGIC_QUEUE
        for i in range(3):
            store.put_message(make_msg(i))
        assert store.get_message("TopicTest", 0, 3).status == GetMessageStatus.OFFSET_OVERFLOW_ONE
        bad = store.get_message("TopicTest", 0, 9)
        assert (bad.status, bad.next_begin_offset) == (GetMessageStatus.OFFSET_OVERFLOW_BADLY, 0)
        r = store.get_message("TopicTest", 0, 0, tags_codes={12345})
        assert (r.status, r.next_begin_offset) == (GetMessageStatus.NO_MATCHED_MESSAGE, 3)
        r = store.get_message("TopicTest", 0, 1, filter=lambda m: m.body.startswith(b"msg-2"))
        assert [m.queue_offset for m in r.messages] == [2]


def test_records_never_straddle_files_and_files_end_with_a_blank(store_dir, cfg):
    with MessageStore.open(store_dir, cfg) as store:
        results = [store.put_message(make_msg(i, body_size=1000)) for i in range(200)]
        size = cfg.mapped_file_size_commit_log
        for r in results:
            assert r.wrote_offset // size == (r.wrote_offset + r.wrote_bytes - 1) // size
            assert size - (r.wrote_offset + r.wrote_bytes) % size >= 8 or (r.wrote_offset + r.wrote_bytes) % size == 0
        files = sorted((store_dir / "commitlog").iterdir())
        assert len(files) >= 3
        assert [f.name for f in files] == [f"{i * size:020d}" for i in range(len(files))]
        for f in files[:-1]:
            data = f.read_bytes()
            assert len(data) == size
            ends = [r.wrote_offset + r.wrote_bytes - int(f.name) for r in results
                    if int(f.name) <= r.wrote_offset < int(f.name) + size]
            last_end = max(ends)
            assert struct.unpack_from(">ii", data, last_end) == (size - last_end, -875286124)
        got = store.get_message("TopicTest", 0, 0, 500, max_bytes=1 << 30)
        assert [m.body for m in got.messages] == [make_msg(i, body_size=1000).body for i in range(200)]


def test_a_new_store_reserves_chunks_ahead_of_its_writes_not_whole_files(store_dir):
    """Files keep Java's full sizes, but only blocks near the write positions are allocated."""
    from rmqtool.store.config import StoreConfig
    from rmqtool.store.index import INDEX_RESERVE_AHEAD
    from rmqtool.store.mappedfile import CQ_RESERVE_AHEAD, RESERVE_AHEAD

    with MessageStore.open(store_dir, StoreConfig()) as store:
        for i in range(10):
            assert store.put_message(make_msg(i)).ok
    cl = next((store_dir / "commitlog").iterdir())
    cq = next((store_dir / "consumequeue" / "TopicTest" / "0").iterdir())
    index = next((store_dir / "index").iterdir())
    sizes = {p: (p.stat().st_size, p.stat().st_blocks * 512) for p in (cl, cq, index)}
    assert sizes[cl][0] == 1 << 30 and sizes[cq][0] == 6_000_000 and sizes[index][0] == 420_000_040
    assert RESERVE_AHEAD <= sizes[cl][1] <= RESERVE_AHEAD + (1 << 20)
    assert CQ_RESERVE_AHEAD <= sizes[cq][1] <= CQ_RESERVE_AHEAD + (1 << 20)
    slots = 40 + 5_000_000 * 4
    assert slots + INDEX_RESERVE_AHEAD <= sizes[index][1] <= slots + INDEX_RESERVE_AHEAD + (1 << 20)
    assert sum(b for _s, b in sizes.values()) < 80 << 20  # was 1.45 GB with whole files reserved


def test_a_write_past_the_reserved_chunk_reserves_the_next_one_first(store_dir, monkeypatch):
    import errno
    import os

    from rmqtool.store import mappedfile
    from rmqtool.store.config import StoreConfig
    from rmqtool.store.messagestore import PutMessageStatus

    monkeypatch.setattr(mappedfile, "RESERVE_AHEAD", 256 << 10)
    cfg = StoreConfig(mapped_file_size_commit_log=8 << 20)
    with MessageStore.open(store_dir, cfg) as store:
        mf = store.commitlog.mfq
        assert store.put_message(make_msg(0, body_size=1000)).ok
        last = mf.last
        assert last.reserved_until == 256 << 10
        n = 1
        while last.wrote_position + 2 * 1200 < last.reserved_until:  # fill the first chunk
            assert store.put_message(make_msg(n, body_size=1000)).ok
            n += 1
        fd_blocks = os.fstat(last.fd).st_blocks * 512
        real = os.posix_fallocate

        def enospc(fd, offset, length):
            if fd == last.fd:
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
            return real(fd, offset, length)

        monkeypatch.setattr(os, "posix_fallocate", enospc)
        end = store.commitlog.max_offset
        r = store.put_messages([make_msg(n + i, body_size=1000) for i in range(3)])  # crosses the chunk end
        assert {x.status for x in r} == {PutMessageStatus.CREATE_MAPPED_FILE_FAILED}
        assert store.commitlog.max_offset == end and last.reserved_until == 256 << 10  # nothing written
        monkeypatch.setattr(os, "posix_fallocate", real)
        assert store.put_messages([make_msg(n + i, body_size=1000) for i in range(3)])[0].ok
        assert last.reserved_until >= last.wrote_position + (256 << 10)
        assert os.fstat(last.fd).st_blocks * 512 >= max(fd_blocks, last.reserved_until)
        total = n + 3
    with MessageStore.open(store_dir, cfg) as again:
        got = again.get_message("TopicTest", 0, 0, 1000, max_bytes=1 << 30)
        assert [m.body for m in got.messages] == [make_msg(i, body_size=1000).body for i in range(total)]


def test_reopen_continues_queue_offsets(store_dir, cfg):
    with MessageStore.open(store_dir, cfg) as store:
        for i in range(5):
            store.put_message(make_msg(i))
    assert not (store_dir / "abort").exists()
    with MessageStore.open(store_dir, cfg) as store:
        assert (store_dir / "abort").read_text().isdigit()
        assert store.get_max_offset_in_queue("TopicTest", 0) == 5
        assert store.put_message(make_msg(5)).queue_offset == 5
        assert store.topic_queues() == {"TopicTest": [0]}
