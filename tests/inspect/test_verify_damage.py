"""verify finds every damaged fixture at its exact file and position, and nothing in the good store."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from rmqtool.cli.main import app
from rmqtool.inspect.verify import check_store

runner = CliRunner()

DAMAGED = ["damaged-torn-tail", "damaged-crc-mismatch", "damaged-bad-magic", "damaged-phys-offset-mismatch",
           "damaged-cq-wrong-offset", "damaged-wheel-slot-mismatch", "damaged-timerlog-unit-bad",
           "damaged-index-entry-bad", "damaged-bad-config", "damaged-delay-offset-out-of-range",
           "damaged-consumer-offset-out-of-range", "damaged-checkpoint-ahead", "damaged-gap-between-files",
           "damaged-bcq-wrong-batch-size", "damaged-cq-ext-wrong-tags"]


def test_good_store_is_clean_and_exits_0(stores):
    assert list(check_store(stores / "good")) == []
    assert list(check_store(stores / "good-bcq-ext")) == []  # BatchConsumeQueues, ext addresses
    result = runner.invoke(app, ["verify", str(stores / "good")])
    assert result.exit_code == 0, result.output
    assert result.stdout == ""


@pytest.mark.parametrize("name", DAMAGED)
def test_damage_is_reported_first_at_its_file_and_position(stores, manifest, name):
    want = manifest[name]
    problems = list(check_store(stores / name))
    assert problems, "damage went unnoticed"
    first = problems[0]
    assert (first.path, first.pos, first.kind) == (want["path"], want["pos"], want["kind"])
    assert first.file == want["path"].rsplit("/", 1)[-1]


@pytest.mark.parametrize("name", ["damaged-crc-mismatch", "damaged-torn-tail", "damaged-bad-config"])
def test_verify_cli_prints_json_lines_and_exits_1(stores, manifest, name):
    result = runner.invoke(app, ["verify", str(stores / name)])
    assert result.exit_code == 1
    lines = [json.loads(line) for line in result.stdout.splitlines()]
    assert list(lines[0]) == ["file", "path", "pos", "kind", "detail"]
    want = manifest[name]
    assert (lines[0]["path"], lines[0]["pos"], lines[0]["kind"]) == (want["path"], want["pos"], want["kind"])


def test_verify_cli_subprocess_summary_on_stderr(stores, rmq):
    r = rmq("verify", str(stores / "damaged-bad-magic"))
    assert r.returncode == 1
    assert b"problem(s)" in r.stderr
    assert json.loads(r.stdout.splitlines()[0])["kind"] == "bad-magic"


def test_verify_not_a_store_exits_2(tmp_path, rmq):
    r = rmq("verify", str(tmp_path))
    assert r.returncode == 2
    assert b"not a store directory" in r.stderr
    assert b"Traceback" not in r.stderr


def test_torn_tail_beside_a_moving_tail_is_not_reported_for_zeros(stores):
    """The zero tail of the file being written is the end of the data, not damage."""
    problems = [p for p in check_store(stores / "good") if p.kind in ("torn-tail", "nonzero-after-blank")]
    assert problems == []
