"""`rmqtool replicate`: a live replica of a master, read by verify/inspect while it follows."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from rmqtool.store.ha import HAService
from rmqtool.store.ha.client import wait_until
from rmqtool.store.messagestore import MessageStore
from tests.serve_helpers import rmqtool_env
from tests.store.conftest import BORN_HOST, commitlog_files, make_msg, small_config


def rmqtool(*args: str, **kw) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "rmqtool", *args], capture_output=True, text=True,
                          env=rmqtool_env(), timeout=120, **kw)


def put(store: MessageStore, start: int, n: int) -> None:
    for i in range(start, start + n):
        m = make_msg(i, queue_id=i % 2, body_size=200 + i % 700)
        m.born_host = BORN_HOST
        store.put_message(m)


@pytest.fixture
def master(tmp_path):
    store = MessageStore.open(tmp_path / "master", small_config())
    svc = HAService(store)
    svc.start("127.0.0.1", 0)
    yield store, svc
    svc.stop()
    store.close()


def start_replicate(store: Path, port: int, *extra: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "rmqtool", "replicate", "--master", f"127.0.0.1:{port}",
                             "--store", str(store), "--json", "--interval", "0.2", *extra],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=rmqtool_env())


def test_replicate_follows_while_verify_and_inspect_read_then_stops_on_sigint(tmp_path, master):
    mstore, svc = master
    replica = tmp_path / "replica"
    proc = start_replicate(replica, svc.port, "--commitlog-file-size", "65536")
    try:
        assert wait_until(lambda: svc.slave_count == 1, 20)
        put(mstore, 0, 150)
        target = mstore.commitlog.max_offset
        lines = []
        deadline = time.time() + 30
        while time.time() < deadline:
            line = proc.stdout.readline()
            assert line, proc.stderr.read()
            lines.append(json.loads(line))
            if lines[-1]["offset"] == target and lines[-1]["lag"] == 0:
                break
        assert lines[-1]["offset"] == target and lines[-1]["connected"]
        assert any(p["mbPerSecond"] > 0 for p in lines)
        # the replica is locked but readable while it follows
        r = rmqtool("verify", str(replica))
        assert r.returncode == 0, r.stdout + r.stderr
        r = rmqtool("inspect", "commitlog", str(replica / "commitlog"), "--json")
        assert r.returncode == 0, r.stderr
        assert sum(1 for line in r.stdout.splitlines() if '"topic"' in line) == 150
        r = rmqtool("send", "--store", str(replica), "X", "nope")
        assert r.returncode == 3 and "locked" in r.stderr
        put(mstore, 150, 20)
        assert wait_until(lambda: commitlog_files(replica) == commitlog_files(tmp_path / "master"), 20)
    finally:
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err
    assert "stopped at offset" in err and "Traceback" not in err
    assert rmqtool("verify", str(replica)).returncode == 0


def test_replicate_refuses_a_store_that_does_not_continue_the_master(tmp_path, master):
    mstore, svc = master
    put(mstore, 0, 30)
    other = MessageStore.open(tmp_path / "other", small_config())
    for i in range(5):
        m = make_msg(900 + i, body_size=321)
        m.born_host = BORN_HOST
        other.put_message(m)
    other.close()
    before = commitlog_files(tmp_path / "other")
    proc = start_replicate(tmp_path / "other", svc.port)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 3, err
    assert "does not continue the master's" in err and "Traceback" not in err
    assert commitlog_files(tmp_path / "other") == before


def test_replicate_bad_arguments_exit_2(tmp_path):
    r = rmqtool("replicate", "--master", "no-port", "--store", str(tmp_path / "s"))
    assert r.returncode == 2 and "HOST:PORT" in r.stderr
    s = MessageStore.open(tmp_path / "s", small_config())
    s.close()
    put_store = MessageStore.open(tmp_path / "s", small_config())
    m = make_msg(1)
    m.born_host = BORN_HOST
    put_store.put_message(m)
    put_store.close()
    r = rmqtool("replicate", "--master", "127.0.0.1:1", "--store", str(tmp_path / "s"), "--commitlog-file-size", "1024")
    assert r.returncode == 2 and "65536" in r.stderr
