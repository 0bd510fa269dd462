"""`rmqtool serve --grpc-port`: the ready line names the endpoint; -1 turns it off; a taken
explicit port is a clear runtime failure (exit 3); a taken default port leaves serve running
without gRPC, saying so in the ready line; a bad value is invalid input (exit 2)."""

from __future__ import annotations

import socket
import subprocess
import sys
import time

from tests.broker.conftest import ServeProcess
from tests.serve_helpers import READY, rmqtool_env, stop_process


def test_ready_line_names_the_grpc_port(tmp_path):
    p = ServeProcess(tmp_path / "store", extra_args=("--grpc-port", "0"))
    try:
        line = p.stderr.strip()
        m = READY.search(line)
        assert m and m.group(6) and f", gRPC 127.0.0.1:{m.group(6)}, store " in line
        with socket.create_connection(("127.0.0.1", int(m.group(6))), timeout=5):
            pass
    finally:
        assert p.stop() == 0
    assert "Traceback" not in p.stderr


def test_grpc_off(tmp_path):
    p = ServeProcess(tmp_path / "store", extra_args=("--grpc-port", "-1"))
    try:
        assert "gRPC" not in p.stderr and READY.search(p.stderr)
    finally:
        assert p.stop() == 0


def _serve(tmp_path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "rmqtool", "serve", "--store", str(tmp_path / "s"),
                           "--namesrv-port", "0", "--broker-port", "0", *args],
                          capture_output=True, text=True, timeout=60, env=rmqtool_env(), stdin=subprocess.DEVNULL)


def test_taken_explicit_port_is_a_runtime_failure(tmp_path):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        r = _serve(tmp_path, "--grpc-port", str(port))
    assert r.returncode == 3
    assert r.stderr.strip() == f"rmqtool: cannot listen for gRPC on 127.0.0.1:{port}: Address already in use"


def test_bad_grpc_port_is_invalid_input(tmp_path):
    r = _serve(tmp_path, "--grpc-port", "-7")
    assert r.returncode == 2 and "--grpc-port must be -1 (off), 0 (any) or a port, not -7" in r.stderr
    assert "Traceback" not in r.stderr


def test_taken_default_port_serves_without_grpc(tmp_path):
    holder = socket.socket()
    holder.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        holder.bind(("127.0.0.1", 8081))
        holder.listen()
    except OSError:
        pass  # someone else holds 8081: just as taken
    err = tmp_path / "serve.stderr"
    try:
        with open(err, "wb") as f:  # no --grpc-port: the default (the test helpers turn it off)
            proc = subprocess.Popen([sys.executable, "-m", "rmqtool", "serve", "--store", str(tmp_path / "s"),
                                     "--namesrv-port", "0", "--broker-port", "0"],
                                    stdout=subprocess.DEVNULL, stderr=f, stdin=subprocess.DEVNULL, env=rmqtool_env())
        try:
            deadline = time.time() + 60
            while time.time() < deadline and not READY.search(err.read_text()) and proc.poll() is None:
                time.sleep(0.05)
            text = err.read_text()
            assert ", gRPC off (port 8081 in use), store " in text and READY.search(text), text
            assert len(text.strip().splitlines()) == 2  # the ready line, then where slaves connect (HA)
        finally:
            assert stop_process(proc) == 0
    finally:
        holder.close()
    assert "Traceback" not in err.read_text()
