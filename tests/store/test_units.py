"""ConsumeQueue pre-fill, index chains and rollover, lock/abort, config parsing, cleanup."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from rmqtool.errors import StoreError, StoreLocked
from rmqtool.layouts.constants import TRANSACTION_PREPARED_TYPE
from rmqtool.layouts.consumequeue import CQ_BLANK_UNIT, CQ_UNIT
from rmqtool.layouts.index import INDEX_ENTRY, INDEX_HEADER
from rmqtool.layouts.javahash import java_string_hash
from rmqtool.store.config import StoreConfig, parse_delay_levels
from rmqtool.store.consumequeue import ConsumeQueue
from rmqtool.store.index import IndexFile, index_key_hash
from rmqtool.store.messagestore import MessageStore
from tests.store.conftest import Clock, make_msg, small_config


def test_cq_first_unit_at_k_prefills_blanks(tmp_path):
    cq = ConsumeQueue(tmp_path, "T", 0, 200)
    cq.put(5000, 100, 7, 13)  # offset 13 -> file 200 (units 10..19), position 3*20
    files = sorted((tmp_path / "T" / "0").iterdir())
    assert [f.name for f in files] == [f"{200:020d}"]
    data = files[0].read_bytes()
    assert data[:60] == CQ_BLANK_UNIT * 3
    assert CQ_UNIT.unpack_from(data, 60) == (5000, 100, 7)
    assert (cq.min_offset_in_queue, cq.max_offset_in_queue) == (13, 14)
    assert not cq.put(5000, 100, 7, 14) or cq.max_offset_in_queue == 14  # duplicate range: skipped
    cq.close()
    cq2 = ConsumeQueue(tmp_path, "T", 0, 200)
    cq2.load()
    cq2.recover()
    cq2.correct_min_offset(0)
    assert (cq2.min_offset_in_queue, cq2.max_offset_in_queue, cq2.max_physic_offset) == (13, 14, 5100)
    cq2.close()


def test_java_hash_fast_path_agrees():
    for key in ["", "a", "TopicTest#UNIQ", "x" * 300, "T#" + "é" * 5, "polygenelubricants", "GydZG_"]:
        h = java_string_hash(key)
        assert index_key_hash(key) == (0 if h == -(2**31) else abs(h))
    assert index_key_hash("polygenelubricants") == 0  # hashCode() == Integer.MIN_VALUE


def test_index_chain_and_full_file_rollover(store_dir):
    cfg = small_config(max_hash_slot_num=4, max_index_num=6)
    clock = Clock()
    with MessageStore.open(store_dir, cfg, clock=clock) as store:
        results = []
        for i in range(12):
            clock.now += 1500
            results.append(store.put_message(make_msg(i, KEYS="same")))
        files = sorted((store_dir / "index").iterdir())
        # each message adds 2 keys (UNIQ_KEY, KEYS "same"); a file holds index_num - 1 = 5 entries
        assert len(files) == 5
        assert all(len(f.name) == 17 and f.stat().st_size == 40 + 4 * 4 + 6 * 20 for f in files)
        found = store.query_message("TopicTest", "same", 100, 0, 2**62)
        assert sorted(m.commit_log_offset for m in found) == [r.wrote_offset for r in results]
        one = store.query_message("TopicTest", "UNIQ00000005", 10, 0, 2**62)
        assert [m.commit_log_offset for m in one] == [results[5].wrote_offset]
        # time window: only the messages stored inside it
        lo, hi = results[3].msg.store_timestamp, results[6].msg.store_timestamp
        found = store.query_message("TopicTest", "same", 100, lo, hi)
        assert {m.store_timestamp for m in found} <= set(range(lo - 1000, hi + 1))
        assert results[4].msg.store_timestamp in {m.store_timestamp for m in found}
    raw = files[1].read_bytes()
    begin, end, bphy, ephy, slots, count = INDEX_HEADER.unpack_from(raw, 0)
    assert count == 6 and slots >= 1
    # the second file started where the first ended, then took its first entry's time
    first_hdr = INDEX_HEADER.unpack_from(files[0].read_bytes(), 0)
    entry1 = INDEX_ENTRY.unpack_from(raw, 40 + 16 + 20)
    assert entry1[2] == (begin - first_hdr[1]) // 1000


def test_index_file_put_key_matches_the_layout(tmp_path):
    f = IndexFile(tmp_path / "20240101000000000", 8, 4, create=True)
    assert f.put_key("T#a", 100, 10_000)
    assert f.put_key("T#a", 200, 12_500)
    assert f.put_key("T#b", 300, 13_000)
    assert not f.put_key("T#c", 400, 14_000)  # indexCount 4 == indexNum: full
    hdr = INDEX_HEADER.unpack_from(f.mm, 0)
    assert hdr == (10_000, 13_000, 100, 300, 2, 4)
    h = index_key_hash("T#a")
    slot = int.from_bytes(f.mm[40 + (h % 8) * 4 : 44 + (h % 8) * 4], "big")
    assert slot == 2
    assert INDEX_ENTRY.unpack_from(f.mm, 40 + 32 + 2 * 20) == (h, 200, 2, 1)
    out: list[int] = []
    f.select_phy_offsets(out, "T#a", 10, 0, 2**62)
    assert out == [200, 100]
    f.close()


def test_store_dir_that_is_a_file_is_a_store_error(tmp_path):
    p = tmp_path / "afile"
    p.write_text("x")
    with pytest.raises(StoreError, match="not a directory"):
        MessageStore.open(p, small_config())


def test_lock_held_by_another_process_is_store_locked(store_dir):
    store_dir.mkdir()
    code = (
        "import sys, time; from rmqtool.store.messagestore import MessageStore\n"
        "s = MessageStore.open(sys.argv[1]); print('open', flush=True); time.sleep(30)\n"
    )
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[2]))
    proc = subprocess.Popen([sys.executable, "-c", code, str(store_dir)], stdout=subprocess.PIPE, env=env)
    try:
        assert proc.stdout.readline() == b"open\n"
        with pytest.raises(StoreLocked, match="locked"):
            MessageStore.open(store_dir, small_config())
    finally:
        proc.kill()
        proc.wait()
    assert (store_dir / "abort").exists()  # the killed holder never closed cleanly
    with MessageStore.open(store_dir, small_config()) as store:
        assert not store.last_exit_ok
    assert (store_dir / "lock").read_bytes() == b"lock"
    assert not (store_dir / "abort").exists()


def test_second_open_in_the_same_process_is_refused(store_dir):
    with MessageStore.open(store_dir, small_config()):
        with pytest.raises(StoreLocked):
            MessageStore.open(store_dir, small_config())


def test_config_from_properties_and_delay_levels():
    cfg = StoreConfig.from_properties({"storePathRootDir": "/x", "brokerIP1": "10.0.0.1", "listenPort": "10912",
                                       "flushDiskType": "SYNC_FLUSH", "checkCRCOnRecover": "false",
                                       "mappedFileSizeCommitLog": "1024", "fancyThing": "1"})
    assert (cfg.broker_ip1, cfg.listen_port, cfg.flush_disk_type) == ("10.0.0.1", 10912, "SYNC_FLUSH")
    assert cfg.check_crc_on_recover is False and cfg.mapped_file_size_commit_log == 1024
    assert str(cfg.store_path_root_dir) == "/x" and cfg.extra == {"fancyThing": "1"}
    assert parse_delay_levels(StoreConfig().message_delay_level)[:5] == [1000, 5000, 10000, 30000, 60000]
    assert parse_delay_levels(StoreConfig().message_delay_level)[-1] == 7_200_000
    assert parse_delay_levels("1d 2h") == [86_400_000, 7_200_000]


def test_schedule_topic_tags_code_is_the_delivery_time(store_dir):
    clock = Clock()
    with MessageStore.open(store_dir, small_config(), clock=clock) as store:
        m = make_msg(1, topic="SCHEDULE_TOPIC_XXXX", queue_id=2, DELAY="3")
        store.put_message(m)
        m2 = make_msg(2, topic="SCHEDULE_TOPIC_XXXX", queue_id=17, DELAY="99")
        store.put_message(m2)
        assert store.cqs.find("SCHEDULE_TOPIC_XXXX", 2).get_unit(0)[2] == clock.now + 10_000
        assert store.cqs.find("SCHEDULE_TOPIC_XXXX", 17).get_unit(0)[2] == clock.now + 7_200_000
        store.put_message(make_msg(3))
        assert store.cqs.find("TopicTest", 0).get_unit(0)[2] == java_string_hash("TagA")


def test_sync_flush_put_returns_ok_and_many_threads_share_flushes(store_dir):
    import threading

    cfg = small_config(flush_disk_type="SYNC_FLUSH")
    with MessageStore.open(store_dir, cfg) as store:
        calls = []
        orig = store.commitlog.flush

        def counting_flush():
            calls.append(1)
            return orig()

        store.commitlog.flush = counting_flush
        statuses = []

        def send(t):
            for i in range(20):
                statuses.append(store.put_message(make_msg(t * 100 + i, queue_id=t)).status)

        threads = [threading.Thread(target=send, args=(t,)) for t in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert statuses.count("PUT_OK") == 160
        assert store.flush_service.flushed >= store.max_phy_offset
        assert len(calls) < 160  # group commit: fewer flushes than puts


def test_dispatch_listeners_see_requests_in_append_order(store_dir):
    with MessageStore.open(store_dir, small_config()) as store:
        seen = []
        store.dispatch_listeners.append(lambda req: seen.append((req.commit_log_offset, req.consume_queue_offset)))
        results = store.put_messages([make_msg(i) for i in range(5)])
        assert seen == [(r.wrote_offset, r.queue_offset) for r in results]


def test_an_arrival_listener_hears_only_the_topics_it_listens_to_asked_at_each_put(store_dir):
    """`add_arrival_listener(listener, topics)`: a put on another topic calls nothing; `topics`
    is asked at each put (a live container, as the topics pulls are held on)."""
    with MessageStore.open(store_dir, small_config()) as store:
        heard, waited = [], {}

        def listener(topic, queue_id):
            heard.append((topic, queue_id))

        store.add_arrival_listener(listener, waited)
        store.put_message(make_msg(0))
        store.put_messages([make_msg(1, topic="Other")])
        assert heard == []
        waited["TopicTest"] = 1  # a pull begins to wait on the topic
        store.put_message(make_msg(2, queue_id=1))
        store.put_messages([make_msg(3, topic="Other"), make_msg(4, queue_id=2)])
        assert heard == [("TopicTest", 1), ("TopicTest", 2)]
        store.remove_arrival_listener(listener)
        store.put_message(make_msg(5))
        assert heard == [("TopicTest", 1), ("TopicTest", 2)] and store.arrival_listeners == ()


def test_arrival_listeners_hear_each_queue_once_per_put_after_its_units_are_readable(store_dir):
    with MessageStore.open(store_dir, small_config()) as store:
        heard = []

        def listener(topic, queue_id):
            heard.append((topic, queue_id, store.get_max_offset_in_queue(topic, queue_id)))

        store.add_arrival_listener(listener)
        store.put_messages([make_msg(0, queue_id=1), make_msg(1, queue_id=0), make_msg(2, queue_id=1),
                            make_msg(3, topic="Other")])
        assert heard == [("TopicTest", 1, 2), ("TopicTest", 0, 1), ("Other", 0, 1)]
        heard.clear()
        store.put_message(make_msg(4, queue_id=0))
        assert heard == [("TopicTest", 0, 2)]
        heard.clear()
        half = make_msg(5, queue_id=2)
        half.sys_flag = TRANSACTION_PREPARED_TYPE  # a PREPARED record gets no unit: nothing arrived
        store.put_message(half)
        store.put_messages([make_msg(6, queue_id=3), half])
        assert heard == [("TopicTest", 3, 1)]


def test_put_hook_may_rewrite_the_topic(store_dir):
    with MessageStore.open(store_dir, small_config()) as store:
        def hook(msg):
            msg.topic = "Rewritten"
            return msg

        store.put_hooks.append(hook)
        store.put_message(make_msg(1))
        assert store.topic_queues() == {"Rewritten": [0]}


def test_a_put_hook_with_property_keys_is_called_only_for_messages_with_one_of_them(store_dir):
    """`put_message` skips a hook whose `property_keys` the message has none of (the schedule
    hook's DELAY and timer keys); every other hook, and `put_messages`, call it as before."""
    with MessageStore.open(store_dir, small_config()) as store:
        seen = []

        def hook(msg):
            seen.append(msg.properties["UNIQ_KEY"])
            msg.topic = "Rewritten"
            return msg

        hook.property_keys = frozenset({"X_MARK"})
        store.put_hooks.append(hook)
        store.put_message(make_msg(1))
        store.put_message(make_msg(2, X_MARK="1"))
        assert seen == ["UNIQ00000002"]
        assert store.topic_queues() == {"TopicTest": [0], "Rewritten": [0]}


def test_lookups_by_time_and_offset(store_dir):
    clock = Clock()
    with MessageStore.open(store_dir, small_config(), clock=clock) as store:
        rs = []
        for i in range(10):
            clock.now += 1000
            rs.append(store.put_message(make_msg(i)))
        assert store.get_offset_in_queue_by_time("TopicTest", 0, rs[4].msg.store_timestamp) == 4
        assert store.get_offset_in_queue_by_time("TopicTest", 0, rs[4].msg.store_timestamp - 1) == 4
        assert store.get_earliest_message_time("TopicTest", 0) == rs[0].msg.store_timestamp
        assert store.get_message_store_timestamp("TopicTest", 0, 9) == rs[9].msg.store_timestamp
        assert store.look_message_by_offset(rs[2].wrote_offset).body == make_msg(2).body
        assert store.read_record_bytes(rs[2].wrote_offset, rs[2].wrote_bytes)[:4] == rs[2].wrote_bytes.to_bytes(4, "big")
        assert store.look_message_by_offset(10**9) is None


def test_cleanup_by_time_disk_ratio_and_logics(store_dir):
    clock = Clock(1_700_000_000_000)
    cfg = small_config(file_reserved_time=1, delete_when="99", delete_file_batch_max=2)
    store = MessageStore.open(store_dir, cfg, clock=clock)
    try:
        results = [store.put_message(make_msg(i, body_size=2000)) for i in range(200)]
        files = sorted((store_dir / "commitlog").iterdir())
        assert len(files) >= 6
        old = time.time() - 7200
        for f in files[:4]:
            os.utime(f, (old, old))
        now = int(time.time() * 1000)
        # not the hour, disk fine: nothing happens
        assert store.clean_expired_files(now, disk_usage=lambda p: 0.10) == 0
        # disk over diskMaxUsedSpaceRatio: old files go, at most 2 per round, young ones stay
        assert store.clean_expired_files(now, disk_usage=lambda p: 0.80) == 2
        assert store.clean_expired_files(now, disk_usage=lambda p: 0.80) == 2
        assert store.clean_expired_files(now, disk_usage=lambda p: 0.80) == 0
        assert store.min_phy_offset == 4 * cfg.mapped_file_size_commit_log
        # ConsumeQueue min offset follows the commitlog
        first_kept = next(i for i, r in enumerate(results) if r.wrote_offset >= store.min_phy_offset)
        assert store.get_min_offset_in_queue("TopicTest", 0) >= first_kept - 10
        got = store.get_message("TopicTest", 0, 0)
        assert got.status == "OFFSET_TOO_SMALL"
        got = store.get_message("TopicTest", 0, got.next_begin_offset)
        assert got.status == "FOUND" and got.messages[0].commit_log_offset >= store.min_phy_offset
        # over diskSpaceCleanForciblyRatio: age ignored, but never the last file
        assert store.clean_expired_files(now, disk_usage=lambda p: 0.88) == 2
        while store.clean_expired_files(now, disk_usage=lambda p: 0.95):
            pass
        assert len(list((store_dir / "commitlog").iterdir())) == 1
        # the hour in deleteWhen triggers time-based deletion
        import datetime

        hour = datetime.datetime.fromtimestamp(now / 1000).hour
        store.config.delete_when = f"{(hour + 1) % 24:02d};{hour:02d}"
        from rmqtool.store.cleanup import is_time_to_delete

        assert is_time_to_delete(store.config.delete_when, now)
    finally:
        store.close()


def test_checkpoint_is_kept_current(store_dir):
    from rmqtool.layouts.checkpoint import STORE_CHECKPOINT

    clock = Clock()
    with MessageStore.open(store_dir, small_config(), clock=clock) as store:
        for i in range(5):
            clock.now += 10
            store.put_message(make_msg(i))
        store.flush()
        data = (store_dir / "checkpoint").read_bytes()
        assert len(data) == 4096
        physic, logics, index_ts, _master, confirm = STORE_CHECKPOINT.unpack_from(data)
        assert physic == logics == clock.now
        assert confirm == store.max_phy_offset
        assert index_ts == 0  # no index file is full yet


@pytest.mark.parametrize("kind", ["zlib", "lz4", "zstd"])
def test_compressed_bodies_and_ipv6_born_hosts_round_trip(store_dir, kind):
    from rmqtool.layouts.message import compress_body, decode_record
    from rmqtool.layouts.net import Host

    clock = Clock()
    with MessageStore.open(store_dir, small_config(), clock=clock) as store:
        plain = b"hello " * 200
        body, flag = compress_body(plain, kind)
        m = make_msg(1)
        m.body, m.sys_flag, m.born_host = body, flag, Host("::1", 4242)
        r = store.put_message(m)
        got = store.get_message("TopicTest", 0, 0).messages[0]
        assert got.decompressed_body() == plain
        rec = decode_record(store.read_record_bytes(r.wrote_offset, r.wrote_bytes), check_crc=True)
        assert (rec.store_timestamp, rec.commit_log_offset, rec.born_host) == (clock.now, r.wrote_offset, Host("::1", 4242))
        assert rec.sys_flag & 0x10 and rec.sys_flag & flag == flag


def test_transaction_prepared_records_take_no_queue_offset(store_dir):
    with MessageStore.open(store_dir, small_config()) as store:
        prepared = make_msg(1)
        prepared.sys_flag = 0x4
        r = store.put_message(prepared)
        assert r.queue_offset == 0 and store.get_max_offset_in_queue("TopicTest", 0) == 0
        assert store.put_message(make_msg(2)).queue_offset == 0
        # PREPARED records are still indexed (every type except ROLLBACK)
        assert [m.uniq_key for m in store.query_message("TopicTest", "UNIQ00000001")] == ["UNIQ00000001"]


def test_put_keys_equals_put_key_one_by_one(tmp_path):
    """The batched insert writes the same bytes as RocketMQ's key-by-key putKey, across a rollover."""
    a = IndexFile(tmp_path / "20240101000000001", 8, 6, create=True, end_phy_offset=50, end_timestamp=5_000)
    b = IndexFile(tmp_path / "20240101000000002", 8, 6, create=True, end_phy_offset=50, end_timestamp=5_000)
    records = [(100, 9_000, ["T#u1", "T#k", "T#j"]), (200, 12_345, ["T#u2", "T#k"]), (300, 20_000, ["T#u3", "T#x"])]
    for phy, ts, keys in records:
        for k in keys:
            a.put_key(k, phy, ts)
        b.put_keys(keys, phy, ts)
    assert a.mm[:] == b.mm[:]
    assert b.index_count == 6 and b.put_keys(["T#z"], 400, 30_000) == 0
    a.close()
    b.close()


def test_batched_appends_dispatch_as_one_record_at_a_time(tmp_path):
    """put_messages' batch dispatch writes the same ConsumeQueue and index bytes as the per-record
    `Dispatcher.dispatch` recovery uses, across CommitLog, ConsumeQueue and index file boundaries."""
    import random

    from rmqtool.store.consumequeue import ConsumeQueueStore
    from rmqtool.store.dispatch import Dispatcher, request_from_record
    from rmqtool.store.index import IndexService

    cfg = small_config(max_hash_slot_num=8, max_index_num=40)
    clock = Clock()
    rnd = random.Random(7)
    root = tmp_path / "store"
    with MessageStore.open(root, cfg, clock=clock) as store:
        i = 0
        for _ in range(60):
            batch = []
            for _ in range(rnd.choice([1, 2, 9, 30])):
                keys = rnd.choice([f"key{i} common", f"k{i}", "", "é", f"a  b{i} "])
                msg = make_msg(i, topic=rnd.choice(["TopicTest", "Other"]), queue_id=rnd.randrange(3),
                               body_size=rnd.choice([10, 700, 3000]), KEYS=keys)
                if i % 17 == 5:
                    msg.sys_flag = rnd.choice([0x4, 0x8, 0xC])  # PREPARED, COMMIT, ROLLBACK
                batch.append(msg)
                i += 1
            clock.now += rnd.choice([0, 1, 1500])
            store.put_messages(batch)
        store.flush()
        ref = tmp_path / "ref"
        cqs = ConsumeQueueStore(ref / "consumequeue", cfg.mapped_file_size_consume_queue)
        index = IndexService(ref / "index", cfg.max_hash_slot_num, cfg.max_index_num)
        dispatcher = Dispatcher(cqs, index, clock)
        cl = store.commitlog
        offset = cl.min_offset
        for msg in cl.iter_records(offset):
            mf = cl.mfq.find(msg.commit_log_offset)
            dispatcher.dispatch(request_from_record(memoryview(mf.mm), msg.commit_log_offset - mf.from_offset,
                                                    msg.commit_log_offset, store.delay_levels_ms))
        cqs.flush()
        index.flush()
        for sub in ("consumequeue", "index"):
            got = {p.relative_to(root / sub): p.read_bytes() for p in (root / sub).rglob("*") if p.is_file()}
            want = {p.relative_to(ref / sub): p.read_bytes() for p in (ref / sub).rglob("*") if p.is_file()}
            assert len(got) > 3 and got == want, sub
        cqs.close()
        index.close()


def test_concurrent_puts_keep_each_batch_together(store_dir):
    """Concurrent put_messages: every batch stays contiguous and in order, every queue offset is
    given once, results point at their records."""
    import threading

    with MessageStore.open(store_dir, small_config(mapped_file_size_commit_log=256 * 1024)) as store:
        out: dict[int, list] = {}

        def putter(t: int) -> None:
            res = []
            for b in range(20):
                res += store.put_messages([make_msg(t * 1000 + b * 10 + k, queue_id=k % 2) for k in range(3)])
            out[t] = res

        threads = [threading.Thread(target=putter, args=(t,)) for t in range(8)]
        for th in threads:
            th.start()
        for th in threads:
            th.join()
        offsets = sorted((r.msg.queue_id, r.queue_offset) for res in out.values() for r in res)
        assert offsets == [(0, o) for o in range(8 * 20 * 2)] + [(1, o) for o in range(8 * 20)]
        for res in out.values():
            for b in range(0, len(res), 3):
                batch = res[b : b + 3]
                assert [r.msg.properties["UNIQ_KEY"] for r in batch] == sorted(r.msg.properties["UNIQ_KEY"] for r in batch)
                for x, y in zip(batch, batch[1:], strict=False):
                    assert y.wrote_offset == x.wrote_offset + x.wrote_bytes or y.wrote_offset % (256 * 1024) == 0
            for r in res:
                back = store.look_message_by_offset(r.wrote_offset)
                assert back is not None and back.properties["UNIQ_KEY"] == r.msg.properties["UNIQ_KEY"]
