"""`rmqtool verify` on a slave's store that began at its master's newest file.

The slave's queues start where its CommitLog does (the master sends from its newest file on),
while the consumer offsets it copied (SlaveSynchronize) are the master's: below this store's
queue minimums. That is a healthy replica: `--replica`, or brokerRole=SLAVE in the store's
broker.conf, does not count them; without either, verify reports them and hints at --replica.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time

from rmqtool.remoting import fastjson
from rmqtool.remoting.codes import RequestCode
from tests.broker.conftest import Wire, create_topic, pull_ext, send_ext
from tests.cluster_helpers import master_conf, slave_conf, start_broker, start_namesrv
from tests.serve_helpers import rmqtool_env

TOPIC = "VerifyReplicaT"
SMALL = "mappedFileSizeCommitLog=1048576\n"


def rmqtool(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "rmqtool", *args], capture_output=True, text=True,
                          env=rmqtool_env(), timeout=120)


def test_a_slave_that_began_mid_log_verifies_clean_as_a_replica(tmp_path):
    procs = []
    try:
        ns_proc, ns = start_namesrv(tmp_path)
        procs.append(ns_proc)
        m_proc, master = start_broker(tmp_path, "m", ns, master_conf("broker-v") + SMALL)
        procs.append(m_proc)
        create_topic(master, TOPIC, 2)
        w = Wire(master)
        try:
            for i in range(3000):  # about 3 MiB: the master has 4 files of 1 MiB
                assert w.request(RequestCode.SEND_MESSAGE_V2, send_ext(TOPIC, i % 2), b"v" * 1000).code == 0
            assert w.request(RequestCode.PULL_MESSAGE, pull_ext(TOPIC, "vcg")).code == 0  # the group exists
            for q in (0, 1):
                assert w.request(RequestCode.UPDATE_CONSUMER_OFFSET, {"consumerGroup": "vcg", "topic": TOPIC,
                                                                     "queueId": str(q), "commitOffset": "5"}).code == 0
        finally:
            w.close()
        s_store = tmp_path / "s-store"
        s_proc, slave = start_broker(tmp_path, "s", ns, slave_conf("broker-v") + SMALL, store=s_store)
        procs.append(s_proc)
        offsets = s_store / "config" / "consumerOffset.json"

        def copied() -> bool:
            try:
                return "vcg" in json.dumps(fastjson.loads(offsets.read_bytes()))
            except (OSError, ValueError):
                return False

        deadline = time.time() + 30
        while not copied():
            assert time.time() < deadline, s_proc.stderr
            time.sleep(0.2)
        r = rmqtool("inspect", "store", str(s_store), "--json", "--master", master)
        [rep] = [json.loads(x) for x in r.stdout.splitlines() if '"section":"replica"' in x.replace(" ", "")]
        assert rep["lagBytes"] == 0 and rep["queuesBehind"] == 0, r.stderr
        assert s_proc.stop() == 0
    finally:
        for p in reversed(procs):
            p.stop()
    files = sorted(p.name for p in (s_store / "commitlog").iterdir())
    assert files[0] != f"{0:020d}"  # began at the master's newest file

    plain = rmqtool("verify", str(s_store))
    assert plain.returncode == 1 and plain.stdout.count("consumer-offset-below-min") == 2
    assert "--replica" in plain.stderr
    for args in (("--replica",), ()):
        if not args:  # the store's broker.conf says what it is
            (s_store / "broker.conf").write_text("brokerName=broker-v\nbrokerRole=SLAVE\nbrokerId=1\n"
                                                 "mappedFileSizeCommitLog=1048576\n")
        r = rmqtool("verify", str(s_store), *args)
        assert r.returncode == 0 and r.stdout == "", r.stdout + r.stderr
        assert "replica: 2 offset(s) copied from the master lie outside this store's queues" in r.stderr
