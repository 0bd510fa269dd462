"""A replayed batch whose maps share their names (client/replaystore.py `_put_templated`) is
stored from one properties template: the same CommitLog, ConsumeQueue and index bytes and the
same results as the maps put one by one in the broker's order (`put_batch`), for names and a
cluster name with braces, values of other lengths and scripts, and maps of 0, 1 or many names."""

from __future__ import annotations

import pytest

from rmqtool.client import replay as R
from rmqtool.client import replaystore
from rmqtool.client.message import Message
from rmqtool.client.replaylines import Lines
from rmqtool.layouts.msgid import UniqKeyFactory
from rmqtool.store.config import StoreConfig

NOW = 1_700_000_000_000

SHAPES = [
    [{"ORIGIN_MESSAGE_ID": f"AB{i:030X}", "WAIT": "true"} for i in range(40)],
    [{"ORIGIN_MESSAGE_ID": f"o{i}" * (i % 3), "{b}": "ü" * i, "WAIT": "true"} for i in range(40)],
    [{"é": f"{{{i}}}"} for i in range(40)],
    [{} for _ in range(40)],
    [{f"k{j}": f"v{i}-{j}" for j in range(9)} for i in range(40)],
]


def _target(root, monkeypatch):
    monkeypatch.setattr(R.time, "time", lambda: NOW / 1000)
    monkeypatch.setattr(R.os, "urandom", lambda n: b"\x00\x03"[:n])
    monkeypatch.setattr(replaystore.time, "time", lambda: NOW / 1000)
    monkeypatch.setattr(replaystore.os, "urandom", lambda n: b"\x00\x03"[:n])
    target = R.StoreTarget(root, StoreConfig(store_path_root_dir=root, broker_cluster_name="C{1}"))
    target.uniq = UniqKeyFactory("127.0.0.1", pid=1, seed=1)
    target.broker.clock = target.broker.store.clock = lambda: NOW
    target.send_many([Message("Tpl", b"first")])  # the topic, made by the per-message path
    return target


def _store(root, monkeypatch, templated: bool):
    calls = []
    if templated:
        put_fields = replaystore.put_fields
        monkeypatch.setattr(replaystore, "put_fields", lambda *a: calls.append(1) or put_fields(*a))
    else:
        monkeypatch.setattr(replaystore, "_put_templated", lambda *a: None)
    target = _target(root, monkeypatch)
    texts = []
    try:
        for maps in SHAPES:
            n = len(maps)
            bodies = [f"body {i} ".encode() * (1 + i % 4) for i in range(n)]
            batch = Lines(["Tpl"] * n, bodies, [i % 3 for i in range(n)], [dict(m) for m in maps],
                          [m.get("ORIGIN_MESSAGE_ID") for m in maps])
            stored = replaystore.store_lines(target, batch)
            assert stored is not None
            if templated:
                assert batch.maps == maps  # the caller's maps as given (the other path adds two entries)
            texts.append(stored.json_lines())
        cl = target.broker.store.commitlog
        log = bytes(cl.read_bytes(cl.min_offset, cl.max_offset - cl.min_offset))
    finally:
        target.close()
    files = {str(p.relative_to(root)): p.read_bytes().rstrip(b"\0") for sub in ("consumequeue", "index")
             for p in sorted((root / sub).rglob("*")) if p.is_file()}
    return log, files, texts, len(calls)


def test_templated_maps_store_what_put_batch_stores(tmp_path, monkeypatch):
    with pytest.MonkeyPatch.context() as mp:
        fast = _store(tmp_path / "tpl", mp, True)
    with pytest.MonkeyPatch.context() as mp:
        slow = _store(tmp_path / "maps", mp, False)
    assert fast[3] == len(SHAPES) and slow[3] == 0
    assert fast[0] == slow[0] and len(fast[0]) > 200 * 100
    assert b"CLUSTER\x01C{1}\x02" in fast[0] and b"{b}\x01" in fast[0]
    assert fast[1] == slow[1] and len(fast[1]) >= 2
    assert fast[2] == slow[2]


def test_maps_of_other_names_are_not_templated(tmp_path, monkeypatch):
    maps = [{"a": "1"}, {"b": "2"}]
    assert replaystore._put_templated(None, "T", [0, 1], NOW, [0, 0], [b"x", b"y"], maps, ["u1", "u2"], "c") is None
    for name in ("TAGS", "KEYS", "UNIQ_KEY", "CLUSTER"):
        same = [{name: "1"}, {name: "2"}]
        assert replaystore._put_templated(None, "T", [0, 1], NOW, [0, 0], [b"x", b"y"], same, ["u1", "u2"], "c") is None
