"""A consumer group behind a queue's minimum offset: cleanup deleted messages it never got.

Made the way it happens: messages stored, one group commits an early offset, cleanup under disk
pressure deletes the oldest CommitLog files. `verify` reports it as `consumer-offset-below-min`
(exit 1) and `inspect store` adds a row with how many messages the group missed.
"""

from __future__ import annotations

import json

from typer.testing import CliRunner

from rmqtool.cli.main import app
from rmqtool.store.local import LocalBroker
from tests.store.conftest import make_msg, small_config

runner = CliRunner()


def _store_with_a_lagging_group(root):
    cfg = small_config(file_reserved_time=1, delete_when="99", delete_file_batch_max=3)
    with LocalBroker.open(root, cfg) as b:
        for i in range(120):
            assert b.store.put_message(make_msg(i, body_size=2000)).ok
        b.offsets.commit_offset("lagging", "TopicTest", 0, 5)
        b.offsets.commit_offset("uptodate", "TopicTest", 0, 120)
        b.offsets.persist()
        assert b.store.clean_expired_files(disk_usage=lambda p: 0.88) == 3
        return b.store.get_min_offset_in_queue("TopicTest", 0)


def test_verify_and_inspect_store_report_a_group_below_the_queue_minimum(tmp_path):
    root = tmp_path / "store"
    min_offset = _store_with_a_lagging_group(root)
    assert min_offset > 5
    result = runner.invoke(app, ["verify", str(root)])
    assert result.exit_code == 1, result.output
    found = [json.loads(line) for line in result.stdout.splitlines()]
    below = [p for p in found if p.get("kind") == "consumer-offset-below-min"]
    assert below == [{
        "file": "consumerOffset.json", "path": "config/consumerOffset.json", "pos": 0,
        "kind": "consumer-offset-below-min",
        "detail": f"group lagging on TopicTest/0: committed offset 5 is below the queue's minimum offset "
                  f"{min_offset}: {min_offset - 5} message(s) were deleted before the group consumed them"}]
    assert not [p for p in found if "uptodate" in p.get("detail", "")]

    result = runner.invoke(app, ["inspect", "store", str(root), "--json"])
    assert result.exit_code == 0, result.output
    rows = [json.loads(line) for line in result.stdout.splitlines()]
    missed = [r for r in rows if r.get("section") == "consumer-offset-below-min"]
    assert len(missed) == 1
    assert {k: missed[0][k] for k in ("group", "topic", "queueId", "offset", "minOffset", "missed")} == {
        "group": "lagging", "topic": "TopicTest", "queueId": 0, "offset": 5, "minOffset": min_offset,
        "missed": min_offset - 5}
