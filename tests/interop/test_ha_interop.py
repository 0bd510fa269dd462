"""Issue 11, replication: classic HA between rmqtool and Apache RocketMQ 5.3.3 / 5.5.0, both directions.

An rmqtool slave (`serve` with brokerRole=SLAVE) of an Apache master, and an Apache slave of an
rmqtool master. Each slave is up before a load of mixed messages (tags, keys, a batch, delay
levels, committed and rolled-back transactions) goes to the master through the name server;
once the slave has the master's max offset the master is stopped and Apache's Java consumer
reads every message from the slave (through the slave's own name server, where it is the only
broker of broker-a, with DefaultMQPullConsumer: see ClientSuite.drain). Then the slave's
CommitLog files are byte-identical to the master's and `rmqtool verify` finds nothing in the
slave's store.

Apache's brokers run LoopbackHAService (java/): DefaultHAService bound to loopback. Topics are
created on both brokers with UPDATE_AND_CREATE_TOPIC, as an operator would (copying them from
the master is SlaveSynchronize's job, not replication's).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from rmqtool.client import Message, Producer
from rmqtool.client.message import LocalTransactionState
from rmqtool.client.producer import TransactionProducer
from tests.broker.conftest import Wire, create_topic
from tests.serve_helpers import rmqtool_env, start_serve, stop_process

from .conftest import free_port, start_apache, stop_apache
from .harness import APACHE_SECOND_VERSION, APACHE_VERSION, java_cmd, json_lines, require_java

pytestmark = [pytest.mark.interop, pytest.mark.slow, pytest.mark.timeout(600)]
# each test against Apache 5.3.3 and the newest 5.x Maven Central serves whole (5.5.1's client is not)
VERSIONS = pytest.mark.parametrize("version", [APACHE_VERSION, APACHE_SECOND_VERSION])

FILE_SIZE = 1 << 20  # several CommitLog files, with end-of-file blanks, from a small load
TOPIC = "HaIop"


def max_offset(addr: str) -> int:
    """commitLogMaxOffset of GET_BROKER_RUNTIME_INFO (28), as mqadmin brokerStatus shows it."""
    w = Wire(addr)
    try:
        r = w.request(28)
        assert r.code == 0, r.remark
        return int(json.loads(r.body)["table"]["commitLogMaxOffset"])
    finally:
        w.close()


def wait_caught_up(master: str, slave: str, timeout: float = 90) -> int:
    """Until the master's max offset has not moved for 2 s and the slave's equals it."""
    deadline = time.time() + timeout
    last, since = -1, time.time()
    while time.time() < deadline:
        m = max_offset(master)
        if m != last:
            last, since = m, time.time()
        elif time.time() - since > 2 and m > 0 and max_offset(slave) == m:
            return m
        time.sleep(0.2)
    raise AssertionError(f"slave {slave} at {max_offset(slave)}, master {master} at {max_offset(master)}")


class Listener:
    def execute_local_transaction(self, msg, arg):
        return LocalTransactionState.COMMIT_MESSAGE if arg % 2 == 0 else LocalTransactionState.ROLLBACK_MESSAGE

    def check_local_transaction(self, msg):
        return LocalTransactionState.COMMIT_MESSAGE


def mixed_load(namesrv: str) -> set[str]:
    """The messages a consumer of TOPIC must get (UNIQ keys): ~1.3 MB over every record kind."""
    expected: set[str] = set()
    with Producer("ha_iop_pg", namesrv) as p:
        for i in range(500):
            r = p.send(Message(TOPIC, (f"plain-{i}-".encode() * 200)[:2000], tags=f"tag{i % 3}", keys=[f"k{i}", "all"]))
            assert r.status.name == "SEND_OK"
            expected.add(r.msg_id)
        for b in range(5):
            rs = p.send_batch([Message(TOPIC, f"batch-{b}-{j}".encode() * 30, tags="batch") for j in range(10)])
            expected.update(rs.msg_id.split(","))
        for i in range(10):
            r = p.send(Message(TOPIC, f"delayed-{i}".encode(), tags="delay", delay_level=1))
            expected.add(r.msg_id)
    tp = TransactionProducer("ha_iop_tx", namesrv, listener=Listener())
    tp.start()
    try:
        for i in range(10):
            r, state = tp.send_message_in_transaction(Message(TOPIC, f"tx-{i}".encode(), tags="tx"), i)
            if state == LocalTransactionState.COMMIT_MESSAGE:
                expected.add(r.msg_id)
    finally:
        tp.shutdown()
    return expected


def warm_up(namesrv: str, master: str, slave: str) -> str:
    """One message, on the slave before the load: a slave's first report (a Java slave's comes with
    its first heartbeat, up to 5 s after connecting) of offset 0 starts it at the master's last
    file, so the load must not have filled a second one by then."""
    with Producer("ha_iop_warm", namesrv) as p:
        r = p.send(Message(TOPIC, b"warm-up", tags="warm"))
    wait_caught_up(master, slave)
    return r.msg_id


def java_consume(namesrv: str, home: Path, count: int, mode: str = "consume", version: str = APACHE_VERSION) -> set[str]:
    """`drain`: DefaultMQPullConsumer from offset 0 of each queue: a 5.x push consumer of a new group
    needs its master (brokerId 0) for the offsets, and here the slave is alone (ClientSuite.drain)."""
    p = subprocess.run(java_cmd("ClientSuite", mode, "--topic", TOPIC, "--group", f"ha_iop_cg_{int(time.time())}",
                                "--count", str(count), "--namesrv", namesrv, home=home,
                                props={"rocketmq.client.rebalance.waitInterval": "1000"}, version=version),
                       capture_output=True, timeout=180)
    got = json_lines(p.stdout.decode("utf-8"))
    assert p.returncode == 0, p.stderr.decode(errors="replace")[-3000:] + f" (got {len(got)} of {count})"
    return {m["msgId"] for m in got}


def assert_same_commitlog(master: Path, slave: Path) -> None:
    mine = sorted(p.name for p in (master / "commitlog").iterdir())
    theirs = sorted(p.name for p in (slave / "commitlog").iterdir())
    # (a broker deletes its oldest files at once when the disk is over 85 % full, whatever their age:
    # the message says so when a shared machine's disk is the reason)
    assert mine == theirs and len(mine) >= 2, (
        f"{mine} != {theirs}; disk used {shutil.disk_usage(master).used / shutil.disk_usage(master).total:.0%}")
    for name in mine:
        r = subprocess.run(["cmp", str(master / "commitlog" / name), str(slave / "commitlog" / name)])
        assert r.returncode == 0, f"commitlog/{name} differs"


def rmqtool_verify(store: Path) -> None:
    r = subprocess.run([sys.executable, "-m", "rmqtool", "verify", str(store)], capture_output=True, text=True,
                       env=rmqtool_env(), timeout=120)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-2000:]


def inspect_replica(store: Path, master: str) -> dict:
    """`rmqtool inspect store --master`: the replica section and its queue rows (exit 0 either way)."""
    r = subprocess.run([sys.executable, "-m", "rmqtool", "inspect", "store", str(store), "--json", "--master", master],
                       capture_output=True, text=True, env=rmqtool_env(), timeout=120)
    assert r.returncode == 0 and "Traceback" not in r.stderr, r.stderr[-3000:]
    rows = [json.loads(line) for line in r.stdout.splitlines() if line]
    [rep] = [x for x in rows if x.get("section") == "replica"]
    return {"replica": rep, "queues": {(x["topic"], x["queueId"]): x for x in rows
                                       if x.get("section") == "replica-queue"}}


def serve(root: Path, conf: str):
    root.mkdir(parents=True, exist_ok=True)
    (root / "broker.conf").write_text(f"mappedFileSizeCommitLog={FILE_SIZE}\ntransactionCheckInterval=1000\n"
                                      f"transactionTimeOut=1000\nmessageDelayLevel=1s 5s 10s\n{conf}")
    proc, m = start_serve(root / "store", root / "broker.conf", root / "serve.stderr")
    assert m, (root / "serve.stderr").read_text()
    return proc, f"{m.group(1)}:{m.group(2)}", f"{m.group(4)}:{m.group(5)}"


@VERSIONS
def test_rmqtool_slave_of_an_apache_master(tmp_path, version):
    require_java(version)
    ha_port = free_port()
    master = start_apache(tmp_path / "apache", f"haListenPort={ha_port}", f"mappedFileSizeCommitLog={FILE_SIZE}",
                          version=version)
    slave_proc = None
    try:
        slave_proc, slave_ns, slave_broker = serve(
            tmp_path / "slave", f"brokerRole=SLAVE\nbrokerId=1\nslaveReadEnable=true\n"
                                f"haMasterAddress=127.0.0.1:{ha_port}\n")
        create_topic(master.broker, TOPIC, 4)
        create_topic(slave_broker, TOPIC, 4)
        expected = {warm_up(master.namesrv, master.broker, slave_broker)} | mixed_load(master.namesrv)
        wait_caught_up(master.broker, slave_broker)
        lag = inspect_replica(tmp_path / "slave" / "store", master.broker)  # haStatus + GET_MAX_OFFSET of Java
        assert lag["replica"]["masterReachable"] and lag["replica"]["lagBytes"] == 0, lag
        assert lag["replica"]["masterSlaves"] == 1 and lag["queues"][(TOPIC, 0)]["lag"] == 0
        assert lag["queues"][(TOPIC, 0)]["masterMaxOffset"] > 0
        stop_apache(master)
        offline = inspect_replica(tmp_path / "slave" / "store", master.broker)
        assert offline["replica"]["masterReachable"] is False and offline["queues"] == {}
        assert offline["replica"]["maxOffset"] == lag["replica"]["maxOffset"]
        got = java_consume(slave_ns, tmp_path / "home", len(expected), "drain", version)
        assert got == expected
    finally:
        if master.proc.poll() is None:
            stop_apache(master)
        if slave_proc is not None:
            assert stop_process(slave_proc) == 0
    assert "Traceback" not in (tmp_path / "slave" / "serve.stderr").read_text()
    assert_same_commitlog(master.store, tmp_path / "slave" / "store")
    rmqtool_verify(tmp_path / "slave" / "store")


@VERSIONS
def test_apache_slave_of_an_rmqtool_master(tmp_path, version):
    require_java(version)
    ha_port = free_port()
    master_proc, master_ns, master_broker = serve(tmp_path / "master", f"haListenPort={ha_port}\n")
    slave = None
    try:
        slave = start_apache(tmp_path / "apache", "brokerRole=SLAVE", "brokerId=1", "slaveReadEnable=true",
                             f"haMasterAddress=127.0.0.1:{ha_port}", f"haListenPort={free_port()}",
                             f"mappedFileSizeCommitLog={FILE_SIZE}", version=version)
        create_topic(master_broker, TOPIC, 4)
        create_topic(slave.broker, TOPIC, 4)
        expected = {warm_up(master_ns, master_broker, slave.broker)} | mixed_load(master_ns)
        wait_caught_up(master_broker, slave.broker)
        assert stop_process(master_proc) == 0
        got = java_consume(slave.namesrv, tmp_path / "home", len(expected), "drain", version)
        assert got == expected
    finally:
        if master_proc.poll() is None:
            stop_process(master_proc)
        if slave is not None:
            stop_apache(slave)
    assert "Traceback" not in (tmp_path / "master" / "serve.stderr").read_text()
    assert_same_commitlog(tmp_path / "master" / "store", slave.store)
    rmqtool_verify(slave.store)
