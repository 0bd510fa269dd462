"""`rmqtool inspect store` on a slave's store: its lag behind the master, online and offline.

A serve master and a serve slave (--broker-only, one name server): caught up, the lag is 0
bytes and 0 per queue, asked at the master's address or at the name server; with the slave
stopped and the master sent more, the store shows the bytes and messages it lacks, queue by
queue; with the master gone too, stderr says so and the offline view is still printed (exit 0).
"""

from __future__ import annotations

import json
import subprocess
import sys
import time

from tests.broker.conftest import Wire, props, send_ext
from tests.cluster_helpers import start_master_and_slave
from tests.serve_helpers import rmqtool_env

TOPIC = "ReplicaLagT"


def inspect_store(store, *args: str) -> tuple[int, list[dict], str]:
    p = subprocess.run([sys.executable, "-m", "rmqtool", "inspect", "store", str(store), "--json", *args],
                       capture_output=True, text=True, env=rmqtool_env(), timeout=120)
    return p.returncode, [json.loads(line) for line in p.stdout.splitlines() if line], p.stderr


def section(rows: list[dict], name: str) -> list[dict]:
    return [r for r in rows if r.get("section") == name]


def send(addr: str, n: int, start: int = 0) -> None:
    w = Wire(addr)
    try:
        for i in range(start, start + n):
            r = w.request(310, send_ext(TOPIC, i % 2, props(KEYS=f"k{i}")), f"replica-{i}".encode() * 10)
            assert r.code == 0, r.remark
    finally:
        w.close()


def max_offset(addr: str, qid: int) -> int:
    w = Wire(addr)
    try:
        return int(w.request(30, {"topic": TOPIC, "queueId": str(qid)}).ext_fields["offset"])
    finally:
        w.close()


def test_inspect_store_shows_a_slaves_lag_online_and_offline(tmp_path):
    procs = []
    try:
        s_store = tmp_path / "s-store"
        ns, m_proc, master, s_proc, slave = start_master_and_slave(tmp_path, procs, "broker-r", TOPIC, 2, s_store)
        send(master, 30)
        deadline = time.time() + 30
        while [max_offset(slave, q) for q in (0, 1)] != [15, 15]:
            assert time.time() < deadline, s_proc.stderr
            time.sleep(0.2)

        for where in (master, ns):  # the master itself, or the name server that lists it
            rc, rows, err = inspect_store(s_store, "--master", where)
            assert rc == 0, err
            [rep] = section(rows, "replica")
            assert rep["masterReachable"] and rep["master"] == master and rep["namesrv"] == (ns if where == ns else None)
            assert rep["lagBytes"] == 0 and rep["maxOffset"] == rep["masterMaxOffset"] > 0
            assert rep["masterSlaves"] == 1 and rep["queuesBehind"] == 0 and rep["messagesBehind"] == 0
            queues = {(r["topic"], r["queueId"]): r for r in section(rows, "replica-queue")}
            assert queues[(TOPIC, 0)]["lag"] == queues[(TOPIC, 1)]["lag"] == 0
            assert queues[(TOPIC, 0)]["masterMaxOffset"] == 15
            [conn] = section(rows, "replica-slave")
            assert conn["slaveAckOffset"] == rep["maxOffset"]

        rc, rows, err = inspect_store(s_store, "--master", slave)  # a slave is no master to compare with
        assert rc == 0 and f"{slave} is a slave, not a master" in err and "Traceback" not in err
        assert section(rows, "replica")[0]["masterReachable"] is False

        assert s_proc.stop() == 0  # the slave stops; the master goes on
        before = inspect_store(s_store, "--master", master)[1]
        send(master, 7, start=30)
        rc, rows, err = inspect_store(s_store, "--master", master, "--topic", TOPIC)
        assert rc == 0, err
        [rep] = section(rows, "replica")
        [old] = section(before, "replica")
        assert rep["maxOffset"] == old["maxOffset"] and rep["masterMaxOffset"] > rep["maxOffset"]
        assert rep["lagBytes"] == rep["masterMaxOffset"] - rep["maxOffset"]
        assert rep["queuesBehind"] == 2 and rep["messagesBehind"] == 7
        lags = {r["queueId"]: r["lag"] for r in section(rows, "replica-queue")}
        assert lags == {0: 4, 1: 3}  # --topic: only this topic's queues

        # a broker.conf beside the store saying SLAVE: asked through its namesrvAddr, no --master
        (s_store / "broker.conf").write_text(f"brokerName=broker-r\nbrokerRole=SLAVE\nnamesrvAddr={ns}\n")
        rc, rows, err = inspect_store(s_store)
        assert rc == 0, err
        [rep] = section(rows, "replica")
        assert rep["role"] == "SLAVE" and rep["master"] == master and rep["messagesBehind"] == 7

        assert m_proc.stop() == 0  # the master is gone: the offline view, exit 0
        rc, rows, err = inspect_store(s_store, "--master", master)
        assert rc == 0 and "not reachable" in err and "showing the store offline" in err and "Traceback" not in err
        [rep] = section(rows, "replica")
        assert rep["masterReachable"] is False and rep["masterMaxOffset"] is None and rep["lagBytes"] is None
        assert rep["maxOffset"] == old["maxOffset"] and section(rows, "replica-queue") == []
        assert section(rows, "commitlog") and section(rows, "queue")  # the store's own summary
    finally:
        for p in reversed(procs):
            p.stop()


def test_master_option_is_for_the_store_kind_only(tmp_path):
    (tmp_path / "commitlog").mkdir()
    p = subprocess.run([sys.executable, "-m", "rmqtool", "inspect", "commitlog", str(tmp_path), "--master", "127.0.0.1:1"],
                       capture_output=True, text=True, env=rmqtool_env(), timeout=60)
    assert p.returncode == 2 and "--master is for `inspect store`" in p.stderr and "Traceback" not in p.stderr


def test_a_slave_store_whose_broker_conf_names_no_name_server_is_shown_offline(tmp_path):
    (tmp_path / "commitlog").mkdir()
    (tmp_path / "broker.conf").write_text("brokerRole=SLAVE\nbrokerId=1\n")
    rc, rows, err = inspect_store(tmp_path)
    assert rc == 0 and "names no namesrvAddr" in err and "pass --master HOST:PORT" in err
    [rep] = section(rows, "replica")
    assert rep["role"] == "SLAVE" and rep["master"] is None and rep["masterReachable"] is False
    assert rep["maxOffset"] == 0 and rep["lagBytes"] is None


def test_a_store_that_is_no_replica_has_no_replica_section(tmp_path):
    (tmp_path / "commitlog").mkdir()
    rc, rows, err = inspect_store(tmp_path)
    assert rc == 0, err
    assert section(rows, "replica") == [] and section(rows, "commitlog")
