"""repair of stores with BatchCQ topics and ConsumeQueueExt files (the good-bcq-ext fixture and its damaged copies)."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from pathlib import Path

import pytest

from rmqtool.inspect.configs import load_config
from rmqtool.inspect.cq import iter_units
from rmqtool.inspect.files import queue_files
from rmqtool.inspect.layoutconfig import load_layout_config
from rmqtool.inspect.repair import plan_repair, repair
from rmqtool.inspect.verify import check_store
from rmqtool.layouts.cqext import is_ext_addr
from rmqtool.layouts.javahash import java_string_hash

BCQ0 = Path("batchconsumequeue/BatchTopic/0")
BCQ1 = Path("batchconsumequeue/BatchTopic/1")
EXT_CQ = Path("consumequeue/ExtTopic/0/00000000000000000000")


def _tree(root: Path, sub: str) -> dict[str, str]:
    out = {}
    for dirpath, _, files in os.walk(root / sub):
        for f in files:
            p = Path(dirpath) / f
            out[str(p.relative_to(root))] = hashlib.sha256(p.read_bytes()).hexdigest()
    return out


def _clean(root: Path) -> list:
    return [p.to_json() for p in check_store(root) if not p.path.startswith("repair-")]


def _damage(root: Path, how: str) -> None:
    if how == "deleted-file":  # queue 0's second file (units 4..) is gone
        (root / BCQ0 / "00000000000000000184").unlink()
    elif how == "truncated-file":  # queue 1's only file ends inside its unit
        os.truncate(root / BCQ1 / "00000000000000000000", 30)
    elif how == "deleted-queues":  # no batchconsumequeue/ at all: topics.json still says BatchCQ
        shutil.rmtree(root / "batchconsumequeue")
    elif how == "no-topics-json":  # the directories decide
        (root / "config" / "topics.json").unlink()
    elif how == "unmarked-topic":  # topics.json has lost the attribute: the directories decide
        path = root / "config" / "topics.json"
        doc = json.loads(path.read_text())
        doc["topicConfigTable"]["BatchTopic"]["attributes"] = {}
        path.write_text(json.dumps(doc, indent="\t"))
    elif how == "size-from-files":  # broker.conf does not say: the existing files' size is used
        conf = root / "broker.conf"
        conf.write_text("".join(line for line in conf.read_text().splitlines(keepends=True)
                                if not line.startswith("mapperFileSizeBatchConsumeQueue")))
        assert load_layout_config(root).bcq_file_size == 4 * 46


@pytest.mark.parametrize("how", ["as-is", "deleted-file", "truncated-file", "deleted-queues", "no-topics-json",
                                 "unmarked-topic", "size-from-files"])
def test_repair_rebuilds_batch_consume_queues_as_the_broker_wrote_them(stores, store_copy, how):
    good = stores / "good-bcq-ext"
    root = store_copy("damaged-bcq-wrong-batch-size")
    _damage(root, how)
    assert _clean(root)
    plan = repair(root)
    assert _clean(root) == []
    assert _tree(root, "batchconsumequeue") == _tree(good, "batchconsumequeue")
    # no ConsumeQueue units for the BatchCQ topic; ExtTopic's units keep their ext addresses
    assert _tree(root, "consumequeue") == _tree(good, "consumequeue")
    act = next(a for a in plan.actions if a.action == "rebuild-batchconsumequeue")
    assert act.path == "batchconsumequeue" and "BatchTopic" in act.detail
    if how != "deleted-queues":
        assert act.saved_to == "batchconsumequeue"
        assert (plan.side_dir / BCQ0).is_dir(), "the old BatchConsumeQueues are set aside, not deleted"
    if how == "as-is":
        old = (plan.side_dir / BCQ0 / "00000000000000000000").read_bytes()
        assert old != (root / BCQ0 / "00000000000000000000").read_bytes()
        assert json.loads((plan.side_dir / "plan.json").read_text())[1]["action"] == "rebuild-batchconsumequeue"


def test_consumer_offsets_of_a_batchcq_topic_are_clamped_to_its_batches_not_its_records(store_copy):
    root = store_copy("good-bcq-ext")
    co = root / "config" / "consumerOffset.json"
    text = co.read_text()
    # BatchTopic/0 holds 5 records and 9 messages, BatchTopic/1 one record of 4; ExtTopic/0 7 records
    assert '"BatchTopic@groupB":{0:5,1:4' in text and '"ExtTopic@groupB":{0:3' in text
    assert not [a for a in plan_repair(root).actions if a.action == "clamp-offsets"]
    co.write_text(text.replace('"BatchTopic@groupB":{0:5,1:4', '"BatchTopic@groupB":{0:12,1:4')
                  .replace('"ExtTopic@groupB":{0:3', '"ExtTopic@groupB":{0:9'))
    plan = repair(root)
    clamp = next(a for a in plan.actions if a.action == "clamp-offsets")
    assert clamp.detail == "BatchTopic@groupB queue 0: 12 -> 9; ExtTopic@groupB queue 0: 9 -> 7"
    table = load_config(co)["offsetTable"]
    assert table["BatchTopic@groupB"] == {"0": 9, "1": 4} and table["ExtTopic@groupB"] == {"0": 7}
    assert _clean(root) == []


def test_dry_run_of_a_store_with_batch_consume_queues_plans_their_rebuild(stores, rmq):
    """The rebuild that used to be refused (exit 2) is planned; nothing changes."""
    root = stores / "good-bcq-ext"
    before = _tree(root, "")
    r = rmq("repair", str(root), "--dry-run")
    assert r.returncode == 0, r.stderr
    actions = [json.loads(line) for line in r.stdout.splitlines()]
    assert [a["action"] for a in actions] == ["rebuild-consumequeue", "rebuild-batchconsumequeue", "rebuild-index",
                                              "rebuild-timerwheel"]
    assert "queue.type=BatchCQ in config/topics.json" in actions[1]["detail"]
    assert "7 unit(s) keep their ext address; 0 whose" in actions[0]["detail"]
    assert _tree(root, "") == before


def test_a_unit_whose_ext_unit_no_longer_matches_gets_the_plain_tags_code(stores, store_copy):
    """Ext files are kept as they are; no rebuilt unit points at an ext unit that does not match."""
    good = stores / "good-bcq-ext"
    root = store_copy("damaged-cq-ext-wrong-tags")
    ext_before = _tree(root, "consumequeue_ext")
    plan = repair(root)
    assert "6 unit(s) keep their ext address; 1 whose" in plan.actions[0].detail
    assert _clean(root) == []
    assert _tree(root, "consumequeue_ext") == ext_before
    assert _tree(root, "batchconsumequeue") == _tree(good, "batchconsumequeue")
    new = list(iter_units(queue_files((root / EXT_CQ).parent)))
    old = list(iter_units(queue_files((good / EXT_CQ).parent)))
    assert len(new) == len(old) == 7
    for a, b in zip(new, old, strict=True):
        if a.queue_offset == 1:
            assert a.tags_code == java_string_hash("TagB") and not is_ext_addr(a.tags_code)
        else:
            assert (a.commit_log_offset, a.size, a.tags_code) == (b.commit_log_offset, b.size, b.tags_code)


def test_ordinary_queues_lost_beside_batch_queues_are_rebuilt(stores, store_copy):
    """A ConsumeQueue cut after 3 units: those keep their ext addresses, the rebuilt rest get plain tags."""
    root = store_copy("damaged-bcq-wrong-batch-size")
    os.truncate(root / EXT_CQ, 3 * 20)
    plan = repair(root)
    assert "3 unit(s) keep their ext address" in plan.actions[0].detail
    assert _clean(root) == []
    units = list(iter_units(queue_files((root / EXT_CQ).parent)))
    assert [u.queue_offset for u in units] == list(range(7))
    assert [is_ext_addr(u.tags_code) for u in units] == [True] * 3 + [False] * 4
    assert not (root / "consumequeue" / "BatchTopic").exists()
    assert _tree(root, "batchconsumequeue") == _tree(stores / "good-bcq-ext", "batchconsumequeue")
