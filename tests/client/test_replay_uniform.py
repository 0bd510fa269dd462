"""Batches of `replay --jsonl` lines of one shape (client/replaycolumns.py, taken column by
column) give the fields of the per-message path (`from_json_lines` + `replay_message`): random
shapes of consume's fields and property names, values that vary line by line, and now and then
one line of another type or shape, which sends the batch back to the line-by-line loop."""

from __future__ import annotations

import json
import random

import pytest

from rmqtool.client import replay as R
from rmqtool.client import replaycolumns
from rmqtool.client.replaylines import parse_lines
from rmqtool.errors import InvalidInput
from rmqtool.layouts import properties as P

FIELDS = ["queueId", "queueOffset", "storeTimestamp", "bornTimestamp", "flag", "msgId", "storeHost",
          "commitLogOffset", "tags", "keys", "bornHost", "reconsumeTimes"]
PROPS = ["UNIQ_KEY", "WAIT", "CLUSTER", "ORIGIN_MESSAGE_ID", "DLQ_ORIGIN_MESSAGE_ID", "TAGS", "KEYS", "MIN_OFFSET",
         "color", "é", "{b}"]


def _value(rnd: random.Random, name: str, i: int) -> object:
    if name in ("msgId",):
        return f"7F000001{i:024X}" if rnd.random() < 0.997 else ""
    if name == "storeHost":
        return "10.0.0.1:10911"
    if name in ("tags", "keys"):
        return rnd.choice(["", None]) if rnd.random() < 0.997 else f"t{i}"
    if name == "bornHost":
        return "127.0.0.1:5"
    if name == "flag":
        return rnd.choice([0, i % 7, -(1 << 31), (1 << 31) - 1]) if rnd.random() < 0.997 else (1 << 31)
    return i * 3 if rnd.random() < 0.997 else rnd.choice([None, "7", True, 0])


def _batch(rnd: random.Random) -> list[bytes]:
    fields = rnd.sample(FIELDS, rnd.randrange(0, len(FIELDS)))
    names = rnd.sample(PROPS, rnd.randrange(0, 5))
    with_props = rnd.random() < 0.9
    lines = []
    for i in range(rnd.randrange(1, 80)):
        o: dict[str, object] = {"topic": "ReplayU", "body": f"b{i} " + "ü" * (i % 3)}
        for name in fields:
            o[name] = _value(rnd, name, i)
        if with_props:
            o["properties"] = {k: (f"v{i}" * (1 + i % 3) if rnd.random() < 0.997 else "") for k in names}
        lines.append(o)
    if rnd.random() < 0.2:  # one line unlike the others
        odd = rnd.choice(lines)
        odd.update(rnd.choice([{"body": 7}, {"topic": ""}, {"properties": None}, {"extra": 1}, {"bodyBase64": "AAE="},
                               {"properties": {"a": 1}}, {"body": "\ud800"}]))
    text = [json.dumps(o) for o in lines]
    if rnd.random() < 0.05:
        text.insert(rnd.randrange(len(text) + 1), "")
    return [t.encode("utf-8", "surrogatepass") for t in text]


def _slow(lines, to_topic):
    got, error = [], None
    try:
        for item in R.from_json_lines(lines, to_topic=to_topic, first_line=1):
            m = R.replay_message(item)
            got.append((item.topic, m.body, m.flag, list(m.properties.items()), m.properties.get(P.ORIGIN_MESSAGE_ID)))
    except InvalidInput as e:
        error = str(e)
    return got, error


@pytest.mark.parametrize("seed", range(5))
def test_batches_of_one_shape_give_the_per_message_path_s_fields(seed, monkeypatch):
    taken = []
    uniform = replaycolumns.uniform_fields
    monkeypatch.setattr("rmqtool.client.replaylines.uniform_fields",
                        lambda objs, to_topic: taken.append(uniform(objs, to_topic)) or taken[-1])
    rnd = random.Random(seed)
    for _round in range(150):
        lines = _batch(rnd)
        to_topic = "Other" if _round % 7 == 0 else None
        got = parse_lines(lines, 1, to_topic=to_topic)
        fast = [(t, b, f, list(p.items()), o)
                for t, b, f, p, o in zip(got.topics, got.bodies, got.flags, got.maps, got.origins, strict=True)]
        assert (fast, None if got.error is None else str(got.error)) == _slow(lines, to_topic)
    assert sum(t is not None for t in taken) >= 30  # many batches went column by column
    assert sum(t is None for t in taken) >= 10  # and some back to the loop
