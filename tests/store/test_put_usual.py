"""The one-pass put of a usual batch (store/putusual.py) against the general path of
`put_messages`: the same CommitLog, ConsumeQueue and index files, the same message fields
and results, batch after batch, and the batches it must hand over to the general path."""

from __future__ import annotations

import dataclasses

import pytest

from rmqtool.layouts.message import MessageExt
from rmqtool.layouts.net import Host
from rmqtool.store import putpath
from rmqtool.store.messagestore import MessageStore
from tests.store.conftest import Clock, make_msg, small_config


def _batches() -> list[list[MessageExt]]:
    out = []
    i = 0
    for b in range(12):  # 12 batches of 9 over 64 KiB files: some cross a file end
        batch = []
        for k in range(9):
            props = {"TAGS": f"t{(i + b) % 3}"}
            m = make_msg(i, queue_id=(i * 7) % 4, body_size=300 + 97 * k, **props)
            if b == 3:
                m.properties["KEYS"] = f"k{i}"  # one KEYS token: the index's pair-per-record path
            if b == 4 and k == 2:
                del m.properties["UNIQ_KEY"]
            if b == 5:
                m.flag, m.reconsume_times, m.sys_flag = k, 2, 0x1  # compressed flag kept
            if b == 6:
                m.born_host = Host("::1", 4000)  # IPv6 born host for the whole batch
            if b == 7 and k == 4:
                m.topic = "OtherTopic"  # two topics: the general path
            if b == 8 and k == 1:
                m.sys_flag = 0x4  # a prepared transaction: the general path
            batch.append(m)
            i += 1
        out.append(batch)
    return out


def _run(root, usual: bool, monkeypatch) -> tuple[list, list]:
    if not usual:
        monkeypatch.setattr(putpath, "put_usual", lambda store, msgs: None)
    clock = Clock()
    fields, results = [], []
    with MessageStore.open(root, small_config(), clock=clock) as store:
        for batch in _batches():
            got = store.put_messages(batch)
            results += [(r.status, r.wrote_offset, r.wrote_bytes, r.queue_offset) for r in got]
            fields += [dataclasses.asdict(m) for m in batch]
            clock.now += 1500
    monkeypatch.undo()
    return fields, results


def test_usual_batches_store_what_the_general_path_stores(tmp_path, monkeypatch):
    general = _run(tmp_path / "general", False, monkeypatch)
    usual = _run(tmp_path / "usual", True, monkeypatch)
    assert usual == general
    files = sorted(p.relative_to(tmp_path / "general") for p in (tmp_path / "general").rglob("*")
                   if p.is_file() and p.parent.name != "config" and p.name not in ("checkpoint", "lock"))
    assert any(f.parts[0] == "index" for f in files) and any(f.parts[0] == "consumequeue" for f in files)
    for rel in files:
        assert (tmp_path / "usual" / rel).read_bytes() == (tmp_path / "general" / rel).read_bytes(), rel


@pytest.mark.parametrize("why", ["two topics", "transaction", "one message", "schedule topic"])
def test_batches_it_does_not_take_touch_nothing(tmp_path, why):
    from rmqtool.layouts.constants import SCHEDULE_TOPIC
    from rmqtool.store.putusual import put_usual

    msgs = [make_msg(i) for i in range(3 if why != "one message" else 1)]
    if why == "two topics":
        msgs[1].topic = "Other"
    elif why == "transaction":
        msgs[2].sys_flag = 0x4
    elif why == "schedule topic":
        for m in msgs:
            m.topic = SCHEDULE_TOPIC
    with MessageStore.open(tmp_path / "s", small_config()) as store:
        assert put_usual(store, msgs) is None
        assert store.max_phy_offset == 0
