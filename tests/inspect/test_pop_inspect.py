"""`inspect revive`, `inspect inflight` and verify's revive checks on a store with POP state
(fixtures/make_pop_fixtures.py). Golden files in golden_pop/ (RMQTOOL_REGEN_GOLDEN=1 rewrites them)."""

from __future__ import annotations

import importlib.util
import io
import json
import os
from pathlib import Path

import pytest
from typer.testing import CliRunner

from rmqtool.cli.main import app
from rmqtool.inspect.dissect import dissect
from rmqtool.inspect.model import Filters
from rmqtool.inspect.render import write_json, write_table
from rmqtool.inspect.verify import check_store
from rmqtool.layouts.message import MessageExt
from rmqtool.layouts.pop import PopCheckPoint
from rmqtool.store.config import StoreConfig
from rmqtool.store.local import LocalBroker

ROOT = Path(__file__).resolve().parents[2]
GOLDEN = Path(__file__).resolve().parent / "golden_pop"
REGEN = os.environ.get("RMQTOOL_REGEN_GOLDEN") == "1"
CASES = {
    "revive.json": ("revive", {}, "json"),
    "revive.table": ("revive", {}, "table"),
    "revive-acks.json": ("revive", {"tag": "bAck"}, "json"),
    "inflight.json": ("inflight", {}, "json"),
    "inflight.table": ("inflight", {}, "table"),
    "inflight-group.json": ("inflight", {"tag": "gO"}, "json"),
}


@pytest.fixture(scope="module")
def pop_store(tmp_path_factory) -> Path:
    spec = importlib.util.spec_from_file_location("make_pop_fixtures", ROOT / "fixtures" / "make_pop_fixtures.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    root = tmp_path_factory.mktemp("pop") / "good-pop"
    mod.build_pop(root)
    return root


@pytest.mark.parametrize("name", sorted(CASES))
def test_output_matches_golden(pop_store, name):
    kind, opts, view = CASES[name]
    out = io.StringIO()
    items = dissect(kind, pop_store, Filters(**opts))
    (write_json if view == "json" else lambda i, o: write_table(i, o, width=200))(items, out)
    text = out.getvalue()
    assert text.strip()
    path = GOLDEN / f"{name}.txt"
    if REGEN:
        path.write_text(text, encoding="utf-8")
    assert text == path.read_text(encoding="utf-8"), f"{name} differs from {path.name}"


def test_inflight_is_what_was_popped_and_not_acked(pop_store):
    rows = [i.fields for i in dissect("inflight", pop_store, Filters())]
    held = sorted((r["group"], r["queueOffset"], r["reviveQueue"]) for r in rows)
    # gA: 0 held, 1 acked, 2 changed and revived; gB: 0 batch-acked, 1 held; gO: orderly 0 and 1
    assert held == [("gA", 0, 0), ("gB", 1, 1), ("gO", 0, 999), ("gO", 1, 999)]
    revive = [i.fields for i in dissect("revive", pop_store, Filters())]
    assert sorted({r["tag"] for r in revive}) == ["ack", "bAck", "ck"]
    assert [r["stored"] for r in revive].count("revive-queue") == 1  # the changed checkpoint, delivered


def test_verify_is_clean_and_cli_prints_json(pop_store):
    assert list(check_store(pop_store)) == []
    r = CliRunner().invoke(app, ["inspect", "inflight", str(pop_store), "--json"])
    assert r.exit_code == 0, r.output
    assert [json.loads(line)["group"] for line in r.stdout.splitlines()] == ["gA", "gB", "gO", "gO"]


def test_verify_reports_bad_revive_records(pop_store, tmp_path):
    import shutil

    root = tmp_path / "store"
    shutil.copytree(pop_store, root)
    (root / "lock").unlink(missing_ok=True)
    conf = dict(line.split("=", 1) for line in (root / "broker.conf").read_text().split())
    with LocalBroker.open(root, StoreConfig.from_properties({**conf, "storePathRootDir": str(root)})) as local:
        topic = "rmq_sys_REVIVE_LOG_DefaultCluster"
        local.store.put_message(MessageExt(topic=topic, queue_id=3, body=b"{not json", properties={"TAGS": "ck"}))
        ck = PopCheckPoint(start_offset=40, pop_time=1, invisible_time=1, num=1, queue_id=0, topic="PopTopic",
                           cid="gA", queue_offset_diff=[0])
        local.store.put_message(MessageExt(topic=topic, queue_id=3, body=ck.to_json(), properties={"TAGS": "ck"}))
        gone = PopCheckPoint(start_offset=0, pop_time=1, invisible_time=1, num=1, queue_id=0, topic="NoTopic",
                             cid="gA", queue_offset_diff=[0])
        local.store.put_message(MessageExt(topic=topic, queue_id=3, body=gone.to_json(), properties={"TAGS": "ck"}))
    kinds = [(p.kind, p.detail) for p in check_store(root)]
    assert [k for k, _ in kinds] == ["revive-record-unparsable", "revive-ck-bad-offset", "revive-ck-bad-offset"]
    assert "names offsets [40]; the queue holds 0..4" in kinds[1][1]
    assert "NoTopic queue 0: the store has no such queue" in kinds[2][1]
    r = CliRunner().invoke(app, ["verify", str(root)])
    assert r.exit_code == 1
