"""The one-pass put of a single message (store/putusual.py `put_one`, taken by
`MessageStore.put_message`) against the general path of `put_messages`: the same CommitLog,
ConsumeQueue and index files, the same message fields and results, message after message
(some crossing a file end, IPv6 hosts, a transaction half, a schedule topic, a None value),
and what it finds after a close and reopen."""

from __future__ import annotations

import dataclasses

import pytest

from rmqtool.layouts.constants import SCHEDULE_TOPIC
from rmqtool.layouts.message import MessageExt
from rmqtool.layouts.net import Host
from rmqtool.store import putpath
from rmqtool.store.messagestore import MessageStore
from rmqtool.store.putusual import put_one
from tests.store.conftest import Clock, make_msg, small_config


def _messages() -> list[MessageExt]:
    out = []
    for i in range(150):  # ~150 x 500 bytes over 64 KiB files: a few file ends crossed
        m = make_msg(i, queue_id=(i * 5) % 3, body_size=200 + 37 * (i % 13), TAGS=f"t{i % 4}")
        if i % 11 == 3:
            m.properties["KEYS"] = f"k{i}"  # one KEYS token
        if i % 17 == 5:
            del m.properties["UNIQ_KEY"]
        if i % 19 == 7:
            m.properties.pop("TAGS")
        if i % 23 == 2:
            m.born_host = Host("::1", 4000)  # an IPv6 born host
        if i % 29 == 4:
            m.flag, m.reconsume_times, m.sys_flag = i, 3, 0x1
        if i == 40:
            m.sys_flag = 0x4  # a prepared transaction half: the general path
        if i == 41:
            m.topic = SCHEDULE_TOPIC
            m.properties["DELAY"] = "2"  # a schedule unit: the general path
        out.append(m)
    return out


def _run(root, one: bool, monkeypatch) -> tuple[list, list]:
    if not one:
        monkeypatch.setattr(putpath, "put_one", lambda store, msg: None)
    clock = Clock()
    fields, results = [], []
    with MessageStore.open(root, small_config(), clock=clock) as store:
        for m in _messages():
            r = store.put_message(m)
            results.append((r.status, r.wrote_offset, r.wrote_bytes, r.queue_offset, r.offset_msg_id))
            fields.append(dataclasses.asdict(m))
            clock.now += 700
    monkeypatch.undo()
    return fields, results


def test_single_puts_store_what_the_general_path_stores(tmp_path, monkeypatch):
    general = _run(tmp_path / "general", False, monkeypatch)
    one = _run(tmp_path / "one", True, monkeypatch)
    assert one == general
    files = sorted(p.relative_to(tmp_path / "general") for p in (tmp_path / "general").rglob("*")
                   if p.is_file() and p.parent.name != "config" and p.name not in ("lock",))
    assert sum(f.parts[0] == "commitlog" for f in files) > 1  # file ends were crossed
    assert any(f.parts[0] == "index" for f in files) and any(f.parts[0] == "consumequeue" for f in files)
    for rel in files:
        assert (tmp_path / "one" / rel).read_bytes() == (tmp_path / "general" / rel).read_bytes(), rel


def test_single_puts_are_found_at_once_and_after_reopen(tmp_path):
    root = tmp_path / "s"
    config = small_config(max_hash_slot_num=4096, max_index_num=16384)
    with MessageStore.open(root, config) as store:
        for i in range(20):
            store.put_message(make_msg(i, queue_id=i % 2, KEYS=f"needle{i}"))
            assert [m.uniq_key for m in store.query_message("TopicTest", f"needle{i}")] == [f"UNIQ{i:08d}"]
        assert len(store.get_message("TopicTest", 1, 0).messages) == 10
    with MessageStore.open(root, config) as store:
        for i in range(20):
            assert [m.keys for m in store.query_message("TopicTest", f"UNIQ{i:08d}")] == [f"needle{i}"]
        assert store.get_max_offset_in_queue("TopicTest", 0) == 10


@pytest.mark.parametrize("why", ["transaction", "schedule topic", "none value", "dispatch listener", "too big"])
def test_messages_it_does_not_take_touch_nothing(tmp_path, why):
    m = make_msg(1)
    with MessageStore.open(tmp_path / "s", small_config()) as store:
        if why == "transaction":
            m.sys_flag = 0x4
        elif why == "schedule topic":
            m.topic = SCHEDULE_TOPIC
        elif why == "none value":
            m.properties["X"] = None  # type: ignore[assignment]
        elif why == "dispatch listener":
            store.dispatch_listeners.append(lambda req: None)
        else:
            m.body = b"x" * (store.config.max_message_size + 1)
        assert put_one(store, m) is None
        assert store.max_phy_offset == 0 and m.commit_log_offset == 0
