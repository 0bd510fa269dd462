"""A read that writes nothing: `consume --no-commit`, `inspect` and `verify` on a store made
read-only leave every file's bytes (sha256), every name and every mtime as they were, also on
a store that was not shut down cleanly (`abort` present) and holds due delay-level messages.
The committing `consume` afterwards does deliver those timers, so the store would have changed
had the read-only read done its usual work.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
import time
from pathlib import Path

from tests.conftest import rmqtool_ok


def _snapshot(root: Path) -> dict[str, tuple[str, int]]:
    out = {}
    for p in sorted(root.rglob("*")):
        rel = str(p.relative_to(root))
        if p.is_dir():
            out[rel + "/"] = ("dir", p.stat().st_mtime_ns)
        else:
            out[rel] = (hashlib.sha256(p.read_bytes()).hexdigest(), p.stat().st_mtime_ns)
    return out


def _chmod_tree(root: Path, writable: bool) -> None:
    for p in [root, *root.rglob("*")]:
        mode = p.stat().st_mode
        w = stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH
        os.chmod(p, (mode | stat.S_IWUSR) if writable else (mode & ~w))


def test_consume_no_commit_inspect_verify_change_no_byte(tmp_path):
    store = tmp_path / "store"
    rmqtool_ok("send", "--store", str(store), "Ro", "now", "--queue", "0", "--json")
    rmqtool_ok("consume", "Ro", "--store", str(store), "--group", "g", "--json")  # consumerOffset.json exists
    rmqtool_ok("send", "--store", str(store), "Ro", "again", "--queue", "0", "--json")
    rmqtool_ok("send", "--store", str(store), "Ro", "later", "--delay-level", "1", "--json")
    (store / "abort").write_bytes(b"")  # as a broker that was killed leaves it
    time.sleep(1.5)  # the delay-level 1 message is due
    _chmod_tree(store, writable=False)
    try:
        before = _snapshot(store)
        got = [json.loads(line)["body"] for line in rmqtool_ok("consume", "Ro", "--store", str(store), "--group", "g",
                                                         "--no-commit", "--json").splitlines()]
        assert got == ["again"]  # the due timer is not delivered by a read-only read
        first = rmqtool_ok("consume", "Ro", "--store", str(store), "--read-only", "--from", "first", "--format", "%s")
        assert sorted(first.split()) == ["again", "now"]
        rmqtool_ok("inspect", "store", str(store), "--json")
        rmqtool_ok("inspect", "commitlog", str(store), "--json")
        rmqtool_ok("inspect", "consumequeue", str(store / "consumequeue" / "Ro" / "0"), "--json")
        rmqtool_ok("verify", str(store))
        assert _snapshot(store) == before
    finally:
        _chmod_tree(store, writable=True)
    # the committing read does deliver the due message: there was something to leave undone
    deadline = time.monotonic() + 30
    seen: list[str] = []
    while "later" not in seen and time.monotonic() < deadline:
        seen += [json.loads(line)["body"] for line in rmqtool_ok("consume", "Ro", "--store", str(store), "--group", "g",
                                                           "--json").splitlines()]
    assert "later" in seen and _snapshot(store) != before
