"""ConfigWriter: config files persisted from a background thread, batched, retried on a full disk."""

from __future__ import annotations

import logging
import threading
import time

from rmqtool.errors import StoreError
from rmqtool.store import jsonconfig
from rmqtool.store.jsonconfig import ConfigWriter, read_file
from rmqtool.store.offsets import ConsumerOffsetManager
from rmqtool.store.subscriptions import SubscriptionGroupManager


def _recording(monkeypatch):
    calls: list[tuple[str, str]] = []
    real = jsonconfig.write_file

    def record(path, text):
        calls.append((path.name, threading.current_thread().name))
        real(path, text)

    monkeypatch.setattr(jsonconfig, "write_file", record)
    return calls


def test_500_new_groups_are_a_few_writes_none_on_the_caller_thread(tmp_path, monkeypatch):
    calls = _recording(monkeypatch)
    groups = SubscriptionGroupManager(tmp_path)
    offsets = ConsumerOffsetManager(tmp_path)
    writer = ConfigWriter(batch_s=0.05)
    writer.attach(groups, offsets)
    writer.start()
    started = time.monotonic()
    for i in range(500):
        groups.find(f"group-{i}")
        offsets.commit_offset(f"group-{i}", "T", 0, i)
        offsets.persist()
        if i % 100 == 0:
            time.sleep(0.06)  # let the writer run meanwhile, as a live broker does
    elapsed = time.monotonic() - started
    assert all(thread == "rmqtool-config-writer" for _, thread in calls)
    writer.stop()
    assert elapsed < 2.0
    assert 2 <= len(calls) <= 40, calls  # batched: far fewer than 1,000 persist() calls
    table = read_file(tmp_path / "subscriptionGroup.json")["subscriptionGroupTable"]
    assert {f"group-{i}" for i in range(500)} <= set(table)
    assert read_file(tmp_path / "consumerOffset.json")["offsetTable"]["T@group-499"] == {"0": 499}


def test_a_write_that_fails_is_logged_once_and_retried_until_it_succeeds(tmp_path, monkeypatch, caplog):
    groups = SubscriptionGroupManager(tmp_path)
    real = jsonconfig.write_file
    full = threading.Event()
    full.set()
    attempts = []

    def flaky(path, text):
        attempts.append(path.name)
        if full.is_set():
            raise StoreError(f"cannot write {path.name}: No space left on device")
        real(path, text)

    monkeypatch.setattr(jsonconfig, "write_file", flaky)
    caplog.set_level(logging.WARNING, logger="rmqtool.store.config")
    writer = ConfigWriter(batch_s=0.01, retry_s=0.05)
    writer.attach(groups)
    writer.start()
    try:
        groups.find("g1")
        deadline = time.time() + 5
        while len(attempts) < 3 and time.time() < deadline:
            time.sleep(0.01)
        assert len(attempts) >= 3 and not (tmp_path / "subscriptionGroup.json").exists()
        assert caplog.text.count("No space left on device") == 1
        full.clear()
        deadline = time.time() + 5
        while not (tmp_path / "subscriptionGroup.json").exists() and time.time() < deadline:
            time.sleep(0.01)
        assert "g1" in read_file(tmp_path / "subscriptionGroup.json")["subscriptionGroupTable"]
        # the writer logs the recovery just after the file is in place: wait for the line, not the file
        while "subscriptionGroup.json written again" not in caplog.text and time.time() < deadline:
            time.sleep(0.01)
        assert "subscriptionGroup.json written again" in caplog.text
    finally:
        writer.stop()


def test_without_a_running_writer_persist_writes_at_once(tmp_path):
    groups = SubscriptionGroupManager(tmp_path)
    writer = ConfigWriter()
    writer.attach(groups)  # attached but never started (or already stopped)
    groups.find("g1")
    assert "g1" in read_file(tmp_path / "subscriptionGroup.json")["subscriptionGroupTable"]


def test_a_commit_offset_is_not_held_up_while_the_writer_encodes_the_offsets(tmp_path, monkeypatch):
    """commit_offset runs on the event loop; the writer thread's encode holds the offsets lock
    only to copy the table, not while it orders and copies its entries (ms for 1000 groups)."""
    from rmqtool.store import offsets

    m = ConsumerOffsetManager(tmp_path)
    for i in range(10):
        m.commit_offset(f"g{i}", "T", 0, i)
    inside, committed = threading.Event(), threading.Event()
    real = offsets.hashmap_order

    def slow_order(keys, buckets):
        if buckets == offsets._TABLE_BUCKETS and not inside.is_set():
            inside.set()
            committed.wait(10)  # the encode stays here until the commit went through (or 10 s)
        return real(keys, buckets)

    monkeypatch.setattr(offsets, "hashmap_order", slow_order)
    texts = []
    encoder = threading.Thread(target=lambda: texts.append(m.to_text()))
    encoder.start()
    assert inside.wait(10)
    t0 = time.monotonic()
    m.commit_offset("g_new", "T", 1, 7)
    committed.set()
    took = time.monotonic() - t0
    encoder.join(20)
    assert took < 5, f"commit_offset waited {took:.1f} s for the encode"
    assert '"T@g3":{0:3' in texts[0].replace("\n", "").replace("\t", "")
    assert m.query_offset("g_new", "T", 1) == 7
