"""Classic replication between two rmqtool stores in one process (store/ha).

What Apache's brokers do on either end is in tests/interop/test_ha_interop.py; here: byte-identical
CommitLog files and clean verify on the slave, the start at the master's last file, reconnects,
SYNC_MASTER acknowledgements and timeouts, a diverged slave, and bad peers on the HA port.
"""

from __future__ import annotations

import dataclasses
import socket
import struct
import time
from pathlib import Path

import pytest

from rmqtool.errors import StoreError
from rmqtool.inspect.layoutconfig import load_layout_config
from rmqtool.inspect.verify import VerifyState, check_store
from rmqtool.store.ha import HAClient, HAService
from rmqtool.store.ha.client import wait_until
from rmqtool.store.messagestore import MessageStore
from tests.store.conftest import BORN_HOST, commitlog_files, make_msg, small_config


def msg(i: int, **kw):
    m = make_msg(i, queue_id=i % 3, body_size=50 + (i * 37) % 900, **kw)
    m.born_host = BORN_HOST
    return m


def put(store: MessageStore, start: int, n: int, **kw) -> list:
    return [store.put_message(msg(i, **kw)) for i in range(start, start + n)]


def slave_config(cfg, **kw):
    return dataclasses.replace(cfg, broker_role="SLAVE", **kw)


def verify_problems(root: Path) -> list:
    return list(check_store(root, check_crc=True, state=VerifyState(load_layout_config(root)), jobs=1))


@pytest.fixture
def cfg():
    return small_config(ha_send_heartbeat_interval=200, ha_housekeeping_interval=2000)


@pytest.fixture
def master(tmp_path, cfg):
    store = MessageStore.open(tmp_path / "master", cfg)
    svc = HAService(store)
    svc.start("127.0.0.1", 0)
    yield store, svc
    svc.stop()
    store.close()


def follow(tmp_path: Path, cfg, port: int, name: str = "slave"):
    store = MessageStore.open(tmp_path / name, slave_config(cfg))
    client = HAClient(store, f"127.0.0.1:{port}", reconnect_wait_s=0.2)
    client.start()
    return store, client


def caught_up(slave: MessageStore, master: MessageStore, timeout: float = 20) -> bool:
    return wait_until(lambda: slave.commitlog.max_offset == master.commitlog.max_offset, timeout)


def test_slave_copies_every_file_byte_for_byte_and_verifies_clean(tmp_path, cfg, master):
    mstore, svc = master
    sstore, client = follow(tmp_path, cfg, svc.port)
    try:
        assert wait_until(lambda: svc.slave_count == 1, 10)
        put(mstore, 0, 300)  # several 64 KiB files, blanks at their ends
        mstore.put_messages([msg(i) for i in range(300, 310)])
        put(mstore, 310, 5, DELAY="2")
        assert caught_up(sstore, mstore)
        assert len(mstore.commitlog.mfq.files) >= 3
        assert wait_until(lambda: svc.connections()[0].slave_ack_offset == mstore.commitlog.max_offset, 5)
        for key, cq in mstore.cqs.queues.items():
            scq = sstore.cqs.queues[key]
            assert (scq.min_offset_in_queue, scq.max_offset_in_queue) == (cq.min_offset_in_queue, cq.max_offset_in_queue)
        got = sstore.get_message("TopicTest", 1, 0, 64)
        assert [m.body for m in got.messages] == [m.body for m in mstore.get_message("TopicTest", 1, 0, 64).messages]
        assert sstore.query_message("TopicTest", "key7")[0].uniq_key == "UNIQ00000007"
        info = svc.connections()[0]
        assert info.diff == 0 and info.in_sync
    finally:
        client.stop()
        sstore.close()
    assert client.error is None
    assert commitlog_files(tmp_path / "slave") == commitlog_files(tmp_path / "master")
    mstore.flush()
    assert verify_problems(tmp_path / "slave") == []


def test_new_slave_starts_at_the_masters_last_file_and_resumes_after_restart(tmp_path, cfg, master):
    mstore, svc = master
    put(mstore, 0, 120)
    files = mstore.commitlog.mfq.files
    assert len(files) >= 2
    last_base = files[-1].from_offset
    sstore, client = follow(tmp_path, cfg, svc.port)
    assert caught_up(sstore, mstore)
    assert sstore.commitlog.min_offset == last_base
    client.stop()
    sstore.close()
    put(mstore, 120, 80)
    sstore, client = follow(tmp_path, cfg, svc.port)
    try:
        assert caught_up(sstore, mstore)
    finally:
        client.stop()
        sstore.close()
    ours, theirs = commitlog_files(tmp_path / "slave"), commitlog_files(tmp_path / "master")
    assert set(ours) <= set(theirs) and min(ours) == files[-1].path.name
    assert all(ours[name] == theirs[name] for name in ours)
    assert verify_problems(tmp_path / "slave") == []


def test_slave_follows_a_master_that_restarts(tmp_path, cfg):
    mstore = MessageStore.open(tmp_path / "master", cfg)
    svc = HAService(mstore)
    port = svc.start("127.0.0.1", 0)
    sstore, client = follow(tmp_path, cfg, port)
    try:
        put(mstore, 0, 30)
        assert caught_up(sstore, mstore)
        svc.stop()
        mstore.close()
        mstore = MessageStore.open(tmp_path / "master", cfg)
        put(mstore, 30, 30)
        svc = HAService(mstore)
        svc.start("127.0.0.1", port)
        assert caught_up(sstore, mstore)
        assert client.error is None
    finally:
        client.stop()
        sstore.close()
        svc.stop()
        mstore.close()
    assert commitlog_files(tmp_path / "slave") == commitlog_files(tmp_path / "master")


def test_sync_master_acknowledges_after_the_slave_has_the_message(tmp_path):
    cfg = small_config(broker_role="SYNC_MASTER", in_sync_replicas=2, slave_timeout=400,
                       ha_send_heartbeat_interval=200)
    mstore = MessageStore.open(tmp_path / "master", cfg)
    svc = HAService(mstore)
    svc.start("127.0.0.1", 0)
    try:
        t0 = time.monotonic()
        r = mstore.put_message(msg(0))
        assert r.status == "FLUSH_SLAVE_TIMEOUT"  # 5.x classic: no slave is a timeout, not SLAVE_NOT_AVAILABLE
        assert 0.35 < time.monotonic() - t0 < 3
        assert mstore.put_message(msg(1, WAIT="false")).status == "PUT_OK"  # needHandleHA: WAIT=false
        sstore, client = follow(tmp_path, cfg, svc.port)
        try:
            assert caught_up(sstore, mstore)
            for i in range(2, 40):
                r = mstore.put_message(msg(i))
                assert r.status == "PUT_OK"
                # the ack came from the slave: its CommitLog already holds the record's end
                assert sstore.commitlog.max_offset >= r.wrote_offset + r.wrote_bytes
        finally:
            client.stop()
            sstore.close()
    finally:
        svc.stop()
        mstore.close()


def test_async_master_and_in_sync_replicas_1_never_wait(tmp_path):
    for role, isr in (("ASYNC_MASTER", 2), ("SYNC_MASTER", 1)):
        cfg = small_config(broker_role=role, in_sync_replicas=isr, slave_timeout=2000)
        mstore = MessageStore.open(tmp_path / role, cfg)
        svc = HAService(mstore)
        svc.start("127.0.0.1", 0)
        try:
            t0 = time.monotonic()
            assert mstore.put_message(msg(0)).status == "PUT_OK"
            assert time.monotonic() - t0 < 1
        finally:
            svc.stop()
            mstore.close()


def test_a_slave_store_takes_no_puts(tmp_path, cfg):
    with MessageStore.open(tmp_path / "s", slave_config(cfg)) as s, pytest.raises(StoreError, match="slave mode"):
        s.put_message(msg(0))


def test_a_diverged_slave_stops_and_keeps_its_data(tmp_path, cfg, master):
    mstore, svc = master
    put(mstore, 0, 40)
    other = MessageStore.open(tmp_path / "slave", cfg)  # a store of its own, as if it had been a master
    for i in range(7):
        other.put_message(msg(1000 + i))
    other.close()
    before = commitlog_files(tmp_path / "slave")
    sstore, client = follow(tmp_path, cfg, svc.port)
    try:
        assert wait_until(lambda: client.error is not None, 10)
        assert "does not continue the master's" in client.error
        assert not client.alive or wait_until(lambda: not client.alive, 5)
    finally:
        client.stop()
        sstore.close()
    assert commitlog_files(tmp_path / "slave") == before


def _open(port: int) -> socket.socket:
    s = socket.create_connection(("127.0.0.1", port), timeout=5)
    s.settimeout(5)
    return s


def _closed_by_peer(s: socket.socket, timeout: float = 5) -> bool:
    s.settimeout(timeout)
    try:
        while True:
            got = s.recv(65536)
            if not got:
                return True
    except (ConnectionResetError, BrokenPipeError):
        return True
    except TimeoutError:
        return False


@pytest.mark.parametrize("payload", [
    bytes.fromhex("1d9a4ec3e83b551d") + b"\xff" * 8,  # garbage: a negative offset among it (fixed: xdist workers collect the same ids)
    struct.pack(">q", 1 << 50),  # an offset far past the master's max
    struct.pack(">q", 0) + b"\x00" * 3,  # a report, then a truncated one
    b"MAX",  # a report at the master's max offset, then one going back
    struct.pack(">q", -8),
])
def test_bad_reports_close_the_connection_and_write_nothing(tmp_path, cfg, master, payload):
    mstore, svc = master
    put(mstore, 0, 20)
    mstore.flush()
    before = commitlog_files(tmp_path / "master")
    s = _open(svc.port)
    if payload == b"MAX":
        s.sendall(struct.pack(">q", mstore.commitlog.max_offset))
        time.sleep(0.2)
        payload = struct.pack(">q", 100)
    s.sendall(payload)
    assert _closed_by_peer(s, timeout=cfg.ha_housekeeping_interval / 1000 + 5)
    s.close()
    assert wait_until(lambda: svc.slave_count == 0, 5)
    assert commitlog_files(tmp_path / "master") == before
    sstore, client = follow(tmp_path, cfg, svc.port)  # the master still serves slaves and puts
    try:
        put(mstore, 20, 5)
        assert caught_up(sstore, mstore)
    finally:
        client.stop()
        sstore.close()


def test_truncated_report_and_silence_are_closed_by_housekeeping(tmp_path, cfg, master):
    mstore, svc = master
    s = _open(svc.port)
    s.sendall(b"\x00\x00\x00")  # 3 of 8 bytes, then nothing
    t0 = time.monotonic()
    assert _closed_by_peer(s, timeout=10)
    assert time.monotonic() - t0 >= cfg.ha_housekeeping_interval / 1000 - 0.5
    s.close()
    assert wait_until(lambda: svc.slave_count == 0, 5)
    assert mstore.put_message(msg(0)).status == "PUT_OK"


def test_slave_drops_a_master_that_sends_garbage(tmp_path, cfg):
    """A fake master: a header at an offset the slave does not have, then a huge size: dropped,
    reconnected, and nothing is written."""
    lsock = socket.socket()
    lsock.bind(("127.0.0.1", 0))
    lsock.listen(4)
    lsock.settimeout(10)
    port = lsock.getsockname()[1]
    seeded = MessageStore.open(tmp_path / "slave", cfg)
    for i in range(3):
        seeded.put_message(msg(i))
    seeded.close()
    before = commitlog_files(tmp_path / "slave")
    sstore, client = follow(tmp_path, cfg, port)
    try:
        for header in (struct.pack(">qi", 12345, 10) + b"x" * 10, struct.pack(">qi", 0, -5),
                       struct.pack(">qi", sstore.commitlog.max_offset, 1 << 30)):
            conn, _ = lsock.accept()
            conn.settimeout(10)
            assert struct.unpack(">q", conn.recv(8))[0] == sstore.commitlog.max_offset
            conn.sendall(header)
            assert _closed_by_peer(conn)
            conn.close()
        assert client.error is None
    finally:
        client.stop()
        sstore.close()
        lsock.close()
    assert commitlog_files(tmp_path / "slave") == before


def test_transfers_cut_anywhere_write_whole_records_only(tmp_path, cfg):
    """The appender fed the master's bytes in odd-sized pieces: the slave's end is always a record
    boundary (readers never see half a record), and the files come out identical."""
    from rmqtool.store.ha import ReplicaAppender

    mstore = MessageStore.open(tmp_path / "master", cfg)
    put(mstore, 0, 200)
    mstore.flush()
    ends = {0} | {r.commit_log_offset + r.total_size for r in mstore.commitlog.iter_records(0)}
    ends |= {mf.from_offset for mf in mstore.commitlog.mfq.files}
    total = mstore.commitlog.max_offset
    raw = b"".join((tmp_path / "master" / "commitlog" / mf.path.name).read_bytes()[: mf.wrote_position]
                   for mf in mstore.commitlog.mfq.files)
    mstore.close()
    sstore = MessageStore.open(tmp_path / "slave", slave_config(cfg))
    app = ReplicaAppender(sstore)
    rng = __import__("random").Random(5)
    off = 0
    while off < total:
        n = min(rng.choice([1, 7, 90, 500, 4096, 20000]), total - off, cfg.mapped_file_size_commit_log
                - off % cfg.mapped_file_size_commit_log)
        app.append(off, raw[off : off + n])
        off += n
        assert sstore.commitlog.max_offset in ends
        assert app.next_offset == off
    assert sstore.commitlog.max_offset == total
    sstore.close()
    assert commitlog_files(tmp_path / "slave") == commitlog_files(tmp_path / "master")
    assert verify_problems(tmp_path / "slave") == []


def test_broker_conf_ha_keys():
    from rmqtool.errors import InvalidInput
    from rmqtool.store.config import StoreConfig

    cfg = StoreConfig.from_properties({"brokerRole": "sync_master", "haListenPort": "20912", "inSyncReplicas": "2",
                                       "haMasterAddress": "10.0.0.5:10912", "haSendHeartbeatInterval": "1000",
                                       "haHousekeepingInterval": "9000", "haTransferBatchSize": "65536",
                                       "slaveTimeout": "1500", "listenPort": "30911"})
    assert (cfg.broker_role, cfg.ha_port, cfg.in_sync_replicas, cfg.ha_master_address) == (
        "SYNC_MASTER", 20912, 2, "10.0.0.5:10912")
    assert (cfg.ha_send_heartbeat_interval, cfg.ha_housekeeping_interval, cfg.ha_transfer_batch_size,
            cfg.slave_timeout) == (1000, 9000, 65536, 1500)
    assert StoreConfig.from_properties({"listenPort": "30911"}).ha_port == 30912  # listenPort + 1
    with pytest.raises(InvalidInput, match="brokerRole"):
        StoreConfig.from_properties({"brokerRole": "LEADER"})


def test_transfers_never_exceed_ha_transfer_batch_size(tmp_path):
    cfg = small_config(ha_transfer_batch_size=1000, ha_send_heartbeat_interval=200)
    mstore = MessageStore.open(tmp_path / "master", cfg)
    svc = HAService(mstore)
    svc.start("127.0.0.1", 0)
    try:
        put(mstore, 0, 50)
        s = _open(svc.port)
        s.sendall(struct.pack(">q", 0))
        got = b""
        sizes = []
        deadline = time.time() + 10
        while sum(sizes) < mstore.commitlog.max_offset and time.time() < deadline:
            while len(got) < 12:
                got += s.recv(65536)
            offset, size = struct.unpack(">qi", got[:12])
            while len(got) < 12 + size:
                got += s.recv(65536)
            assert offset == sum(sizes)
            sizes.append(size)
            got = got[12 + size :]
        assert max(sizes) == 1000 and sum(sizes) == mstore.commitlog.max_offset
        s.close()
    finally:
        svc.stop()
        mstore.close()
