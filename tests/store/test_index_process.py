"""The index built by a second process (store/indexproc.py, indexclient.py): the same files as
in-process indexing, look-ups that see every acknowledged put, and nothing lost when either
process is killed."""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from rmqtool.store.messagestore import MessageStore
from tests.store.conftest import Clock, make_msg, small_config
from tests.store.index_helpers import fill, index_files, index_ts, reference


def test_index_files_are_byte_identical_to_in_process_ones(tmp_path):
    cfg = small_config(max_hash_slot_num=64, max_index_num=256)  # several files: roll-over on both sides
    ref = reference(tmp_path, cfg, 30)
    clock = Clock()
    with MessageStore.open(tmp_path / "proc", cfg, clock=clock) as store:
        assert store.start_index_process()
        assert store.dispatcher.index is store.index and store.index.offloaded
        fill(store, clock, 30)
        child = store.index.proc
    assert store.index.fallback is None and child.returncode == 0  # drained, not given up
    want, got = index_files(ref), index_files(tmp_path / "proc")
    assert len(want) > 3
    assert got == want
    assert index_ts(tmp_path / "proc") == index_ts(ref) > 0


def test_a_look_up_sees_every_acknowledged_put(tmp_path):
    clock = Clock()
    with MessageStore.open(tmp_path / "s", small_config(max_hash_slot_num=64, max_index_num=4096),
                           clock=clock) as store:
        assert store.start_index_process()
        for i in range(0, 400, 40):
            assert all(r.ok for r in store.put_messages([make_msg(j) for j in range(i, i + 40)]))
            assert [m.uniq_key for m in store.query_message("TopicTest", f"key{i + 39}")] == [f"UNIQ{i + 39:08d}"]
            assert [m.uniq_key for m in store.query_message("TopicTest", f"UNIQ{i:08d}")] == [f"UNIQ{i:08d}"]
        assert store.index.indexed_offset() == store.index.published + 1 > 0
        assert store.index.fallback is None


@pytest.mark.parametrize("delay", [0.0, 0.002, 0.01, 0.03, 0.1])
def test_killed_child_falls_back_in_process_and_loses_nothing(tmp_path, caplog, delay):
    cfg = small_config(max_hash_slot_num=64, max_index_num=256)
    ref = reference(tmp_path, cfg, 30)
    clock = Clock()
    with MessageStore.open(tmp_path / "proc", cfg, clock=clock) as store:
        assert store.start_index_process()
        nxt = fill(store, clock, 20)
        time.sleep(delay)
        child = store.index.proc
        child.send_signal(signal.SIGKILL)  # wherever it is: idle, or halfway through a batch
        child.wait()
        nxt = fill(store, clock, 10, nxt)  # published to a dead child: the fall-back indexes them
        with caplog.at_level(logging.WARNING, "rmqtool.store.indexproc"):
            assert len(store.query_message("TopicTest", "common", 10_000, 0, 2**62)) > 0
        assert any("indexing in-process" in r.getMessage() for r in caplog.records)
        assert store.index.fallback is not None and store.dispatcher.index is store.index.fallback
    assert index_files(tmp_path / "proc") == index_files(ref)
    assert index_ts(tmp_path / "proc") <= index_ts(ref)


def test_child_found_dead_by_the_flush_thread(tmp_path):
    clock = Clock()
    with MessageStore.open(tmp_path / "s", small_config(flush_interval_commit_log=50), clock=clock) as store:
        assert store.start_index_process()
        store.put_message(make_msg(1))
        store.index.proc.kill()
        deadline = time.monotonic() + 20
        while store.index.fallback is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert store.index.fallback is not None
        store.put_message(make_msg(2))
        assert [m.uniq_key for m in store.query_message("TopicTest", "key2")] == ["UNIQ00000002"]


def test_expiry_goes_through_the_child(tmp_path):
    cfg = small_config(max_hash_slot_num=16, max_index_num=64)
    clock = Clock()
    with MessageStore.open(tmp_path / "s", cfg, clock=clock) as store:
        assert store.start_index_process()
        fill(store, clock, 10)
        assert store.query_message("TopicTest", "key0", 1, 0, 2**62)  # the child has caught up
        before = sorted(os.listdir(tmp_path / "s" / "index"))
        assert len(before) > 3
        deleted = store.index.delete_expired(store.commitlog.max_offset)
        assert deleted == len(before) - 1
        assert sorted(os.listdir(tmp_path / "s" / "index")) == before[-1:]
        fill(store, clock, 2, 10_000)  # the child goes on after the files it had open went
        assert [m.uniq_key for m in store.query_message("TopicTest", "key10000")] == ["UNIQ00010000"]
        assert store.index.fallback is None


def test_not_started_without_an_index_or_read_only(tmp_path):
    with MessageStore.open(tmp_path / "s", small_config(message_index_enable=False)) as store:
        assert not store.start_index_process()
        assert store.index is None
        store.put_message(make_msg(1))
    with MessageStore.open(tmp_path / "s", small_config(), read_only=True) as store:
        assert not store.start_index_process()


_PARENT = """
import sys
from rmqtool.store.messagestore import MessageStore
from tests.store.conftest import make_msg, small_config
store = MessageStore.open(sys.argv[1], small_config(max_hash_slot_num=64, max_index_num=256))
assert store.start_index_process()
print("child", store.index.proc.pid, flush=True)
i = 0
while True:
    assert all(r.ok for r in store.put_messages([make_msg(j) for j in range(i, i + 20)]))
    i += 20
    print(i, flush=True)
"""


def test_parent_killed_loses_no_acknowledged_key(tmp_path):
    root = tmp_path / "s"
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[2]))
    parent = subprocess.Popen([sys.executable, "-c", _PARENT, str(root)], stdout=subprocess.PIPE, env=env, text=True)
    try:
        assert parent.stdout is not None
        child = int(parent.stdout.readline().split()[1])
        acked = 0
        while acked < 600:
            acked = int(parent.stdout.readline())
    finally:
        parent.kill()
        parent.wait()
    deadline = time.monotonic() + 10
    while Path(f"/proc/{child}").exists() and time.monotonic() < deadline:
        time.sleep(0.01)  # PR_SET_PDEATHSIG: the kernel kills the child with its parent
    status = Path(f"/proc/{child}/status")
    assert not status.exists() or "zombie" in status.read_text()
    with MessageStore.open(root, small_config(max_hash_slot_num=64, max_index_num=256)) as store:
        for i in range(acked):
            assert [m.uniq_key for m in store.query_message("TopicTest", f"UNIQ{i:08d}", 4, 0, 2**62)] == [
                f"UNIQ{i:08d}"]


def _fill_delete(store: MessageStore, clock: Clock) -> None:
    from rmqtool.store.topicdelete import delete_topics

    nxt = fill(store, clock, 6)
    assert delete_topics(store, ["Other"]) == 3
    fill(store, clock, 6, nxt)


def test_topic_delete_and_reopen_keep_the_same_index(tmp_path):
    cfg = small_config(max_hash_slot_num=64, max_index_num=256)
    clock = Clock()
    with MessageStore.open(tmp_path / "inproc", cfg, clock=clock) as store:
        _fill_delete(store, clock)
    clock = Clock()
    with MessageStore.open(tmp_path / "proc", cfg, clock=clock) as store:
        assert store.start_index_process()
        _fill_delete(store, clock)
        assert store.index.fallback is None
    assert index_files(tmp_path / "proc") == index_files(tmp_path / "inproc")
    with MessageStore.open(tmp_path / "proc", cfg, clock=clock) as store:  # a clean close: nothing re-indexed
        assert store.start_index_process()
        assert [m.uniq_key for m in store.query_message("TopicTest", "UNIQ00000001", 4, 0, 2**62)] == ["UNIQ00000001"]


def test_a_stopped_child_does_not_hang_the_put_path(tmp_path, monkeypatch):
    from rmqtool.store import indexclient

    monkeypatch.setattr(indexclient, "SEND_TIMEOUT_S", 0.3)
    monkeypatch.setattr(indexclient, "PIPE_SIZE", 4096)
    clock = Clock()
    cfg = small_config(max_hash_slot_num=256, max_index_num=1 << 14, mapped_file_size_commit_log=1 << 22)
    with MessageStore.open(tmp_path / "s", cfg, clock=clock) as store:
        assert store.start_index_process()
        store.index.proc.send_signal(signal.SIGSTOP)  # alive, reading nothing: the pipe fills
        t = time.monotonic()
        nxt = fill(store, clock, 40)
        assert time.monotonic() - t < 60 and store.index._broken
        last = nxt - 2  # on TopicTest, with one KEYS token (see messages)
        assert [m.uniq_key for m in store.query_message("TopicTest", f"key{last}", 4, 0, 2**62)] == [
            f"UNIQ{last:08d}"]
        assert store.index.fallback is not None


def test_the_child_runs_this_checkout_whatever_the_working_directory(tmp_path, monkeypatch):
    other = tmp_path / "elsewhere" / "rmqtool"
    other.mkdir(parents=True)
    (other / "__init__.py").write_text("raise ImportError('another checkout')\n")
    monkeypatch.chdir(other.parent)
    with MessageStore.open(tmp_path / "s", small_config()) as store:
        assert store.start_index_process()
        store.put_message(make_msg(3))
        assert [m.uniq_key for m in store.query_message("TopicTest", "key3")] == ["UNIQ00000003"]
        assert store.index.fallback is None


def test_cleanup_deletes_the_index_files_of_deleted_commitlog_files_through_the_child(tmp_path):
    cfg = small_config(file_reserved_time=1, delete_when="99", delete_file_batch_max=3, max_hash_slot_num=16,
                       max_index_num=64)
    counts = []
    for mode in ("inproc", "proc"):
        with MessageStore.open(tmp_path / mode, cfg, clock=Clock()) as store:
            assert mode == "inproc" or store.start_index_process()
            for i in range(120):
                store.put_message(make_msg(i, body_size=2000))
            assert store.query_message("TopicTest", "key119", 1, 0, 2**62)  # the child has caught up
            before = len(os.listdir(tmp_path / mode / "index"))
            assert store.clean_expired_files(disk_usage=lambda p: 0.88) == 3
            counts.append((before, len(os.listdir(tmp_path / mode / "index"))))
            assert store.index.offloaded == (mode == "proc")
            assert mode == "inproc" or store.index.fallback is None
    assert counts[0] == counts[1] and counts[0][1] < counts[0][0]


def test_the_child_runs_idle_but_at_the_normal_policy_while_the_parent_waits(tmp_path, monkeypatch):
    """It takes no core's share from the put path (SCHED_IDLE), yet cannot be starved past a wait:
    a look-up, and a put that finds the pipe full, raise it until they have their answer or room."""
    from rmqtool.store import indexclient

    clock = Clock()
    with MessageStore.open(tmp_path / "s", small_config(max_hash_slot_num=64, max_index_num=4096),
                           clock=clock) as store:
        assert store.start_index_process()
        index = store.index
        pid = index.proc.pid
        assert os.sched_getscheduler(pid) == os.SCHED_IDLE
        seen = []
        real_write = indexclient.IndexProcess._write

        def write(self, msg):  # the policy while the look-up's request goes out and its answer is awaited
            seen.append(os.sched_getscheduler(pid))
            return real_write(self, msg)

        monkeypatch.setattr(indexclient.IndexProcess, "_write", write)
        store.put_message(make_msg(1))
        assert [m.uniq_key for m in store.query_message("TopicTest", "key1")] == ["UNIQ00000001"]
        assert os.SCHED_OTHER in seen and os.sched_getscheduler(pid) == os.SCHED_IDLE
        monkeypatch.setattr(indexclient.IndexProcess, "_write", real_write)
        with index._waiting(), index._waiting():  # two waiters: the normal policy until the last is done
            assert os.sched_getscheduler(pid) == os.SCHED_OTHER
        assert os.sched_getscheduler(pid) == os.SCHED_IDLE
        assert index.fallback is None
