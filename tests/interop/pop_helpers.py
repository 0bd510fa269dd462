"""Shared by the POP interop tests (test_pop, test_pop_push, test_pop_buffer_merge): running a Java POP
suite once per broker, and reading the revive records (checkpoints, acks) a broker stored."""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

from rmqtool.layouts.message import Blank, RecordError, decode_record

from .harness import java_cmd

REVIVE_PREFIX = "rmq_sys_REVIVE_LOG_"


_RUNS: dict[tuple[str, str], dict[str, dict]] = {}  # (suite, broker kind) -> verdicts by scenario


def run_java_suite(cls: str, broker, tmp_path_factory, timeout: float) -> dict[str, dict]:
    """The verdicts of Java suite `cls` against `broker` by scenario, run once per suite and broker kind;
    "_stderr" holds the tail of its stderr for the failure messages."""
    key = (cls, broker.kind)
    if key not in _RUNS:
        home = tmp_path_factory.mktemp(f"{cls.lower()}-{broker.kind}")
        p = subprocess.run(java_cmd(cls, "--namesrv", broker.namesrv, "--broker", broker.broker,
                                    "--run", str(int(time.time())), home=home),
                           capture_output=True, timeout=timeout)
        (home / "stderr.txt").write_bytes(p.stderr)
        lines = [json.loads(x) for x in p.stdout.decode().splitlines() if x.startswith("{")]
        _RUNS[key] = {r["scenario"]: r for r in lines}
        _RUNS[key]["_stderr"] = {"detail": p.stderr.decode(errors="replace")[-2000:]}
    return _RUNS[key]


def assert_java_scenario_ok(cls: str, broker, tmp_path_factory, scenario: str, timeout: float) -> None:
    """`scenario` of Java suite `cls` (run once for all its scenarios) passed against `broker`."""
    results = run_java_suite(cls, broker, tmp_path_factory, timeout)
    r = results.get(scenario)
    assert r is not None, f"no result for {scenario}: {results['_stderr']['detail']}"
    assert r["ok"], f"{scenario} against {broker.kind}: {r['detail']}"


def revive_messages(store: Path, marker: bytes, *, on_timer_only: bool = False) -> Iterator[tuple]:
    """(message, JSON body without its times, UNIQ_KEY parts without the time) of each revive record in the
    commit log whose body holds `marker`; `on_timer_only`: only those still put on the timer topic."""
    for f in sorted((store / "commitlog").iterdir()):
        data = f.read_bytes()
        pos = 0
        while pos < len(data):
            try:
                m = decode_record(data, pos)
            except (Blank, RecordError):
                break
            pos += m.total_size
            real = m.properties.get("REAL_TOPIC", m.topic)
            if real.startswith(REVIVE_PREFIX) and marker in m.body and not (on_timer_only and m.topic == real):
                body = json.loads(m.body)
                for k in ("pt", "reviveTime"):
                    body.pop(k, None)
                uniq = m.properties["UNIQ_KEY"].split("@")
                yield m, json.dumps(body, sort_keys=True), uniq[:4] + uniq[5:]
