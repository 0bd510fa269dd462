"""`rmqtool send --batch N` stores the batches after the first as bodies (`LocalBroker.send_bodies`,
no MessageExt per line) and prints their results from one `Stored` per batch: the same lines as
the per-message path, every one naming the record that `consume` reads back."""

from __future__ import annotations

import json

from rmqtool.cli.sendresults import Stored, _json_result
from tests.conftest import run_rmqtool


def test_stored_json_lines_are_the_per_message_lines():
    s = Stored("SEND_OK", "T", 3, ["A" * 32, "B" * 32], [0, 1234], 17, "7F00000100002A9F")
    assert s.json_lines() == "".join(map(_json_result, s.results()))
    assert [json.loads(x) for x in s.json_lines().splitlines()] == s.results()
    assert s.results()[1] == {"status": "SEND_OK", "msgId": "B" * 32, "offsetMsgId": "7F00000100002A9F00000000000004D2",
                              "topic": "T", "queueId": 3, "queueOffset": 18}
    dicts = [{"status": "FLUSH_DISK_TIMEOUT", "msgId": "x", "offsetMsgId": "y", "topic": "T", "queueId": 0,
              "queueOffset": 1}]
    assert Stored.of_results(dicts).status == "FLUSH_DISK_TIMEOUT" and Stored.of_results(dicts).results() == dicts


def test_batches_as_bodies_print_what_consume_reads_back(tmp_path):
    store = str(tmp_path / "store")
    lines = "".join(f"line-{i}\n" for i in range(600))
    r = run_rmqtool("send", "BodiesT", "--batch", "7", "--tag", "TagA", "--key", "a", "--key", "b",
                    "--property", "color=red", "--store", store, "--json", input=lines)
    assert r.returncode == 0, r.stderr
    results = [json.loads(x) for x in r.stdout.splitlines()]
    assert len(results) == 600
    c = run_rmqtool("consume", "BodiesT", "--store", store, "--json")
    assert c.returncode == 0, c.stderr
    got = {(m["queueId"], m["queueOffset"]): m for m in map(json.loads, c.stdout.splitlines())}
    assert len(got) == 600
    for i, res in enumerate(results):
        assert list(res) == ["status", "msgId", "offsetMsgId", "topic", "queueId", "queueOffset"]
        m = got[res["queueId"], res["queueOffset"]]
        assert m["body"] == f"line-{i}" and res["status"] == "SEND_OK" and res["topic"] == "BodiesT"
        assert (m["msgId"], m["offsetMsgId"]) == (res["msgId"], res["offsetMsgId"])
        assert m["tags"] == "TagA" and m["keys"] == "a b" and m["properties"]["color"] == "red"
    # one queue per batch of 7, round robin over the topic's queues
    for k in range(0, 600, 7):
        assert len({res["queueId"] for res in results[k:k + 7]}) == 1
    assert len({res["msgId"] for res in results}) == 600


def test_quiet_counts_the_batches_stored_as_bodies(tmp_path):
    r = run_rmqtool("send", "BodiesQ", "--batch", "5", "--quiet", "--store", str(tmp_path / "s"),
                    input="".join(f"{i}\n" for i in range(52)))
    assert r.returncode == 0 and r.stdout == ""
    assert "send: 52 message(s)" in r.stderr and "SEND_OK 52" in r.stderr
