"""500 new consumer groups while route look-ups go on: the event loop never waits for the disk.

Each new group is a heartbeat (the subscription group and its %RETRY% topic are created, which
changes subscriptionGroup.json and topics.json) and an UPDATE_CONSUMER_OFFSET. serve writes
those files from its config writer thread, batched, so GET_ROUTEINFO_BY_TOPIC look-ups on the
same loop are answered in well under 100 ms throughout. The files hold every group at the end.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time

import pytest

from rmqtool.store.jsonconfig import read_file
from tests.broker.conftest import (
    TEST_CONF,
    InProcessServe,
    ServeProcess,
    Wire,
    heartbeat_body,
    send_ext,
    sub_data,
)
from tests.serve_helpers import rmqtool_env

ATTEMPTS = 3  # a 2-core machine shared with other work can stall any process once in a while
BUDGET_S = 0.100  # every route look-up while the groups arrive

# the new groups come from another process, so the look-ups here do not share its GIL
LOAD = """
import sys
from tests.broker.conftest import Wire, heartbeat_body, sub_data
w = Wire(sys.argv[1])
for i in range(int(sys.argv[3]), int(sys.argv[3]) + 500):
    group = f"{sys.argv[2]}_{i}"
    hb = heartbeat_body(f"127.0.0.1@c{i}", group, [sub_data("LatencyTopic")])
    assert w.request(34, body=hb).code == 0
    q = {"consumerGroup": group, "topic": "LatencyTopic", "queueId": "0", "commitOffset": "1"}
    assert w.request(15, q).code == 0
w.close()
"""


def _lookups_during_new_groups(serve: ServeProcess, lookups: Wire, first: int) -> list[float]:
    load = subprocess.Popen([sys.executable, "-c", LOAD, serve.broker, "latency_cg", str(first)],
                            env=rmqtool_env())
    latencies = []
    while load.poll() is None:
        t0 = time.perf_counter()
        assert lookups.request(105, {"topic": "LatencyTopic"}).code == 0
        latencies.append(time.perf_counter() - t0)
        time.sleep(0.005)
    assert load.wait() == 0
    return latencies


def test_no_config_write_touches_the_disk_on_the_event_loop(tmp_path, monkeypatch):
    """In-process serve: every fsync and rename of 500 new groups happens off the loop's thread."""
    calls: list[tuple[str, int]] = []
    for name in ("fsync", "replace"):
        real = getattr(os, name)

        def recorder(*a, _real=real, _name=name, **kw):
            calls.append((_name, threading.get_ident()))
            return _real(*a, **kw)

        monkeypatch.setattr(os, name, recorder)
    serve = InProcessServe(tmp_path, TEST_CONF)
    loop_ident = serve.thread.ident
    w = Wire(serve.broker)
    try:
        for i in range(200):  # one at a time: each answer waits for its group's write, off the loop
            group = f"loop_cg_{i}"
            assert w.request(34, body=heartbeat_body(f"127.0.0.1@c{i}", group, [sub_data("LoopTopic")])).code == 0
            q = {"consumerGroup": group, "topic": "LoopTopic", "queueId": "0", "commitOffset": "1"}
            assert w.request(15, q).code in (0, 17)  # 17: LoopTopic has no queue yet; the heartbeat is what counts
        serial = len(calls)
        # 300 at once: requests that arrive while a write runs share the next one
        futures = [w.request_async(34, body=heartbeat_body(f"127.0.0.1@c{i}", f"loop_cg_{i}", [sub_data("LoopTopic")]))
                   for i in range(200, 500)]
        assert all(f.result(60).code == 0 for f in futures)
        on_loop = [c for c in calls if c[1] == loop_ident]
        assert not on_loop, f"{len(on_loop)} fsync/rename calls on the event loop"
        # batched: a write per group would be 300 x 2 files x 3 calls (fsync, rename, fsync of the
        # directory) = 1800; how many groups share a write depends on how fast this machine's loop
        # reads them against its fsyncs (about 17 to a write on a loaded CI machine): at least six
        assert 0 < serial and len(calls) - serial < 300, (serial, len(calls))
    finally:
        w.close()
        serve.close()
    groups = read_file(tmp_path / "store" / "config" / "subscriptionGroup.json")["subscriptionGroupTable"]
    assert {f"loop_cg_{i}" for i in range(500)} <= set(groups)


def _idle_lookups(lookups: Wire, n: int) -> list[float]:
    out = []
    for _ in range(n):
        t0 = time.perf_counter()
        assert lookups.request(105, {"topic": "LatencyTopic"}).code == 0
        out.append(time.perf_counter() - t0)
        time.sleep(0.005)
    return out


@pytest.mark.slow
@pytest.mark.quiet
def test_500_new_groups_do_not_stall_route_lookups(tmp_path):
    """Every look-up under 100 ms while 500 groups arrive (writing the files on the loop stalled
    look-ups for 0.5-1.2 s here).

    A `quiet` test: run alone (`-m quiet -n 0`), as tests beside it on other cores stall the
    loop by themselves. What remained was the garbage collector and the config writer: full
    collections of start-up's objects (14-29 ms of the loop's CPU each, 35 during 1000 groups)
    and a writer making 1000-entry files from scratch (7-12 ms each, holding the GIL), now
    start-up frozen out of the collector (2-4 ms a pass) and only changed entries written again
    (1-2 ms). An idle serve's slowest look-up, measured just before, goes into the failure
    message: a machine busy with other work shows there."""
    serve = ServeProcess(tmp_path / "store")
    try:
        producer = Wire(serve.broker)
        assert producer.request(310, send_ext("LatencyTopic", 0), b"x").code == 0
        producer.close()
        lookups = Wire(serve.namesrv)
        assert lookups.request(105, {"topic": "LatencyTopic"}).code == 0
        seen = []
        for attempt in range(ATTEMPTS):
            idle = max(_idle_lookups(lookups, 200))
            latencies = _lookups_during_new_groups(serve, lookups, 500 * attempt)
            assert len(latencies) > 50
            seen.append((round(max(latencies) * 1000), round(idle * 1000)))
            if max(latencies) < BUDGET_S:
                break
        else:
            raise AssertionError("slowest route look-up during 500 new groups, and an idle serve's slowest "
                                 f"just before, per attempt (ms): {seen}; the budget is {BUDGET_S * 1000:g} ms")
        lookups.close()
    finally:
        code = serve.stop()
    assert code == 0, serve.stderr
    assert "Traceback" not in serve.stderr
    config = serve.store / "config"
    groups = read_file(config / "subscriptionGroup.json")["subscriptionGroupTable"]
    assert {f"latency_cg_{i}" for i in range(500)} <= set(groups)
    topics = read_file(config / "topics.json")["topicConfigTable"]
    assert {f"%RETRY%latency_cg_{i}" for i in range(500)} <= set(topics)
    offsets = read_file(config / "consumerOffset.json")["offsetTable"]
    assert offsets["LatencyTopic@latency_cg_499"] == {"0": 1}
