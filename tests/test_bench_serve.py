"""benchmarks/serve.py and its serve_* modules: a case's line, and the script's parts importing as one."""

from __future__ import annotations

import subprocess
import sys
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
    import os

    class T:
        proc, loop_thread = type("P", (), {"pid": os.getpid()})(), True

    run_wait = common.loop_sched(T())
    if Path(f"/proc/{os.getpid()}/task/{os.getpid()}/schedstat").exists():
        assert run_wait is not None and run_wait[0] > 0 and run_wait[1] >= 0
    T.loop_thread = False  # Apache's JVM: its main thread is not where its requests run
    assert common.loop_sched(T()) is None
