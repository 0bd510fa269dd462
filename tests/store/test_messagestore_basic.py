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


def test_commitlog_files_are_created_with_their_blocks_reserved(store_dir, cfg):
    """A hole in a mapped file would be SIGBUS on a full disk: every block is allocated up front."""
    big = dict(cfg.__dict__)
    big["mapped_file_size_commit_log"] = 64 * 1024 * 1024
    from rmqtool.store.config import StoreConfig

    with MessageStore.open(store_dir, StoreConfig(**big)) as store:
        store.put_message(make_msg(1))
    f = next((store_dir / "commitlog").iterdir())
    st = f.stat()
    assert st.st_size == 64 * 1024 * 1024
    assert st.st_blocks * 512 >= 64 * 1024 * 1024


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
