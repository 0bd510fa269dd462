"""`rmqtool serve` as master and as slave (brokerRole, haMasterAddress, SYNC_MASTER inSyncReplicas=2)."""

from __future__ import annotations

import random
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from rmqtool.layouts.msgid import decode_offset_msg_id
from tests.broker.conftest import TEST_CONF, ServeProcess, Wire, props, send_ext
from tests.cluster_helpers import hold_ports, is_port_in_use_failure, restartable_broker_port
from tests.serve_helpers import rmqtool_env
from tests.store.conftest import commitlog_files
from tests.wire_helpers import wait_until

HA_LINE = re.compile(r"HA listening on ([\d.]+):(\d+)")
SMALL = TEST_CONF.replace("mappedFileSizeCommitLog=67108864", "mappedFileSizeCommitLog=1048576")


def ha_addr(p: ServeProcess) -> str:
    deadline = time.time() + 10
    while time.time() < deadline:
        m = HA_LINE.search(p.stderr)
        if m:
            return f"{m.group(1)}:{m.group(2)}"
        time.sleep(0.05)
    raise AssertionError(p.stderr)


def send(w: Wire, topic: str, i: int, **kv: str) -> tuple[int, str]:
    r = w.request(310, send_ext(topic, i % 4, props(KEYS=f"k{i}", TAGS="t" + str(i % 3), **kv)), f"body-{i}".encode() * 20)
    return r.code, (r.ext_fields or {}).get("msgId", "")


def verify(root: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "rmqtool", "verify", str(root)], capture_output=True, text=True,
                          env=rmqtool_env(), timeout=120)


def test_sync_master_and_slave_serve(tmp_path):
    master = ServeProcess(tmp_path / "master", SMALL + "brokerRole=SYNC_MASTER\ninSyncReplicas=2\nslaveTimeout=800\n")
    slave = None
    try:
        addr = ha_addr(master)
        w = Wire(master.broker)
        code, _ = send(w, "HaTopic", 0)
        assert code == 12  # FLUSH_SLAVE_TIMEOUT: no slave yet (5.x classic mode never answers SLAVE_NOT_AVAILABLE)
        slave = ServeProcess(tmp_path / "slave", SMALL + f"brokerRole=SLAVE\nbrokerId=1\nhaMasterAddress={addr}\n")
        # the replication line is printed just after the ready line ServeProcess waits for
        assert wait_until(lambda: "following HA master " + addr in slave.stderr, 10, 0.05), slave.stderr
        t0 = time.time()
        while send(w, "HaTopic", 1)[0] != 0:  # the slave connects (its first report) within seconds
            assert time.time() - t0 < 20
        for i in range(2, 400):
            assert send(w, "HaTopic", i, DELAY="1" if i % 50 == 0 else "")[0] == 0
        w.close()
    finally:
        if slave is not None:
            assert slave.stop() == 0
        assert master.stop() == 0
    assert "Traceback" not in master.stderr + (slave.stderr if slave else "")
    ours, theirs = commitlog_files(tmp_path / "slave"), commitlog_files(tmp_path / "master")
    # the master's only file, from offset 0, up to the slave's end: a DELAY message the master's
    # schedule service delivered after the slave stopped is the master's alone
    assert ours.keys() == theirs.keys()
    for name, data in ours.items():
        end = len(data.rstrip(b"\0"))
        assert end > 0 and data[:end] == theirs[name][:end], name
    r = verify(tmp_path / "slave")
    assert r.returncode == 0, r.stdout + r.stderr


def restart_master(store: Path, conf: str, port: int) -> ServeProcess:
    """The killed master again on its ports (the slave follows haMasterAddress = port + 1); a start
    that finds a port taken (a leftover of another process, seconds at most) is retried."""
    deadline = time.time() + 15
    while True:
        try:
            return ServeProcess(store, conf, broker_port=port)
        except RuntimeError as e:
            if not is_port_in_use_failure(e) or time.time() > deadline:
                raise
            time.sleep(0.5)


@pytest.mark.slow
def test_sync_master_sigkilled_under_load_loses_no_acknowledged_message(tmp_path):
    """>= 20 rounds: SIGKILL the SYNC_MASTER at a random moment while a producer sends; every message
    it acknowledged is in the slave's CommitLog (checked by the offset msgId, record by record)."""
    rounds = 20
    conf = SMALL + "brokerRole=SYNC_MASTER\ninSyncReplicas=2\nslaveTimeout=3000\nhaSendHeartbeatInterval=1000\n"
    # fixed ports outside the ephemeral range, held between the kill and the restart
    port = restartable_broker_port()
    master = ServeProcess(tmp_path / "master", conf, broker_port=port)
    addr = ha_addr(master)
    slave = ServeProcess(tmp_path / "slave", SMALL + f"brokerRole=SLAVE\nbrokerId=1\nhaMasterAddress={addr}\n"
                         "haSendHeartbeatInterval=1000\n")
    acked: list[str] = []
    rng = random.Random(11)
    try:
        for rnd in range(rounds):
            if rnd:
                master = restart_master(tmp_path / "master", conf, port)
            w = Wire(master.broker)
            stop = threading.Event()

            def load(w: Wire, stop: threading.Event, rnd: int) -> None:
                i = 0
                while not stop.is_set():
                    try:
                        code, msg_id = send(w, "KillTopic", rnd * 100000 + i)
                    except Exception:
                        return
                    if code == 0:
                        acked.append(msg_id)
                    i += 1

            before = len(acked)
            t = threading.Thread(target=load, args=(w, stop, rnd), daemon=True)
            t.start()
            t0 = time.time()
            while len(acked) == before and time.time() - t0 < 20:  # the slave is back: sends are acked
                time.sleep(0.02)
            time.sleep(rng.uniform(0.0, 0.8))
            master.proc.send_signal(signal.SIGKILL)
            master.proc.wait(10)
            with hold_ports([port, port + 1]):
                stop.set()
                t.join(15)
                try:
                    w.close()
                except Exception:
                    pass
        assert len(acked) > rounds * 5
        from rmqtool.store.ha.client import wait_until  # noqa: PLC0415

        slave_log = tmp_path / "slave" / "commitlog"
        offsets = sorted(decode_offset_msg_id(m).commit_log_offset for m in acked)
        size = 1048576

        def has_all() -> bool:
            for off in offsets:
                f = slave_log / f"{off - off % size:020d}"
                if not f.exists():
                    return False
                with open(f, "rb") as fh:
                    fh.seek(off % size + 28)
                    if int.from_bytes(fh.read(8), "big", signed=True) != off:
                        return False
            return True

        assert wait_until(has_all, 5)
    finally:
        if master.proc.poll() is None:
            master.stop()
        assert slave.stop() == 0
    assert "Traceback" not in slave.stderr
    r = verify(tmp_path / "slave")
    assert r.returncode == 0, r.stdout + r.stderr


def test_ha_port_taken_is_a_clear_error(tmp_path):
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen(1)
        port = s.getsockname()[1]
        with pytest.raises(RuntimeError, match="did not become ready") as e:
            ServeProcess(tmp_path / "m", SMALL + f"haListenPort={port}\n")
    assert "cannot listen for slaves" in str(e.value) and "Traceback" not in str(e.value)
