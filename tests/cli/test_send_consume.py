"""`rmqtool send` / `rmqtool consume` in embedded mode, run as real subprocesses on real stores."""

from __future__ import annotations

import hashlib
import json
import os
import sys
import time
import types
from datetime import datetime, timezone
from pathlib import Path

import pytest
from typer.testing import CliRunner

from rmqtool.layouts.javahash import java_string_hash
from rmqtool.store.local import LocalBroker
from tests.conftest import run_rmqtool

MIB4 = 4 * 1024 * 1024


def jl(out: bytes | str) -> list[dict]:
    text = out.decode() if isinstance(out, bytes) else out
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def ok(*args: str, input: bytes | str | None = None, env: dict | None = None) -> list[dict]:
    r = run_rmqtool(*args, input=input, env=env)
    assert r.returncode == 0, r.stderr
    return jl(r.stdout)


def snapshot(root: Path) -> dict[str, tuple] | None:
    """Every file under root: size and a hash of its content (of the first 1 MiB for the big sparse
    files such as the 1 GiB commitlog; the test messages all sit there)."""
    if not root.exists():
        return None

    def state(p: Path) -> tuple:
        st = p.stat()
        with open(p, "rb") as f:
            head = f.read(1 << 20)
        return st.st_size, hashlib.sha256(head).hexdigest()

    return {str(p.relative_to(root)): state(p) for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.fixture
def store(tmp_path: Path) -> Path:
    return tmp_path / "store"


def test_send_one_then_consume_prints_json_lines_and_commits(store):
    [res] = ok("send", "--store", str(store), "TopicTest", "Hello", "--tag", "TagA", "--key", "k1", "--key", "k2",
               "--property", "color=red")
    assert res["status"] == "SEND_OK" and res["topic"] == "TopicTest" and res["queueOffset"] == 0
    assert list(res) == ["status", "msgId", "offsetMsgId", "topic", "queueId", "queueOffset"]
    assert len(res["msgId"]) == 32 and len(res["offsetMsgId"]) == 32
    [msg] = ok("consume", "--store", str(store), "TopicTest")
    assert msg["body"] == "Hello" and msg["tags"] == "TagA" and msg["keys"] == "k1 k2"
    assert msg["msgId"] == res["msgId"] and msg["offsetMsgId"] == res["offsetMsgId"]
    assert msg["queueId"] == res["queueId"]
    assert msg["properties"]["color"] == "red" and msg["properties"]["CLUSTER"] == "DefaultCluster"
    assert msg["properties"]["WAIT"] == "true"
    text = (store / "config" / "consumerOffset.json").read_text()
    assert f'"TopicTest@rmqtool":{{{res["queueId"]}:1\n' in text
    assert ok("consume", "--store", str(store), "TopicTest") == []  # caught up, committed
    groups = (store / "config" / "subscriptionGroup.json").read_text()
    assert '"rmqtool":{' in groups and '"retryMaxTimes":16' in groups


def test_stdin_lines_batches_and_env_store(store):
    lines = "".join(f"line-{i}\n" for i in range(7)) + "\n"
    res = ok("send", "TopicB", "--batch", "3", "--queue", "2", input=lines, env={"RMQ_STORE": str(store)})
    assert [r["queueOffset"] for r in res] == list(range(7)) and {r["queueId"] for r in res} == {2}
    got = ok("consume", "--store", str(store), "TopicB", "--group", "g1")
    assert [m["body"] for m in got] == [f"line-{i}" for i in range(7)]


def test_round_robin_spreads_over_the_four_default_queues(store):
    res = ok("send", "--store", str(store), "RR", input="a\nb\nc\nd\n")
    assert sorted(r["queueId"] for r in res) == [0, 1, 2, 3]
    topics = json.loads(json.dumps(__import__("rmqtool.store.jsonconfig", fromlist=["x"]).read_file(
        store / "config" / "topics.json")))
    assert topics["topicConfigTable"]["RR"]["writeQueueNums"] == 4


def test_sharding_key_same_queue_as_java_hash(store):
    res = ok("send", "--store", str(store), "Shard", "--sharding-key", "order-42", input="1\n2\n3\n")
    assert {r["queueId"] for r in res} == {abs(java_string_hash("order-42")) % 4}
    [m, *_] = ok("consume", "--store", str(store), "Shard")
    assert m["properties"]["__SHARDINGKEY"] == "order-42"


def test_flush_sync_and_group(store):
    [r] = ok("send", "--store", str(store), "T", "x", "--flush", "sync", "--group", "pg")
    assert r["status"] == "SEND_OK"


def test_delay_and_timer_properties_are_set(store):
    ok("send", "--store", str(store), "D", "lvl", "--delay-level", "3")
    ok("send", "--store", str(store), "D", "tm", "--delay", "90s")
    at = datetime.fromtimestamp(time.time() + 3600, timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    ok("send", "--store", str(store), "D", "at", "--deliver-at", at)
    with LocalBroker.open(store) as b:
        seen = {}
        for topic, qids in b.store.topic_queues().items():
            for q in qids:
                for m in b.store.get_message(topic, q, 0, 100).messages:
                    seen[m.body] = m.properties
    assert seen[b"lvl"]["DELAY"] == "3"
    assert seen[b"tm"]["TIMER_DELAY_MS"] == "90000" or "TIMER_OUT_MS" in seen[b"tm"]
    assert "TIMER_DELIVER_MS" in seen[b"at"] or "TIMER_OUT_MS" in seen[b"at"]


def test_delay_level_message_arrives_after_its_delay_without_a_server(store):
    pytest.importorskip("rmqtool.store.timer")
    t0 = time.monotonic()
    ok("send", "--store", str(store), "Later", "soon", "--delay-level", "2")  # 5 s
    early = ok("consume", "--store", str(store), "Later", "--no-commit")
    if time.monotonic() - t0 < 4.5:  # a loaded machine may take longer than the delay itself
        assert early == []
    got = ok("consume", "--store", str(store), "Later", "--timeout", "15", "--count", "1")
    assert [m["body"] for m in got] == ["soon"]
    assert time.monotonic() - t0 >= 5
    assert got[0]["properties"]["REAL_TOPIC"] == "Later" and got[0]["properties"]["DELAY"] == "2"


@pytest.fixture
def tagged(store):
    """Five messages on queue 0 of `Tagged` (written in-process: these tests are about consume)."""
    from rmqtool.layouts.message import MessageExt

    with LocalBroker.open(store) as b:
        for tag, body in [("A", "a1"), ("B", "b1"), ("C", "c1"), ("A", "a2"), (None, "untagged")]:
            b.send(MessageExt("Tagged", body.encode(), queue_id=0, properties={"TAGS": tag} if tag else {}))
    return store


def test_expr_filters_tags_and_commits_past_skipped(tagged):
    got = ok("consume", "--store", str(tagged), "Tagged", "--expr", "A || C")
    assert [m["body"] for m in got] == ["a1", "c1", "a2"]
    assert ok("consume", "--store", str(tagged), "Tagged", "--expr", "A || C") == []
    assert ok("consume", "--store", str(tagged), "Tagged", "--group", "other", "--expr", "*")[-1]["body"] == "untagged"


def test_from_first_last_time_count_and_no_commit(tagged):
    got = ok("consume", "--store", str(tagged), "Tagged", "--count", "2", "--no-commit")
    assert [m["body"] for m in got] == ["a1", "b1"]
    assert not (tagged / "config" / "consumerOffset.json").exists()
    got = ok("consume", "--store", str(tagged), "Tagged", "--count", "2")
    assert [m["body"] for m in got] == ["a1", "b1"]
    got = ok("consume", "--store", str(tagged), "Tagged", "--count", "1")
    assert [m["body"] for m in got] == ["c1"]  # continues from the committed offset
    assert [m["body"] for m in ok("consume", "--store", str(tagged), "Tagged", "--from", "first",
                                  "--no-commit")][:1] == ["a1"]
    assert ok("consume", "--store", str(tagged), "Tagged", "--from", "last") == []
    assert ok("consume", "--store", str(tagged), "Tagged", "--from", "2000-01-01T00:00:00Z",
              "--group", "t1")[0]["body"] == "a1"
    assert ok("consume", "--store", str(tagged), "Tagged", "--from", "4102444800000", "--group", "t2") == []


def test_follow_with_timeout_returns(tagged):
    got = ok("consume", "--store", str(tagged), "Tagged", "--follow", "--timeout", "0.5")
    assert len(got) == 5


def test_formats_text_template_table(tagged):
    r = run_rmqtool("consume", "--store", str(tagged), "Tagged", "--format", "text", "--no-commit")
    assert r.stdout.decode().splitlines() == ["a1", "b1", "c1", "a2", "untagged"]
    r = run_rmqtool("consume", "--store", str(tagged), "Tagged", "--format", r"%t|%q|%o|%g|%s|%S|%%", "--count",
                    "2", "--no-commit")
    assert r.stdout.decode().splitlines() == ["Tagged|0|0|A|a1|2|%", "Tagged|0|1|B|b1|2|%"]
    r = run_rmqtool("consume", "--store", str(tagged), "Tagged", "--format", r"%i %I %T %B %r %c %k %h\n",
                    "--count", "1", "--no-commit")
    assert len(r.stdout.decode().split(" ")) >= 7 and r.stdout.decode().endswith("\n")
    r = run_rmqtool("consume", "--store", str(tagged), "Tagged", "--format", "table", "--no-commit")
    assert r.returncode == 0 and "untagged" in r.stdout.decode() and "topic" in r.stdout.decode()
    r = run_rmqtool("consume", "--store", str(tagged), "Tagged", "--format", "%x")
    assert r.returncode == 2 and b"unknown code %x" in r.stderr


def test_exec_failure_goes_to_retry_topic(tagged):
    r = run_rmqtool("consume", "--store", str(tagged), "Tagged", "--group", "ex", "--count", "1",
                    "--exec", "cat >/dev/null; exit 3")
    assert r.returncode == 0, r.stderr
    with LocalBroker.open(tagged) as b:
        assert b.topics.select("%RETRY%ex") is not None


# -- bad input: one line, exit code of cli.md, nothing written ---------------------------------
@pytest.mark.parametrize("args, code, text", [
    (["send", "bad topic", "x"], 2, b"illegal characters"),
    (["send", "a" * 128, "x"], 2, b"longer than the max 127"),
    (["send", "SCHEDULE_TOPIC_XXXX", "x"], 2, b"forbidden"),
    (["send", "TBW102", "x"], 2, b"forbidden"),
    (["send", "T", ""], 2, b"body length is zero"),
    (["send", "T", "x", "--delay-level", "0"], 2, b"levels 1..18"),
    (["send", "T", "x", "--delay-level", "19"], 2, b"levels 1..18"),
    (["send", "T", "x", "--delay", "soon"], 2, b"duration"),
    (["send", "T", "x", "--delay", "4d"], 2, b"timerMaxDelaySec"),
    (["send", "T", "x", "--delay", "1s", "--delay-level", "2"], 2, b"exclude each other"),
    (["send", "T", "x", "--deliver-at", "tomorrow"], 2, b"ISO-8601"),
    (["send", "T", "x", "--queue", "4"], 2, b"4 queues"),
    (["send", "T", "x", "--property", "noequals"], 2, b"KEY=VALUE"),
    (["send", "T", "x", "--property", "UNIQ_KEY=1"], 2, b"used by RocketMQ"),
    (["send", "T", "x", "--group", "bad group"], 2, b"illegal characters"),
    (["send", "T", "x", "--flush", "maybe"], 2, b"sync or async"),
    (["consume", "bad topic"], 2, b"illegal characters"),
    (["consume", "T", "--from", "yesterday"], 2, b"ISO-8601"),
    (["consume", "T", "--sql", "a > 1"], 2, b"network mode"),
])
def test_bad_input_writes_nothing(store, args, code, text, capsys, monkeypatch):
    """In-process through `rmqtool.cli.main.main` (the same error mapping as the console script)."""
    from rmqtool.cli import main as cli_main

    monkeypatch.setattr(sys, "argv", ["rmqtool", args[0], "--store", str(store), *args[1:]])
    with pytest.raises(SystemExit) as exc:
        cli_main.main()
    out, err = capsys.readouterr()
    assert exc.value.code == code, err
    assert len(err.splitlines()) == 1 and text.decode() in err and out == ""
    assert not store.exists()


def test_bad_input_subprocess_one_line_exit_2(store):
    r = run_rmqtool("send", "--store", str(store), "bad topic", "x")
    assert r.returncode == 2 and len(r.stderr.splitlines()) == 1 and b"illegal characters" in r.stderr
    assert r.stdout == b"" and not store.exists()


def test_bad_input_on_existing_store_changes_nothing(store):
    ok("send", "--store", str(store), "T", "first")
    before = snapshot(store)
    for args in (["T", ""], ["bad/topic", "x"], ["T", "x", "--queue", "9"]):
        r = run_rmqtool("send", "--store", str(store), *args)
        assert r.returncode == 2, r.stderr
    assert snapshot(store) == before


def test_body_size_limit_is_4_mib(store):
    r = run_rmqtool("send", "--store", str(store), "Big", input=b"x" * (MIB4 + 1) + b"\n")
    assert r.returncode == 2 and b"over the max value 4194304" in r.stderr
    assert not store.exists()
    [res] = ok("send", "--store", str(store), "Big", input=b"y" * MIB4 + b"\n")
    assert res["status"] == "SEND_OK"


def test_stdin_without_lines_is_refused(store):
    r = run_rmqtool("send", "--store", str(store), "T", input=b"\n\n")
    assert r.returncode == 2 and not store.exists()


def test_store_path_that_is_a_file(tmp_path):
    f = tmp_path / "afile"
    f.write_bytes(b"not a store")
    for args in (["send", "--store", str(f), "T", "x"], ["consume", "--store", str(f), "T"]):
        r = run_rmqtool(*args)
        assert r.returncode == 3 and b"not a directory" in r.stderr and len(r.stderr.splitlines()) == 1
    assert f.read_bytes() == b"not a store"


def test_consume_of_missing_store_creates_nothing(store):
    r = run_rmqtool("consume", "--store", str(store), "T")
    assert r.returncode == 3 and b"no store" in r.stderr and b"--namesrv HOST:PORT" in r.stderr and not store.exists()


def test_locked_store_is_refused_and_untouched(store):
    ok("send", "--store", str(store), "T", "first")
    with LocalBroker.open(store):
        before = snapshot(store)
        for args in (["send", "--store", str(store), "T", "x"], ["consume", "--store", str(store), "T"]):
            r = run_rmqtool(*args)
            assert r.returncode == 3, r.stderr
            assert len(r.stderr.splitlines()) == 1 and r.stdout == b""
        assert snapshot(store) == before


# -- network mode hooks ---------------------------------------------------------------------------
def test_namesrv_without_client_is_a_clear_exit_3(store, monkeypatch):
    monkeypatch.setitem(sys.modules, "rmqtool.client.cli_bridge", types.ModuleType("rmqtool.client.cli_bridge"))
    from rmqtool.cli.main import app
    from rmqtool.errors import RemotingError

    for args in (["send", "--namesrv", "127.0.0.1:9876", "T", "x"], ["consume", "--namesrv", "127.0.0.1:9876", "T"]):
        r = CliRunner().invoke(app, args)
        assert isinstance(r.exception, RemotingError) and r.exception.exit_code == 3
        assert "network mode not available" in str(r.exception)


def test_namesrv_calls_the_client_bridge(store, monkeypatch):
    calls = {}
    mod = types.ModuleType("rmqtool.client.cli_bridge")

    def send(**kw):
        calls["send"] = kw
        return [{"status": "SEND_OK", "msgId": "M", "offsetMsgId": "O", "topic": "T", "queueId": 0, "queueOffset": 0}]

    def consume(**kw):
        calls["consume"] = kw

    mod.send, mod.consume = send, consume
    monkeypatch.setitem(sys.modules, "rmqtool.client.cli_bridge", mod)
    monkeypatch.setenv("NAMESRV_ADDR", "127.0.0.1:9876")
    from rmqtool.cli.main import app

    r = CliRunner().invoke(app, ["send", "T", "hello", "--tag", "A"])
    assert r.exit_code == 0, r.output
    assert calls["send"]["namesrv"] == "127.0.0.1:9876" and calls["send"]["messages"][0].body == b"hello"
    r = CliRunner().invoke(app, ["consume", "T", "--expr", "A"])
    assert r.exit_code == 0 and calls["consume"]["expr"] == "A"
    # an explicit --store wins over NAMESRV_ADDR from the environment
    r = CliRunner().invoke(app, ["send", "--store", str(store), "T", "local"])
    assert r.exit_code == 0 and store.is_dir()
    assert os.environ["NAMESRV_ADDR"]


def test_fast_json_line_equals_to_json(tmp_path):
    """The consume fast path prints exactly `json_line(MessageExt.to_json())` for any record."""
    import random as _random

    from rmqtool.cli.common import json_line
    from rmqtool.cli.jsonline import record_json_line
    from rmqtool.layouts.message import MessageExt, compress_body, decode_record
    from rmqtool.layouts.net import Host
    from rmqtool.store.config import StoreConfig

    rnd = _random.Random(7)
    cfg = StoreConfig(mapped_file_size_commit_log=8 * 1024 * 1024, mapped_file_size_consume_queue=2000 * 20,
                      max_hash_slot_num=64, max_index_num=4096)
    with LocalBroker.open(tmp_path, cfg) as b:
        for i in range(300):
            body = rnd.choice([b"plain", "ünï\"\\\n\x01".encode(), bytes(range(256)), b"x" * rnd.randrange(1, 500)])
            props = {k: v for k, v in [("TAGS", rnd.choice(["A", "t\"ag", None])),
                                       ("KEYS", rnd.choice(["k1 k2", None])), ("é", "ü\t"),
                                       ("bs", rnd.choice([None, "a\\u0001b"]))] if v}
            topic = rnd.choice(["Fast", "F" * 130])
            msg = MessageExt(topic, body, queue_id=i % 2, properties=props, born_host=rnd.choice(
                [Host("10.0.0.1", 5), Host("::1", 7)]), reconsume_times=i % 3, flag=i)
            if i % 17 == 0:
                msg.body, bits = compress_body(b"compressed " * 50)
                msg.sys_flag |= bits
            b.store.put_message(msg)  # straight to the store: V2 (> 127 bytes) topics included
        n = 0
        for topic in ("Fast", "F" * 130):
            for q in (0, 1):
                raws, _ = b.pull_raw(topic, q, 0, 1000)
                for raw in raws:
                    assert record_json_line(raw) == json_line(decode_record(raw).to_json())
                    n += 1
        assert n == 300


def test_store_with_other_file_sizes_is_adopted(store):
    """A store written with non-default sizes (broker.conf) opens with those sizes, as it was made."""
    from rmqtool.layouts.message import MessageExt
    from rmqtool.store.config import StoreConfig

    cfg = StoreConfig(mapped_file_size_commit_log=64 * 1024, mapped_file_size_consume_queue=200,
                      max_hash_slot_num=16, max_index_num=32)
    with LocalBroker.open(store, cfg) as b:
        for i in range(3):
            b.send(MessageExt("Small", f"m{i}".encode(), queue_id=0))
    ok("send", "--store", str(store), "Small", "m3", "--queue", "0")
    assert [m["body"] for m in ok("consume", "--store", str(store), "Small")] == ["m0", "m1", "m2", "m3"]
    assert (store / "commitlog" / "00000000000000000000").stat().st_size == 64 * 1024


def test_json_line_is_the_standard_library_text():
    from rmqtool.cli.common import _std_dumps, json_line

    for obj in [{"a": "é\u2028\x01\x7f\"\\/\t", "n": None, "b": True, "i": -(1 << 63), "big": 1 << 70,
                 "nested": {"x": [1, 2.5, "y"]}}, {"s": "\ud800"}]:
        assert json_line(obj) == _std_dumps(obj)
