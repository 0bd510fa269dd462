"""The index built behind the append in this process (store/indexdefer.py, `MessageStore.defer_index`):
the same files as building each put at once, look-ups that see every acknowledged put, bounded
memory with no drain, a failed build reported as the put path reports it, and a crash before a
drain recovered from the CommitLog."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from rmqtool.store import indexdefer
from rmqtool.store.indexdefer import DeferredIndex
from rmqtool.store.messagestore import MessageStore
from tests.store.conftest import Clock, make_msg, small_config
from tests.store.index_helpers import fill, index_files, index_ts, reference


@pytest.mark.parametrize("drain_every", [1, 3, 7, 1000])
def test_index_files_are_byte_identical_to_building_at_once(tmp_path, drain_every):
    cfg = small_config(max_hash_slot_num=64, max_index_num=256)  # several files: roll-over while draining
    ref = reference(tmp_path, cfg, 30)
    clock = Clock()
    wakes = []
    with MessageStore.open(tmp_path / "deferred", cfg, clock=clock) as store:
        assert store.defer_index(lambda drain: wakes.append(drain))
        index = store.index
        assert isinstance(index, DeferredIndex) and store.dispatcher.index is index and store.cleaner.index is index
        assert not store.defer_index(lambda drain: None)  # once
        def drain_now(r: int) -> None:
            if r % drain_every == drain_every - 1:
                store.index.drain()
                assert index.pending() == 0

        fill(store, clock, 30, after_round=drain_now)  # `reference`'s puts, drained every `drain_every` rounds
        assert wakes
    want, got = index_files(ref), index_files(tmp_path / "deferred")
    assert len(want) > 3
    assert got == want
    assert index_ts(tmp_path / "deferred") == index_ts(ref) > 0


def test_single_puts_queued_together_are_built_as_one_batch(tmp_path, monkeypatch):
    calls = []
    with MessageStore.open(tmp_path / "s", small_config(max_hash_slot_num=64, max_index_num=4096)) as store:
        store.defer_index(lambda drain: None)
        inner = store.index.inner
        real = inner.build_index_batch
        monkeypatch.setattr(inner, "build_index_batch", lambda recs: (calls.append(len(recs)), real(recs)))
        for i in range(16):
            assert store.put_message(make_msg(i)).ok
        assert store.index.pending() == 16 and calls == []
        store.index.drain()
        assert calls == [16]
        assert [m.uniq_key for m in store.query_message("TopicTest", "key15")] == ["UNIQ00000015"]


def test_a_look_up_drains_first(tmp_path):
    clock = Clock()
    with MessageStore.open(tmp_path / "s", small_config(max_hash_slot_num=64, max_index_num=4096),
                           clock=clock) as store:
        assert store.defer_index(lambda drain: None)  # a wake that never drains
        for i in range(0, 400, 40):
            assert all(r.ok for r in store.put_messages([make_msg(j) for j in range(i, i + 40)]))
            assert store.put_message(make_msg(i + 1000)).ok
            assert store.index.pending() > 0
            assert [m.uniq_key for m in store.query_message("TopicTest", f"key{i + 39}")] == [f"UNIQ{i + 39:08d}"]
            assert [m.uniq_key for m in store.query_message("TopicTest", f"UNIQ{i + 1000:08d}")] == \
                [f"UNIQ{i + 1000:08d}"]
            assert store.index.pending() == 0


def test_a_look_up_waits_for_a_drain_another_thread_is_writing(tmp_path, monkeypatch):
    """The queue is taken before its keys are written: a look-up from another thread meanwhile finds
    nothing queued, and must wait for that build rather than read the index without its keys."""
    import threading

    with MessageStore.open(tmp_path / "s", small_config(max_hash_slot_num=64, max_index_num=4096)) as store:
        store.defer_index(lambda drain: None)
        inner = store.index.inner
        real = inner.build_index_batch
        taken, go = threading.Event(), threading.Event()

        def slow_build(recs):
            taken.set()  # the queue is empty now, the keys not yet written
            assert go.wait(10)
            real(recs)

        monkeypatch.setattr(inner, "build_index_batch", slow_build)
        for i in range(8):
            assert store.put_message(make_msg(i)).ok
        builder = threading.Thread(target=store.index.drain)
        builder.start()
        assert taken.wait(10) and store.index.pending() == 0
        found: list[list[str]] = []
        reader = threading.Thread(target=lambda: found.append(
            [m.uniq_key for m in store.query_message("TopicTest", "key7")]))
        reader.start()
        reader.join(0.2)
        assert reader.is_alive() and not found  # waiting for the build, not reading without it
        go.set()
        builder.join(10)
        reader.join(10)
        assert found == [["UNIQ00000007"]]


def test_pending_builds_stay_bounded_without_a_drain(tmp_path, monkeypatch):
    monkeypatch.setattr(indexdefer, "MAX_PENDING", 8)
    with MessageStore.open(tmp_path / "s", small_config(max_hash_slot_num=64, max_index_num=4096)) as store:
        store.defer_index(lambda drain: None)
        most = 0
        for i in range(100):
            assert store.put_message(make_msg(i)).ok
            most = max(most, store.index.pending())
        assert 0 < most < 8
        assert [m.uniq_key for m in store.query_message("TopicTest", "key0")] == ["UNIQ00000000"]


def test_a_failed_build_is_reported_as_the_put_path_reports_it(tmp_path, monkeypatch, caplog):
    with MessageStore.open(tmp_path / "s", small_config()) as store:
        store.defer_index(lambda drain: None)
        inner = store.index.inner

        def full(*a):
            raise OSError(28, "No space left on device")

        monkeypatch.setattr(inner, "build_index", full)
        monkeypatch.setattr(inner, "build_index_batch", full)
        assert store.put_message(make_msg(1)).ok  # acknowledged: the record is in the CommitLog
        store.index.drain()  # no exception out of the loop's callback
        assert store.running_flags.flag_bits != 0
        assert not store.put_message(make_msg(2)).ok  # refused until restart, as after any failed dispatch
        assert "can not write" in caplog.text


def test_a_wake_that_raises_does_not_fail_the_put(tmp_path):
    with MessageStore.open(tmp_path / "s", small_config()) as store:
        def closed_loop(drain):
            raise RuntimeError("Event loop is closed")

        store.defer_index(closed_loop)
        assert store.put_message(make_msg(1)).ok
        assert [m.uniq_key for m in store.query_message("TopicTest", "key1")] == ["UNIQ00000001"]


CHILD = textwrap.dedent("""
    import os, sys
    from rmqtool.store.messagestore import MessageStore
    from tests.store.conftest import make_msg, small_config
    store = MessageStore.open(sys.argv[1], small_config(max_hash_slot_num=64, max_index_num=4096))
    store.defer_index(lambda drain: None)  # never drained: every key below is still queued at the kill
    for i in range(0, 200, 20):
        assert all(r.ok for r in store.put_messages([make_msg(j) for j in range(i, i + 20)]))
    assert store.put_message(make_msg(500)).ok
    assert store.index.pending() > 0
    print("stored", flush=True)
    os.kill(os.getpid(), 9)
""")


def test_keys_queued_at_a_kill_are_rebuilt_by_recovery(tmp_path):
    root = tmp_path / "s"
    p = subprocess.run([sys.executable, "-c", CHILD, str(root)], capture_output=True, text=True, timeout=120,
                       cwd=Path(__file__).resolve().parents[2])
    assert p.returncode == -9 and "stored" in p.stdout, p.stderr
    with MessageStore.open(root, small_config(max_hash_slot_num=64, max_index_num=4096)) as store:
        for i in [*range(200), 500]:
            assert [m.uniq_key for m in store.query_message("TopicTest", f"key{i}")] == [f"UNIQ{i:08d}"]
