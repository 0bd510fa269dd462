"""Failures: a broker killed during sync sends, a consumer killed mid-batch, no name server at start."""

from __future__ import annotations

import collections
import subprocess
import sys
import textwrap
import threading
import time

from servers import ROOT, env, free_port

from rmqtool.client import (
    CONSUME_FROM_FIRST_OFFSET,
    ClientConfig,
    ClientError,
    ConsumeStatus,
    Message,
    Producer,
    PullConsumer,
    PullStatus,
    PushConsumer,
)
from rmqtool.errors import RemotingError

FAST = ClientConfig(rebalance_interval=1.0, persist_consumer_offset_interval=0.5, heartbeat_broker_interval=2.0)


def read_all(namesrv: str, topic: str) -> list[bytes]:
    out = []
    with PullConsumer("reader_" + topic, namesrv) as pc:
        for mq in pc.fetch_subscribe_message_queues(topic):
            off = pc.min_offset(mq)
            while True:
                r = pc.pull(mq, "*", off, 32)
                if r.status != PullStatus.FOUND:
                    break
                out += [m.body for m in r.messages]
                off = r.next_begin_offset
    return out


def test_broker_killed_during_sync_sends(server, unique):
    topic = unique("Tkill")
    acked: list[bytes] = []
    failed: list[bytes] = []
    with Producer(unique("pg"), server.namesrv, send_msg_timeout=3.0) as p:
        p.send(Message(topic, b"warm-up"))
        stop = threading.Event()
        killed = threading.Event()

        def sender() -> None:
            i = 0
            while not stop.is_set():
                body = f"m{i}".encode()
                i += 1
                try:
                    p.send(Message(topic, body))
                    acked.append(body)
                except (ClientError, RemotingError):
                    failed.append(body)
                    time.sleep(0.05)
                if killed.is_set() and len(acked) > 0 and acked[-1] == body and len(failed) > 0:
                    # sends work again after the restart: a few more, then stop
                    if sum(1 for b in acked if int(b[1:]) > int(failed[-1][1:])) >= 20:
                        stop.set()

        t = threading.Thread(target=sender)
        t.start()
        deadline = time.time() + 30
        while len(acked) < 50 and time.time() < deadline:
            time.sleep(0.01)
        tries_before = p.impl.tries
        server.kill_broker()
        killed.set()
        time.sleep(1.0)
        server.restart_broker()
        t.join(120)
        stop.set()
        assert not t.is_alive()
        retries = p.impl.tries - tries_before
    assert len(acked) >= 70 and failed, (len(acked), len(failed))
    stored = read_all(server.namesrv, topic)
    counts = collections.Counter(stored)
    assert set(acked) <= set(counts), "a message acknowledged with SEND_OK is missing"
    duplicates = sum(n - 1 for n in counts.values())
    assert duplicates <= retries  # only a retried send can have been stored twice (at-least-once)
    assert all(int(b[1:]) < int(failed[-1][1:]) + 1000 for b in stored if b != b"warm-up")


CONSUMER_A = textwrap.dedent("""
    import sys, time
    from rmqtool.client import PushConsumer, ConsumeStatus, ClientConfig, CONSUME_FROM_FIRST_OFFSET
    namesrv, group, topic, out = sys.argv[1:5]
    log = open(out, "a")
    def listener(msgs, ctx):
        for m in msgs:
            time.sleep(0.02)
            log.write(m.body.decode() + "\\n"); log.flush()
        return ConsumeStatus.CONSUME_SUCCESS
    cfg = ClientConfig(rebalance_interval=1.0, persist_consumer_offset_interval=0.5, heartbeat_broker_interval=2.0)
    c = PushConsumer(group, namesrv, consume_from_where=CONSUME_FROM_FIRST_OFFSET, config=cfg,
                     consume_thread_nums=1, pull_batch_size=8)
    c.subscribe(topic, "*").register_listener(listener).start()
    print("started", c.client_id, flush=True)
    time.sleep(600)
""")


def test_consumer_killed_mid_batch_its_queues_move_and_nothing_is_lost(server, unique, tmp_path):
    topic, group = unique("Tck"), unique("gck")
    script = tmp_path / "consumer_a.py"
    script.write_text(CONSUMER_A)
    a_log = tmp_path / "a.log"
    with Producer(unique("pg"), server.namesrv) as p:
        p.send(Message(topic, b"create"))
        b_got: list[str] = []
        lock = threading.Lock()

        def listener(msgs, ctx):
            with lock:
                b_got.extend(m.body.decode() for m in msgs)
            return ConsumeStatus.CONSUME_SUCCESS

        b = PushConsumer(group, server.namesrv, consume_from_where=CONSUME_FROM_FIRST_OFFSET, config=FAST)
        b.subscribe(topic, "*").register_listener(listener).start()
        a = subprocess.Popen([sys.executable, str(script), server.namesrv, group, topic, str(a_log)],
                             stdout=subprocess.PIPE, env=env(), cwd=ROOT)
        try:
            assert a.stdout.readline().startswith(b"started")
            deadline = time.time() + 20
            while time.time() < deadline and len([q for q in b.assigned_queues() if q.topic == topic]) != 2:
                time.sleep(0.1)
            assert len([q for q in b.assigned_queues() if q.topic == topic]) == 2
            time.sleep(1.0)
            bodies = [f"m{i}" for i in range(300)]
            for body in bodies:
                p.send(Message(topic, body.encode()))
            deadline = time.time() + 20
            while time.time() < deadline and (not a_log.exists() or len(a_log.read_text().split()) < 20):
                time.sleep(0.02)
            a.kill()  # SIGKILL mid-batch: no offset commit, no unregister
            a.wait()
            a_seen = set(a_log.read_text().split())
            assert 0 < len(a_seen - {"create"}) < 150
            deadline = time.time() + 60
            while time.time() < deadline:
                if len([q for q in b.assigned_queues() if q.topic == topic]) == 4:
                    with lock:
                        if set(bodies) <= set(b_got) | a_seen:
                            break
                time.sleep(0.1)
            assert len([q for q in b.assigned_queues() if q.topic == topic]) == 4
            with lock:
                missing = set(bodies) - set(b_got) - a_seen
            assert not missing, f"lost {len(missing)} messages"
        finally:
            if a.poll() is None:
                a.kill()
            b.shutdown()


def test_name_server_down_at_start_is_a_clear_error_with_exit_3(rmq):
    addr = f"127.0.0.1:{free_port()}"
    for args in (["send", "T", "hello"], ["consume", "T"]):
        r = rmq(*args, "--namesrv", addr, timeout=60)
        assert r.returncode == 3, r.stderr
        err = r.stderr.decode()
        assert "name server" in err and addr in err and "Traceback" not in err
        assert r.stdout == b""
    r = rmq("consume", "T", env={"NAMESRV_ADDR": addr}, timeout=60)
    assert r.returncode == 3 and addr in r.stderr.decode()


def test_library_start_without_name_server_raises_client_error():
    addr = f"127.0.0.1:{free_port()}"
    c = PushConsumer("g", addr).subscribe("T").register_listener(lambda m, c: None)
    try:
        c.start()
        raise AssertionError("start() should fail")
    except ClientError as e:
        assert "no name server reachable" in str(e)
