"""Shared by the POP interop tests (test_pop, test_pop_push, test_pop_buffer_merge): running a Java POP
suite once per broker kind (both kinds at once), and reading the revive records (checkpoints, acks) a broker stored."""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

import pytest

from rmqtool.layouts.message import Blank, RecordError, decode_record

from .harness import java_cmd

REVIVE_PREFIX = "rmq_sys_REVIVE_LOG_"


BROKER_FIXTURES = {"apache": "apache_broker", "rmqtool": "rmqtool_serve"}
_RUNS: dict[tuple[str, str], Future] = {}  # (suite, broker kind) -> its verdicts by scenario
_RUNNER = ThreadPoolExecutor(max_workers=2)


def start_java_suites(cls: str, request: pytest.FixtureRequest, tmp_path_factory, timeout: float) -> None:
    """Java suite `cls` against each broker kind it has not run against yet, all at once: a run
    mostly waits (long polls, invisible times, redelivery), on topics and groups of its own (its
    --run), so the two side by side take about the time of one. A broker whose session fixture
    skips (its code not on this branch) is left out; its own checks then skip as before."""
    for kind, fixture in BROKER_FIXTURES.items():
        if (cls, kind) in _RUNS:
            continue
        try:
            broker = request.getfixturevalue(fixture)
        except pytest.skip.Exception:
            continue
        home = tmp_path_factory.mktemp(f"{cls.lower()}-{kind}")
        _RUNS[(cls, kind)] = _RUNNER.submit(_run_java_suite, cls, broker, home, timeout)


def _run_java_suite(cls: str, broker, home: Path, timeout: float) -> dict[str, dict]:
    """One run of `cls` against `broker`: its verdicts by scenario, and "_stderr" with the tail of
    its stderr for the failure messages (stdout and stderr go to files: no pipe to fill)."""
    with open(home / "stdout.txt", "wb") as out, open(home / "stderr.txt", "wb") as err:
        p = subprocess.Popen(java_cmd(cls, "--namesrv", broker.namesrv, "--broker", broker.broker,
                                      "--run", str(int(time.time())), home=home),
                             stdin=subprocess.DEVNULL, stdout=out, stderr=err)
        try:
            p.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
            raise
    lines = [json.loads(x) for x in (home / "stdout.txt").read_text().splitlines() if x.startswith("{")]
    results = {r["scenario"]: r for r in lines}
    results["_stderr"] = {"detail": (home / "stderr.txt").read_bytes().decode(errors="replace")[-2000:]}
    return results


def assert_java_scenario_ok(cls: str, broker, request: pytest.FixtureRequest, tmp_path_factory, scenario: str,
                            timeout: float) -> None:
    """`scenario` of Java suite `cls` (run once per broker kind for all its scenarios) passed against `broker`."""
    start_java_suites(cls, request, tmp_path_factory, timeout)
    results = _RUNS[(cls, broker.kind)].result()
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
