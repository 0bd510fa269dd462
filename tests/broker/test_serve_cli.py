"""`rmqtool serve` as a command: one ready line, broker.conf names, VIP port, clean shutdown on
SIGTERM and SIGINT (store closed: no `abort` left, lock released), a locked store refused."""

from __future__ import annotations

import signal
import subprocess
import sys

from tests.broker.conftest import READY, ServeProcess, Wire, rmqtool_env, send_ext
from tests.cluster_helpers import free_broker_port


def test_ready_line_then_clean_shutdown_on_sigterm(tmp_path):
    p = ServeProcess(tmp_path / "store")
    lines = [line for line in p.stderr.splitlines() if line.strip()]
    # the ready line, then where slaves connect (a master's HA port)
    assert len(lines) == 2 and READY.search(lines[0])
    assert lines[0].startswith("rmqtool serve: name server 127.0.0.1:")
    assert lines[1].startswith("rmqtool serve: ASYNC_MASTER, HA listening on 127.0.0.1:")
    w = Wire(p.broker)
    assert w.request(310, send_ext("CLI_T", 0), b"kept").code == 0
    w.close()
    assert (tmp_path / "store" / "abort").exists()
    assert p.stop(signal.SIGTERM) == 0
    assert not (tmp_path / "store" / "abort").exists()
    assert "Traceback" not in p.stderr
    assert p.proc.stdout.read() == b""  # stdout carries data only; serve prints none
    # the store reopens cleanly with the message in it
    p2 = ServeProcess(tmp_path / "store")
    try:
        w = Wire(p2.broker)
        assert w.request(30, {"topic": "CLI_T", "queueId": "0"}).ext_fields["offset"] == "1"
        w.close()
    finally:
        assert p2.stop(signal.SIGINT) == 0
    assert not (tmp_path / "store" / "abort").exists()


def test_broker_conf_names_and_vip_channel(tmp_path):
    port = free_broker_port()  # its VIP port (-2) and HA port (+1) free as well
    conf = f"brokerName=broker-conf\nbrokerClusterName=ConfCluster\nlistenPort={port}\ndefaultTopicQueueNums=2\n"
    p = ServeProcess(tmp_path / "store", conf=conf, broker_port=None)
    try:
        assert p.broker_name == "broker-conf" and p.broker == f"127.0.0.1:{port}"
        vip = Wire(f"127.0.0.1:{port - 2}")
        try:
            r = vip.request(310, send_ext("VIP_T", 0), b"via vip")
            assert r.code == 0
            route = vip.request(105, {"topic": "VIP_T"})  # the broker port also answers name-server codes
            assert route.code == 0 and b"ConfCluster" in route.body and b'"writeQueueNums":2' in route.body
        finally:
            vip.close()
    finally:
        assert p.stop() == 0


def test_second_serve_on_a_locked_store_fails_with_exit_3(tmp_path):
    p = ServeProcess(tmp_path / "store")
    try:
        r = subprocess.run([sys.executable, "-m", "rmqtool", "serve", "--store", str(tmp_path / "store"),
                            "--namesrv-port", "0", "--broker-port", "0"], capture_output=True, timeout=30,
                           env=rmqtool_env())
        assert r.returncode == 3, r.stderr
        assert b"Traceback" not in r.stderr and r.stderr.strip().count(b"\n") == 0
    finally:
        assert p.stop() == 0
