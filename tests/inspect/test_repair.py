"""repair: cuts like recovery, keeps every cut byte, rebuilds derived files, refuses a locked store."""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from rmqtool.cli.main import app
from rmqtool.inspect.repair import plan_repair, repair
from rmqtool.inspect.verify import check_store

runner = CliRunner()


def _digest(root: Path) -> dict[str, str]:
    out = {}
    for dirpath, _, files in os.walk(root):
        for f in files:
            p = Path(dirpath) / f
            out[str(p.relative_to(root))] = hashlib.sha256(p.read_bytes()).hexdigest()
    return out


@pytest.mark.parametrize("name", ["damaged-torn-tail", "damaged-crc-mismatch", "damaged-bad-magic",
                                  "damaged-cq-wrong-offset", "damaged-wheel-slot-mismatch",
                                  "damaged-index-entry-bad", "damaged-checkpoint-ahead", "damaged-gap-between-files",
                                  "damaged-delay-offset-out-of-range", "damaged-consumer-offset-out-of-range",
                                  "damaged-phys-offset-mismatch"])
def test_repair_leaves_a_store_verify_finds_clean(store_copy, name):
    root = store_copy(name)
    assert list(check_store(root))
    repair(root)
    problems = [p for p in check_store(root) if not p.path.startswith("repair-")]
    if name == "damaged-phys-offset-mismatch":
        # recovery does not check physicalOffset; repair leaves the record alone and says so
        assert [p.kind for p in problems] == ["phys-offset-mismatch"]
    else:
        assert problems == []


def test_cut_bytes_are_kept_in_the_side_directory(store_copy):
    root = store_copy("damaged-torn-tail")
    seg = root / "commitlog" / "00000000000000065536"
    before = seg.read_bytes()
    plan = repair(root)
    cut = next(a for a in plan.actions if a.action == "truncate" and a.path.startswith("commitlog/"))
    saved = plan.side_dir / cut.saved_to
    assert saved.read_bytes() == before[cut.pos :].rstrip(b"\0")
    after = seg.read_bytes()
    assert len(after) == len(before), "a CommitLog file must keep its full size"
    assert after[: cut.pos] == before[: cut.pos] and after[cut.pos :] == bytes(len(before) - cut.pos)
    assert json.loads((plan.side_dir / "plan.json").read_text())[0]["action"] == "truncate"
    assert (plan.side_dir / "consumequeue").is_dir(), "the old ConsumeQueues are set aside, not deleted"


def test_dry_run_prints_the_plan_and_changes_nothing(store_copy):
    root = store_copy("damaged-crc-mismatch")
    before = _digest(root)
    result = runner.invoke(app, ["repair", str(root), "--dry-run"])
    assert result.exit_code == 0, result.output
    actions = [json.loads(line) for line in result.stdout.splitlines()]
    assert actions[0] == {"action": "truncate", "path": "commitlog/00000000000000000000", "pos": 884,
                          "detail": actions[0]["detail"], "length": 65536 - 884,
                          "savedTo": "commitlog/00000000000000000000.884"}
    assert {a["action"] for a in actions} >= {"set-aside", "rebuild-consumequeue", "rebuild-index",
                                              "rebuild-timerwheel", "rewrite-checkpoint"}
    assert _digest(root) == before


def test_repair_refuses_a_store_locked_with_flock(store_copy, rmq):
    root = store_copy("good")
    with open(root / "lock", "r+b") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        before = _digest(root)
        r = rmq("repair", str(root))
        assert r.returncode == 3, r.stderr
        assert b"locked" in r.stderr and b"Traceback" not in r.stderr
        assert _digest(root) == before


def test_repair_refuses_a_store_locked_like_a_java_broker(store_copy, rmq):
    """A broker takes FileChannel.tryLock(0, 1): a POSIX record lock, held by another process."""
    root = store_copy("good")
    holder = subprocess.Popen([sys.executable, "-c",
                               "import fcntl,sys,time\n"
                               f"f=open({str(root / 'lock')!r},'r+b')\n"
                               "fcntl.lockf(f, fcntl.LOCK_EX|fcntl.LOCK_NB, 1, 0)\n"
                               "print('locked', flush=True)\n"
                               "time.sleep(60)\n"], stdout=subprocess.PIPE)
    try:
        assert holder.stdout.readline().strip() == b"locked"
        r = rmq("repair", str(root))
        assert r.returncode == 3
        assert b"locked" in r.stderr
    finally:
        holder.kill()
        holder.wait()


def test_plan_of_a_good_store_cuts_nothing(stores):
    plan = plan_repair(stores / "good")
    assert {a.action for a in plan.actions} == {"rebuild-consumequeue", "rebuild-index", "rebuild-timerwheel"}
