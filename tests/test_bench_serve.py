"""benchmarks/serve.py and its serve_* modules: a case's line, and the script's parts importing as one."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[1] / "benchmarks"


@pytest.fixture
def common(monkeypatch):
    monkeypatch.syspath_prepend(str(BENCH))
    import serve_common

    return serve_common


def test_a_case_gives_the_cores_server_and_clients_kept_busy(common):
    r = common.Result("rmqtool", "produce single x16", msgs=5000, seconds=1.0, lat=[0.001, 0.003],
                      server_cpu=0.5, client_cpu=1.25)
    assert r.cpu_per_msg_us == pytest.approx(100.0)
    assert r.client_cpu_per_msg_us == pytest.approx(250.0)
    assert r.cores_busy == pytest.approx(1.75)  # 5,000 msg/s x 350 us
    assert "cores 1.75" in common.line(r)


def test_without_the_clients_cpu_no_cores_are_claimed(common):
    r = common.Result("rmqtool", "produce batch  x4 ", msgs=32000, seconds=2.0, lat=[], server_cpu=0.32)
    assert r.cores_busy is None
    text = common.line(r)
    assert "cpu    10.0 us/msg" in text and "cores" not in text and "client" not in text


def test_the_script_and_its_modules_import_together():
    out = subprocess.run([sys.executable, str(BENCH / "serve.py"), "--help"], capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 0, out.stderr
    assert "--targets" in out.stdout and "serve_wire.py" in out.stdout


def test_a_case_gives_how_busy_serves_loop_thread_was(common):
    r = common.Result("rmqtool", "produce single x16", msgs=4000, seconds=4.0, lat=[], server_cpu=0.6,
                      client_cpu=1.2, loop_run=2.2, loop_wait=1.76)
    assert r.loop_busy == pytest.approx(0.99)  # never idle: the loop thread is the bottleneck
    assert "loop run 0.55 wait 0.44" in common.line(r)


def test_the_loop_thread_is_read_from_serves_main_thread_only(common):
    class T:
        proc, loop_thread = type("P", (), {"pid": os.getpid()})(), True

    run_wait = common.loop_sched(T())
    if Path(f"/proc/{os.getpid()}/task/{os.getpid()}/schedstat").exists():
        assert run_wait is not None and run_wait[0] > 0 and run_wait[1] >= 0
    T.loop_thread = False  # Apache's JVM: its main thread is not where its requests run
    assert common.loop_sched(T()) is None


@pytest.fixture
def bench(monkeypatch):
    monkeypatch.syspath_prepend(str(BENCH))
    import serve

    return serve


def test_each_round_s_ratio_pairs_the_two_targets_case_by_case(bench, common):
    def r(case, rate):
        return common.Result("x", case, msgs=int(rate), seconds=1.0, lat=[])

    mine = [[r("single x1", 100), r("batch x1", 900)], [r("single x1", 120), r("batch x1", 800)]]
    ref = [[r("single x1", 200), r("batch x1", 600)], [r("single x1", 100)]]  # round 2 lost its batch case
    assert bench.paired_ratios(mine, ref) == {"single x1": [0.5, 1.2], "batch x1": [1.5]}


def test_who_goes_first_rotates_from_case_to_case(bench):
    a, b, c = "a", "b", "c"
    assert bench.rotated([a, b], 0) == [a, b]
    assert bench.rotated([a, b], 1) == [b, a]
    assert bench.rotated([a, b, c], 5) == [c, a, b]
    assert bench.rotated([], 3) == []
    assert bench.case_plan([1, 16]) == [("single", 1), ("single", 16), ("batch", 1), ("batch", 16), ("consume", 0)]
    assert [bench.case_topic(m, "R2") for m in ("single", "batch", "consume")] == \
        ["BenchSingleR2", "BenchBatchR2", "BenchBatchR2"]  # the pulls take what the batches sent


def _state(pid):
    with open(f"/proc/{pid}/stat") as f:
        return f.read().rsplit(")", 1)[1].split()[0]


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads /proc")
def test_a_paused_target_and_its_children_are_stopped_until_resumed(monkeypatch):
    monkeypatch.syspath_prepend(str(BENCH))
    import serve_targets

    # a server with a child process, as serve with its index process
    proc = subprocess.Popen([sys.executable, "-c", "import subprocess, sys, time; "
                             "c = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)']); "
                             "print(c.pid, flush=True); time.sleep(60)"], stdout=subprocess.PIPE, text=True)
    t = serve_targets.Target("x", "rocketmq", "", proc)
    try:
        child = int(proc.stdout.readline())
        assert serve_targets.process_tree(proc.pid) == [proc.pid, child]
        t.pause()
        deadline = time.time() + 5
        while {_state(proc.pid), _state(child)} != {"T"} and time.time() < deadline:
            time.sleep(0.02)
        assert _state(proc.pid) == "T" and _state(child) == "T"
        t.resume()
        deadline = time.time() + 5
        while "T" in {_state(proc.pid), _state(child)} and time.time() < deadline:
            time.sleep(0.02)
        assert _state(proc.pid) != "T" and _state(child) != "T"
        t.pause()
    finally:
        t.stop()  # continues a paused server before SIGTERM: it ends
    assert proc.returncode is not None
    with contextlib.suppress(ProcessLookupError):
        os.kill(child, signal.SIGKILL)


def _fake_namesrv(answers):
    """A name server that answers GET_ROUTEINFO_BY_TOPIC with `answers` in turn (the last one for ever)."""
    import asyncio
    import json
    import struct

    calls = []

    async def serve(reader, writer):
        while True:
            try:
                length, hl = struct.unpack(">ii", await reader.readexactly(8))
                data = await reader.readexactly(length - 4)
            except asyncio.IncompleteReadError:
                break
            h = json.loads(data[: hl & 0xFFFFFF])
            calls.append(h["extFields"]["topic"])
            code, body = answers[min(len(calls), len(answers)) - 1]
            head = json.dumps({"code": code, "flag": 1, "opaque": h["opaque"]}).encode()
            writer.write(struct.pack(">ii", 4 + len(head) + len(body), len(head)) + head + body)
        writer.close()

    return serve, calls


def test_a_case_waits_for_its_topic_s_route_on_the_name_server(monkeypatch):
    import asyncio

    monkeypatch.syspath_prepend(str(BENCH))
    import serve_wire

    route = (b'{"brokerDatas":[{"brokerAddrs":{"0":"127.0.0.1:1"},"brokerName":"b","cluster":"c"}],'
             b'"queueDatas":[{"brokerName":"b","perm":6,"readQueueNums":8,"writeQueueNums":8,"topicSysFlag":0}]}')

    async def go(answers, timeout):
        handler, calls = _fake_namesrv(answers)
        srv = await asyncio.start_server(handler, "127.0.0.1", 0)
        addr = f"127.0.0.1:{srv.sockets[0].getsockname()[1]}"
        try:
            await serve_wire.rmq_route_ready(addr, "BenchSingleR1", timeout=timeout)
        finally:
            srv.close()
        return calls

    calls = asyncio.run(go([(17, b""), (0, b'{"brokerDatas":[],"queueDatas":[]}'), (0, route)], 10))
    assert calls == ["BenchSingleR1"] * 3  # no route, a route without queues, then the route
    with pytest.raises(RuntimeError, match="no route for BenchSingleR1"):
        asyncio.run(go([(17, b"")], 0.5))
