"""`replay --jsonl` from parsed fields (client/replaylines.py) gives what the per-message path
gives: the same messages for any line (unusual ones, bad ones and their errors included), and
into the embedded store the same CommitLog, ConsumeQueue and index bytes and the same results."""

from __future__ import annotations

import json
import random

import orjson
import pytest

from rmqtool.client import replay as R
from rmqtool.client.replaylines import parse_lines
from rmqtool.errors import InvalidInput
from rmqtool.layouts import properties as P
from rmqtool.layouts.msgid import UniqKeyFactory

NOW = 1_700_000_000_000


def _props(rnd: random.Random, i: int) -> object:
    pick = rnd.random()
    if pick < 0.1:
        return rnd.choice([None, {}, [], "x", {"a": 1}, {"b": None, "c": "v"}])
    props: dict[str, object] = {}
    for key in rnd.sample(["UNIQ_KEY", "WAIT", "CLUSTER", "MIN_OFFSET", "TAGS", "KEYS", "DELAY", "ORIGIN_MESSAGE_ID",
                           "DLQ_ORIGIN_MESSAGE_ID", "RETRY_TOPIC", "TRACE_ON", "color", "size", "é"],
                          rnd.randrange(0, 7)):
        props[key] = rnd.choice([f"v{i}", "", "true", "a b", f"{i:032X}", "ünï"])
    if rnd.random() < 0.05:
        props["big"] = "z" * rnd.choice([100, 33000])
    if rnd.random() < 0.03:
        props["sep"] = "a\x01b"
    return props


def _line(rnd: random.Random, i: int, topics: list[str]) -> str:
    """A line as consume / inspect print it, or hand-written, or odd in one way or another."""
    pick = rnd.random()
    if pick < 0.03:
        return rnd.choice(["", "   ", "\t"])
    if pick < 0.04:
        return '{"topic": "T", "body": "x", "flag": NaN}'
    o: dict[str, object] = {"topic": rnd.choice(topics)}
    body = rnd.random()
    if body < 0.8:
        o["body"] = f"body {i} " + "x" * rnd.randrange(0, 300)
    elif body < 0.9:
        o["bodyBase64"] = "gAH/" * rnd.randrange(1, 5)
    elif body < 0.95:
        o["body"] = rnd.choice(["", 17, None, "ü"])
    else:
        o.update({"body": "both", "bodyBase64": "AAE="})
    o["properties"] = _props(rnd, i)
    for name, chance in (("msgId", 0.8), ("queueId", 0.7), ("queueOffset", 0.7), ("storeTimestamp", 0.5),
                         ("bornTimestamp", 0.5), ("flag", 0.5), ("tags", 0.3), ("keys", 0.3), ("storeHost", 0.4),
                         ("commitLogOffset", 0.4)):
        if rnd.random() < chance:
            o[name] = {
                "msgId": lambda: rnd.choice([f"7F000001{i:024X}", "", None]),
                "queueId": lambda: rnd.choice([i % 4, 0, "3"]),
                "queueOffset": lambda: rnd.choice([i, 0]),
                "storeTimestamp": lambda: rnd.choice([NOW + i, 0]),
                "bornTimestamp": lambda: rnd.choice([NOW, 0, 1.5]),
                "flag": lambda: rnd.choice([0, 1, i % 7, True, "2", 1 << 40]),
                "tags": lambda: rnd.choice(["TagA", "", None, 5]),
                "keys": lambda: rnd.choice(["k1 k2", None]),
                "storeHost": lambda: rnd.choice(["10.0.0.1:10911", "bad", "[::1]:10911", ""]),
                "commitLogOffset": lambda: rnd.choice([i * 100, 0, "x", [1]]),
            }[name]()
    if rnd.random() < 0.02:
        del o["topic"]
    return json.dumps(o, ensure_ascii=rnd.random() < 0.5)


def _usual_line(rnd: random.Random, i: int) -> str:
    """A line of consume's shape, its fields varied within what parse_lines takes itself."""
    props: dict[str, str] = {}
    for key in rnd.sample(["UNIQ_KEY", "WAIT", "CLUSTER", "TAGS", "KEYS", "ORIGIN_MESSAGE_ID", "DLQ_ORIGIN_MESSAGE_ID",
                           "color", "é"], rnd.randrange(0, 6)):
        props[key] = rnd.choice([f"v{i}", "ünï", f"{i:032X}"]) if rnd.random() < 0.98 else ""
    o: dict[str, object] = {"topic": rnd.choice(["ReplayA", "ReplayB"]), "body": f"b{i} " + "é" * rnd.randrange(3),
                            "properties": props, "msgId": f"7F000001{i:024X}" if rnd.random() < 0.99 else ""}
    for name in ("queueId", "queueOffset", "storeTimestamp", "bornTimestamp", "flag", "commitLogOffset"):
        if rnd.random() < 0.7:
            o[name] = rnd.choice([0, i, None])
    for name in ("tags", "keys", "storeHost"):
        if rnd.random() < 0.5:
            o[name] = rnd.choice([f"x{i}", None, "", "10.0.0.1:10911"])
    return json.dumps(o)


def _slow(lines, first, to_topic):
    got, error = [], None
    try:
        for item in R.from_json_lines(lines, to_topic=to_topic, first_line=first):
            m = R.replay_message(item)
            got.append((item.topic, m.body, m.flag, list(m.properties.items()), m.properties.get(P.ORIGIN_MESSAGE_ID)))
    except InvalidInput as e:
        error = str(e)
    return got, error


@pytest.mark.parametrize("seed", range(6))
def test_parsed_fields_are_the_per_message_path_s(seed):
    rnd = random.Random(seed)
    to_topic = "Other" if seed == 5 else None
    for _round in range(40):
        lines = [_line(rnd, i, ["ReplayA", "ReplayB"]).encode() for i in range(rnd.randrange(1, 60))]
        first = rnd.randrange(1, 1000)
        got = parse_lines(lines, first, to_topic=to_topic)
        fast = [(t, b, f, list(p.items()), o)
                for t, b, f, p, o in zip(got.topics, got.bodies, got.flags, got.maps, got.origins, strict=True)]
        assert (fast, None if got.error is None else str(got.error)) == _slow(lines, first, to_topic)


@pytest.mark.parametrize("seed", range(4))
def test_batches_of_usual_lines_give_the_per_message_path_s_fields(seed):
    """Batches of consume-shaped lines, every one taken by the loop's own path."""
    rnd = random.Random(seed)
    for _round in range(60):
        lines = [_usual_line(rnd, i).encode() for i in range(rnd.randrange(1, 40))]
        to_topic = "Other" if _round % 5 == 0 else None
        got = parse_lines(lines, 1, to_topic=to_topic)
        fast = [(t, b, f, list(p.items()), o)
                for t, b, f, p, o in zip(got.topics, got.bodies, got.flags, got.maps, got.origins, strict=True)]
        assert (fast, got.error) == _slow(lines, 1, to_topic)


def _lines(n: int, seed: int) -> list[bytes]:
    """Lines the store takes (and a few it refuses: an empty body, a map over the limit)."""
    rnd = random.Random(seed)
    out = []
    for i in range(n):
        topic = "ReplayB" if 900 <= i < 1000 and rnd.random() < 0.3 else "ReplayA"  # a few mixed batches
        o: dict[str, object] = {"topic": topic, "queueId": i % 4, "queueOffset": i, "msgId": f"7F000001{i:024X}",
                                "storeHost": "10.0.0.1:10911", "commitLogOffset": i * 300,
                                "storeTimestamp": NOW - 5000 + i, "bornTimestamp": NOW - 6000}
        props: dict[str, str] = {"UNIQ_KEY": f"7F000001{i:024X}", "WAIT": "true", "CLUSTER": "c1",
                                 "MIN_OFFSET": "0", "MAX_OFFSET": str(i)}
        if i % 3 == 0:
            props["TAGS"] = o["tags"] = f"T{i % 5}"
        if i % 4 == 0:
            props["KEYS"] = o["keys"] = f"k{i} k{i + 1}"
        if i % 7 == 0:
            props.update({"color": "blue", "DELAY": "3", "ORIGIN_MESSAGE_ID": f"AB{i:030X}"})
        if i % 11 == 0:
            props["TIMER_DELIVER_MS"] = str(NOW + 60000)
        if i % 50 == 7:
            props["wide"] = "w" * rnd.randrange(1000, 2000)
        if i == 777:
            props["huge"] = "h" * 33000  # over the properties limit: refused, its batch goes one by one
        o["properties"] = props
        o["flag"] = i % 3
        if i == 500:
            o["body"] = ""  # refused
        elif 600 <= i < 700 and i % 13 == 0:  # in a few batches only (each takes the per-line loop)
            o["bodyBase64"] = "gAH/" * (1 + i % 5)
        else:
            o["body"] = f"message {i} " + "ä" * (i % 3) + "x" * rnd.randrange(0, 400)
        out.append(orjson.dumps(o))
    return out


def _files(root) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes().rstrip(b"\0") for sub in ("consumequeue", "index")
            for p in sorted((root / sub).rglob("*")) if p.is_file()}


def _run(tmp_path, name, monkeypatch, lines, fields: bool):
    monkeypatch.setattr(R.time, "time", lambda: NOW / 1000)
    monkeypatch.setattr(R.os, "urandom", lambda n: b"\x00\x03"[:n])
    target = R.StoreTarget(tmp_path / name)
    target.uniq = UniqKeyFactory("127.0.0.1", pid=1, seed=1)
    target.broker.clock = target.broker.store.clock = lambda: NOW
    rows, errors, texts = [], [], []
    stored = []
    send_lines = target.send_lines
    target.send_lines = lambda batch: stored.append(send_lines(batch)) or stored[-1]
    try:
        if fields:
            r = R.Replayer(target, on_result=rows.append, on_error=lambda msg, e: errors.append((msg.body, str(e))))
            for i in range(0, len(lines), R.REPLAY_BATCH):
                r.send_lines(parse_lines(lines[i:i + R.REPLAY_BATCH], i + 1))
            summary = r.finish()
            # the same batches as JSON text: what orjson writes of each row
            t = R.Replayer(target, on_lines=texts.append)
            t.send_lines(parse_lines(lines[:3], 1))
        else:
            summary = R.replay(R.from_json_lines(lines), target, on_result=rows.append,
                               on_error=lambda msg, e: errors.append((msg.body, str(e))))
            t = R.Replayer(target, on_result=rows.append)
            t.send_messages([R.replay_message(i) for i in R.from_json_lines(lines[:3])])
            texts = ["".join(orjson.dumps(row).decode() + "\n" for row in rows[-3:])]
            del rows[-3:]
        cl = target.broker.store.commitlog
        log = bytes(cl.read_bytes(cl.min_offset, cl.max_offset - cl.min_offset))
    finally:
        target.close()
    if fields:  # most batches went in from their fields
        assert sum(s is not None for s in stored) >= 3, stored
    return rows, errors, (summary.selected, summary.sent, summary.failed, summary.by_topic), log, \
        _files(tmp_path / name), texts


def test_store_written_from_fields_is_the_per_message_path_s(tmp_path, monkeypatch):
    lines = _lines(1500, 3)
    fast = _run(tmp_path, "fields", monkeypatch, lines, True)
    slow = _run(tmp_path, "messages", monkeypatch, lines, False)
    assert fast[1] == slow[1] and len(fast[1]) == 2  # the empty body and the huge map
    assert fast[0] == slow[0] and len(fast[0]) == 1498
    assert fast[2] == slow[2] and fast[2][:3] == (1500, 1498, 2)
    assert fast[3] == slow[3] and len(fast[3]) > 1498 * 300
    assert fast[4] == slow[4] and len(fast[4]) >= 5
    assert fast[5] == slow[5] and fast[5][0].count("\n") == 3
