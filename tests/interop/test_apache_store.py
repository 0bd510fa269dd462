"""Issue 5, Done when: the two-way store check with Apache RocketMQ 5.3.3's own broker.

(i) Apache's broker (loopback, small heap) writes a store through Apache's Java producer; what
    Apache's Java consumer received is what rmqtool reads from those files: our record codec
    always, `rmqtool inspect commitlog` and `rmqtool verify` where they exist.
(ii) A store written by `rmqtool send`, copied into a fresh storePathRootDir, is recovered and
    served by Apache's broker to Apache's Java consumer in full.
"""

from __future__ import annotations

import base64
import json
import subprocess
from pathlib import Path

import pytest

from rmqtool.layouts.message import Blank, decode_record
from rmqtool.layouts.msgid import decode_offset_msg_id

from .conftest import kill_apache, start_apache, stop_apache
from .harness import has_module, json_lines, require_java
from .java_client_helpers import client

pytestmark = [pytest.mark.interop, pytest.mark.timeout(300)]

# Properties the Java consumer adds on its side (ConsumeMessage*Service, PullAPIWrapper): not stored.
CLIENT_SIDE_PROPERTIES = {"MIN_OFFSET", "MAX_OFFSET", "CONSUME_START_TIME"}
COMPARED = ["topic", "queueId", "queueOffset", "commitLogOffset", "storeSize", "bodyCRC", "flag", "sysFlag",
            "bornTimestamp", "bornHost", "storeTimestamp", "storeHost", "reconsumeTimes", "tags", "keys"]


def read_commitlog_with_rmqtool_codec(commitlog: Path) -> dict[int, dict]:
    """Every record of the CommitLog, keyed by its offset, in the consumer's JSON field names."""
    out: dict[int, dict] = {}
    for f in sorted(p for p in commitlog.iterdir() if p.name.isdigit()):
        base = int(f.name)
        raw = f.read_bytes()
        pos = 0
        while pos + 8 <= len(raw):
            if raw[pos:pos + 8] == bytes(8):
                break
            try:
                m = decode_record(raw, pos)
            except Blank:
                break
            assert m.commit_log_offset == base + pos
            out[base + pos] = {
                "topic": m.topic, "queueId": m.queue_id, "queueOffset": m.queue_offset,
                "commitLogOffset": m.commit_log_offset, "storeSize": m.total_size, "bodyCRC": m.body_crc,
                "flag": m.flag, "sysFlag": m.sys_flag, "bornTimestamp": m.born_timestamp,
                "bornHost": str(m.born_host), "storeTimestamp": m.store_timestamp, "storeHost": str(m.store_host),
                "reconsumeTimes": m.reconsume_times, "tags": m.tags, "keys": m.keys,
                "properties": dict(m.properties), "body": m.decompressed_body(),
            }
            pos += m.total_size
    return out


def consumer_view(m: dict) -> dict:
    props = {k: v for k, v in m["properties"].items() if k not in CLIENT_SIDE_PROPERTIES}
    return {**{k: m[k] for k in COMPARED}, "properties": props, "body": base64.b64decode(m["bodyBase64"])}


def test_rmqtool_reads_the_store_apache_broker_wrote_as_the_java_consumer_saw_it(tmp_path, rmq):
    require_java()
    broker = start_apache(tmp_path / "apache")
    try:
        sent = client(broker.namesrv, tmp_path / "home", "produce", "--topic", "StoreIop", "--count", "30")
        assert len(sent) == 30 and all(s["status"] == "SEND_OK" for s in sent)
        # retry topic, DLQ, delay-level machinery: records of every system kind in the same log
        suite = client(broker.namesrv, tmp_path / "home", "--only", "retry-dlq", timeout=180)
        assert all(r["ok"] for r in suite), suite
        seen = client(broker.namesrv, tmp_path / "home", "consume", "--topic", "StoreIop", "--group", "store_cg",
                      "--count", "30")
    finally:
        stop_apache(broker)
    store = broker.store
    assert not (store / "abort").exists(), "Apache broker did not shut down cleanly"
    assert len(seen) == 30

    ours = read_commitlog_with_rmqtool_codec(store / "commitlog")
    for m in seen:
        assert consumer_view(m) == {**{k: ours[m["commitLogOffset"]][k] for k in COMPARED},
                                    "properties": ours[m["commitLogOffset"]]["properties"],
                                    "body": ours[m["commitLogOffset"]]["body"]}
    topics = {r["topic"] for r in ours.values()}
    assert {"StoreIop", "SCHEDULE_TOPIC_XXXX"} <= topics and any(t.startswith("%DLQ%") for t in topics), topics

    if has_module("rmqtool.cli.inspect"):
        p = rmq("inspect", "commitlog", str(store / "commitlog"), "--format", "json", timeout=120)
        assert p.returncode == 0, p.stderr.decode(errors="replace")
        inspected = {r["commitLogOffset"]: r for r in json_lines(p.stdout.decode("utf-8"))}
        assert set(inspected) == set(ours)
        for m in seen:
            r = inspected[m["commitLogOffset"]]
            assert {k: r[k] for k in COMPARED if k != "storeSize"} == {k: m[k] for k in COMPARED if k != "storeSize"}
            assert r["totalSize"] == m["storeSize"]
            assert r["msgId"] == m["msgId"]
            assert r.get("body", "").encode() == base64.b64decode(m["bodyBase64"]) or r.get("bodyBase64") == m["bodyBase64"]
    if has_module("rmqtool.cli.verify"):
        p = rmq("verify", str(store), timeout=240)
        assert p.returncode == 0, (p.stdout.decode(errors="replace")[-3000:], p.stderr.decode(errors="replace")[-2000:])


@pytest.mark.skipif(not has_module("rmqtool.cli.send"), reason="rmqtool.cli.send is not on this branch yet")
def test_apache_broker_serves_a_store_rmqtool_wrote(tmp_path, rmq):
    require_java()
    store = tmp_path / "ours"
    n = 30
    lines = [f"rmqtool wrote #{i} ünïcödé" for i in range(n)]
    p = rmq("send", "FromRmqtool", "--store", str(store), "--tag", "TagR", "--key", "rk", "-p", "origin=rmqtool",
            "-p", "note=naïve 値", input="\n".join(lines) + "\n")
    assert p.returncode == 0, p.stderr
    results = [json.loads(x) for x in p.stdout.splitlines() if x.strip()]
    assert len(results) == n and all(r["status"] == "SEND_OK" for r in results)

    root = tmp_path / "apache"
    root.mkdir()
    # cp keeps the 1 GiB CommitLog file sparse; shutil.copytree would write it out in full
    subprocess.run(["cp", "-a", "--sparse=always", str(store), str(root / "store")], check=True, timeout=60)
    sizes = {f.stat().st_size for f in (root / "store" / "commitlog").iterdir()}
    assert len(sizes) == 1
    broker = start_apache(root, f"mappedFileSizeCommitLog={sizes.pop()}")
    try:
        seen = client(broker.namesrv, tmp_path / "home", "consume", "--topic", "FromRmqtool", "--group", "from_ours",
                      "--count", str(n))
    finally:
        kill_apache(broker)  # nothing reads its store afterwards
    by_id = {m["msgId"]: m for m in seen}
    assert len(seen) == n == len(by_id), f"{len(seen)} deliveries of {len(by_id)} messages, {n} sent"
    for text, r in zip(lines, results, strict=True):
        m = by_id[r["msgId"]]
        assert base64.b64decode(m["bodyBase64"]).decode() == text
        assert (m["topic"], m["queueId"], m["queueOffset"]) == ("FromRmqtool", r["queueId"], r["queueOffset"])
        assert m["commitLogOffset"] == decode_offset_msg_id(r["offsetMsgId"]).commit_log_offset
        assert (m["tags"], m["keys"]) == ("TagR", "rk")
        assert m["properties"]["origin"] == "rmqtool" and m["properties"]["note"] == "naïve 値"
