"""`rmqtool replay`: dead letters back home, a window of a (crashed) store, JSON Lines round trips."""

from __future__ import annotations

import json
import time

from rmqtool.client.replay import Window, from_store, iter_commitlog


def rows(out: bytes) -> list[dict]:
    return [json.loads(x) for x in out.decode().splitlines() if x.strip()]


def test_dead_letters_go_back_to_their_topic_with_origin_id(rmq, tmp_path):
    store = tmp_path / "store"
    r = rmq("send", "TopicR", "--store", str(store), "--tag", "TA", "--key", "K1", "--property", "color=blue",
            input=b"a1\na2\na3\n")
    assert r.returncode == 0, r.stderr
    sent = rows(r.stdout)
    r = rmq("consume", "TopicR", "--store", str(store), "-g", "gR", "--exec", "exit 1", "--max-reconsume-times", "0")
    assert r.returncode == 0, r.stderr
    r = rmq("replay", "--dlq", "gR", "--store", str(store), "--dry-run")
    assert r.returncode == 0 and [x["status"] for x in rows(r.stdout)] == ["DRY_RUN"] * 3
    assert b"would send 3" in r.stderr
    r = rmq("replay", "--dlq", "gR", "--store", str(store))
    assert r.returncode == 0, r.stderr
    assert b"sent 3, 0 failed" in r.stderr and b"TopicR: 3" in r.stderr
    r = rmq("consume", "TopicR", "--store", str(store), "-g", "gR")
    again = rows(r.stdout)
    assert sorted(x["body"] for x in again) == ["a1", "a2", "a3"]
    for x in again:
        assert (x["tags"], x["keys"], x["properties"]["color"]) == ("TA", "K1", "blue")
        assert x["properties"]["ORIGIN_MESSAGE_ID"]
        assert x["msgId"] not in {s["msgId"] for s in sent}  # a new message, linked by ORIGIN_MESSAGE_ID


def test_window_of_a_crashed_store_copy_to_a_name_server(rmq, server, unique, tmp_path):
    src = tmp_path / "src"
    r = rmq("send", "TopicW", "--store", str(src), "--queue", "1", input=b"".join(b"w%d\n" % i for i in range(6)))
    assert r.returncode == 0, r.stderr
    # a copy of the store's CommitLog (what was written, not the 1 GiB sparse file), torn by a crash
    copy = tmp_path / "copy"
    (copy / "commitlog").mkdir(parents=True)
    recs = list(iter_commitlog(src))
    end = recs[-1].commit_log_offset + recs[-1].total_size
    (src_cl,) = [p for p in (src / "commitlog").iterdir() if p.name.isdigit()]
    cl = copy / "commitlog" / src_cl.name
    with open(src_cl, "rb") as fh:
        cl.write_bytes(fh.read(end) + b"\0" * 4096)
    with open(cl, "r+b") as fh:
        fh.seek(recs[-1].commit_log_offset + 30)
        fh.write(b"\0" * (recs[-1].total_size - 30))  # torn: the tail of the record never reached the disk
    assert [m.body for m in iter_commitlog(copy)] == [b"w%d" % i for i in range(5)]
    picked = [i.source.body for i in from_store(copy, topic="TopicW", window=Window(begin_offset=1, end_offset=4))]
    assert picked == [b"w1", b"w2", b"w3"]
    target = unique("Twin")
    r = rmq("replay", "--topic", "TopicW", "--from-store", str(copy), "--begin-offset", "1", "--end-offset", "4",
            "--to-topic", target, "--namesrv", server.namesrv, timeout=60)
    assert r.returncode == 0, r.stderr
    assert [x["status"] for x in rows(r.stdout)] == ["SEND_OK"] * 3
    r = rmq("consume", target, "--namesrv", server.namesrv, "-g", unique("gw"), timeout=60)
    assert sorted(x["body"] for x in rows(r.stdout)) == ["w1", "w2", "w3"]


def test_json_lines_export_edit_reimport(rmq, server, unique, tmp_path):
    topic, topic2 = unique("Tj"), unique("Tj2")
    r = rmq("send", topic, "--namesrv", server.namesrv, "--tag", "T", "--key", "k", input=b"x1\nx2\n", timeout=60)
    assert r.returncode == 0
    r = rmq("consume", topic, "--namesrv", server.namesrv, "-g", unique("gj"), "--json", timeout=60)
    exported = rows(r.stdout)
    assert len(exported) == 2
    edited = []
    for x in exported:
        x["body"] = x["body"].upper()
        x["topic"] = topic2
        edited.append(json.dumps(x))
    t0 = time.monotonic()
    r = rmq("replay", "--jsonl", "-", "--namesrv", server.namesrv, "--rate", "4", input="\n".join(edited) + "\n",
            timeout=60)
    assert r.returncode == 0, r.stderr
    assert time.monotonic() - t0 >= 0.25  # the second message waited for --rate
    r = rmq("consume", topic2, "--namesrv", server.namesrv, "-g", unique("gj2"), timeout=60)
    got = rows(r.stdout)
    assert sorted(x["body"] for x in got) == ["X1", "X2"]
    assert {x["properties"]["ORIGIN_MESSAGE_ID"] for x in got} == {x["msgId"] for x in exported}
    assert all((x["tags"], x["keys"]) == ("T", "k") for x in got)
    assert all("MIN_OFFSET" not in x["properties"] or x["properties"]["MIN_OFFSET"] == "0" for x in got)


def test_replay_needs_exactly_one_source(rmq, tmp_path):
    r = rmq("replay", "--store", str(tmp_path))
    assert r.returncode == 2
    r = rmq("replay", "--dlq", "g", "--topic", "t", "--store", str(tmp_path))
    assert r.returncode == 2
