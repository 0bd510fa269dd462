"""`rmqtool send` / `consume` in network mode (--namesrv / NAMESRV_ADDR) against the servers."""

from __future__ import annotations

import json
import time

from rmqtool.client import PullConsumer, PullStatus


def lines(out: bytes) -> list[dict]:
    return [json.loads(x) for x in out.decode().splitlines() if x.strip()]


def test_send_lines_then_consume_them_once(server, unique, rmq):
    topic, group = unique("Tcli"), unique("gcli")
    r = rmq("send", topic, "--namesrv", server.namesrv, "--tag", "TagA", "--key", "k1", "--property", "a=1",
            input=b"one\ntwo\nthree\nfour\nfive\n", timeout=60)
    assert r.returncode == 0, r.stderr
    sent = lines(r.stdout)
    assert [s["status"] for s in sent] == ["SEND_OK"] * 5 and all(s["topic"] == topic for s in sent)
    r = rmq("send", topic, "--namesrv", server.namesrv, "--batch", "3", input=b"b1\nb2\nb3\nb4\n", timeout=60)
    assert r.returncode == 0, r.stderr
    batch = lines(r.stdout)
    assert len(batch) == 4 and len({b["msgId"] for b in batch}) == 4
    r = rmq("consume", topic, "--namesrv", server.namesrv, "--group", group, timeout=60)
    assert r.returncode == 0, r.stderr
    got = lines(r.stdout)
    assert sorted(g["body"] for g in got) == sorted(["one", "two", "three", "four", "five", "b1", "b2", "b3", "b4"])
    one = next(g for g in got if g["body"] == "one")
    assert (one["tags"], one["keys"], one["properties"]["a"]) == ("TagA", "k1", "1")
    assert {g["msgId"] for g in got} == {s["msgId"] for s in sent + batch}
    r = rmq("consume", topic, "--namesrv", server.namesrv, "--group", group, timeout=60)
    assert r.returncode == 0 and lines(r.stdout) == []  # committed: nothing new
    r = rmq("consume", topic, "--namesrv", server.namesrv, "--group", group, "--from", "first", "--count", "2",
            "--format", "%s", timeout=60)
    assert r.returncode == 0 and len(r.stdout.decode().split()) == 2


def test_sharding_key_and_queue_options(server, unique, rmq):
    topic = unique("Tq")
    r = rmq("send", topic, "--namesrv", server.namesrv, "--sharding-key", "user-7", input=b"a\nb\nc\n", timeout=60)
    assert r.returncode == 0, r.stderr
    assert len({x["queueId"] for x in lines(r.stdout)}) == 1
    r = rmq("send", topic, "x", "--namesrv", server.namesrv, "--queue", "2", timeout=60)
    assert r.returncode == 0 and lines(r.stdout)[0]["queueId"] == 2
    r = rmq("send", topic, "x", "--namesrv", server.namesrv, "--queue", "99", timeout=60)
    assert r.returncode == 2 and b"--queue 99" in r.stderr


def test_exec_gets_body_and_fields_and_failures_reach_the_dlq(server, unique, rmq, tmp_path):
    topic, group = unique("Texec"), unique("gexec")
    r = rmq("send", topic, "--namesrv", server.namesrv, "--tag", "good", "--property", "color=red",
            input=b"hello\n", timeout=60)
    assert r.returncode == 0
    r = rmq("send", topic, "--namesrv", server.namesrv, "--tag", "bad", input=b"boom\n", timeout=60)
    assert r.returncode == 0
    out = tmp_path / "seen"
    script = (f'echo "$RMQ_TOPIC|$RMQ_TAGS|$RMQ_PROP_color|$RMQ_RECONSUME_TIMES|$(cat)" >> {out}; '
              f'test "$RMQ_TAGS" = good')
    r = rmq("consume", topic, "--namesrv", server.namesrv, "--group", group, "--exec", script,
            "--max-reconsume-times", "0", "--concurrency", "2", timeout=60)
    assert r.returncode == 0, r.stderr
    seen = sorted(out.read_text().splitlines())
    assert seen == [f"{topic}|bad||0|boom", f"{topic}|good|red|0|hello"]
    # the failed one went back to the broker and, with 0 retries allowed, to the DLQ
    dead = []
    with PullConsumer(unique("gdlq"), server.namesrv) as pc:
        deadline = time.time() + 20
        while time.time() < deadline and not dead:
            try:
                for mq in pc.fetch_subscribe_message_queues("%DLQ%" + group):
                    res = pc.pull(mq, "*", 0)
                    if res.status == PullStatus.FOUND:
                        dead += res.messages
            except Exception:
                pass
            time.sleep(0.3)
    assert [m.body for m in dead] == [b"boom"]
    # and the group's offset moved past both: nothing is consumed again
    r = rmq("consume", topic, "--namesrv", server.namesrv, "--group", group, timeout=60)
    assert lines(r.stdout) == []


def test_namesrv_from_environment(server, unique, rmq):
    topic = unique("Tenv")
    r = rmq("send", topic, "via-env", env={"NAMESRV_ADDR": server.namesrv}, timeout=60)
    assert r.returncode == 0, r.stderr
    r = rmq("consume", topic, "--group", unique("genv"), env={"NAMESRV_ADDR": server.namesrv}, timeout=60)
    assert [x["body"] for x in lines(r.stdout)] == ["via-env"]


def test_consume_timeout_is_idle_time_not_a_deadline(server, unique, rmq):
    """`--timeout 3` keeps reading while messages keep coming (here for ~6 s), then stops 3 s after
    the last one with exit 0; `--deadline` cuts a read short with exit 124 and says so."""
    import subprocess
    import sys

    from rmqtool.client import Message, Producer
    from tests.conftest import rmqtool_env

    topic, group = unique("Tidle"), unique("gidle")
    with Producer(unique("pidle"), server.namesrv) as p:
        p.send(Message(topic, b"m0"))
        proc = subprocess.Popen([sys.executable, "-m", "rmqtool", "consume", topic, "--namesrv", server.namesrv,
                                 "--group", group, "--from", "first", "--timeout", "3", "--format", "%s"],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=rmqtool_env(None))
        for i in range(1, 7):
            time.sleep(1)
            p.send(Message(topic, f"m{i}".encode()))
        last = time.monotonic()
        out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    assert sorted(out.split()) == sorted(f"m{i}".encode() for i in range(7)), err
    assert time.monotonic() - last >= 2.5
    r = rmq("consume", topic, "--namesrv", server.namesrv, "--group", unique("gdl"), "--from", "first", "--follow",
            "--deadline", "3", "--format", "%s", timeout=60)
    assert r.returncode == 124 and b"--deadline" in r.stderr, r.stderr
    assert sorted(r.stdout.split()) == sorted(f"m{i}".encode() for i in range(7))


def test_send_streams_stdin_through_one_producer(server, unique):
    """`tail -f | rmqtool send T --namesrv ...`: each line's result comes within a second."""
    from tests.conftest import rmqtool_env
    from tests.stream_helpers import exchange, piped_rmqtool

    topic = unique("Tstream")
    with piped_rmqtool(["send", topic, "--namesrv", server.namesrv, "--json"], rmqtool_env(None)) as proc:
        first, _ = exchange(proc, b"first\n", 60)  # start-up, routes, connections
        assert first and json.loads(first)["status"] == "SEND_OK", first
        for i in range(3):
            got, took = exchange(proc, f"s{i}\n".encode(), 10)
            assert got and json.loads(got)["status"] == "SEND_OK" and took < 1.0
        proc.stdin.close()
        assert proc.wait(timeout=60) == 0
