"""A batch of `replay --jsonl` lines of one shape into replayed fields column by column.

Why: `replaylines.parse_lines` takes a line at a time through some forty checks and lookups;
in the usual stream (every line printed by `consume --json` from one topic) each line has the
same fields and the same property names in the same order, so the checks can be made once per
field over the whole batch in C (the types of a column counted, a column's extremes, its values
joined) and each final map built from its column values by `dict(zip(names, row))`. The fields
are those `parse_lines`' loop gives, which is `from_json_lines` + `replay_message` (compared in
tests/client/test_replay_uniform.py). Anything else — a line that is no JSON object, two
shapes, a value of another type, tags or keys given outside the map, a message without an
origin id — gives None, and the loop takes the batch line by line with its own words.
"""

from __future__ import annotations

from itertools import chain, repeat
from operator import itemgetter
from typing import Any

import orjson

from rmqtool.client.replay import DROPPED_PROPERTIES
from rmqtool.layouts import properties as P

_INT32 = 1 << 31
_INTS = ("queueId", "queueOffset", "storeTimestamp", "bornTimestamp")


def _column(rows: list[Any], name: str) -> list[Any]:
    return list(map(itemgetter(name), rows))


def _all(values: list[Any], kind: type) -> bool:
    """Every value is exactly of `kind` (a bool is no int), counted in C."""
    return list(map(type, values)).count(kind) == len(values)


def loads_all(lines: list[bytes]) -> list[Any] | None:
    """Every line's JSON value, or None when one is no JSON (an empty line, a bad one)."""
    try:
        return list(map(orjson.loads, lines))
    except orjson.JSONDecodeError:
        return None


def uniform_fields(objs: list[Any], to_topic: str | None
                   ) -> tuple[list[str], list[bytes], list[int], list[dict[str, str]], list[str]] | None:
    """(topics, bodies, flags, final maps, origin ids) of a batch's JSON values (`loads_all`)
    when they share one shape, as `parse_lines` gives them; None when the line-by-line loop
    must take them (nothing in `objs` is changed)."""
    n = len(objs)
    if not n or not _all(objs, dict):
        return None
    shape = tuple(objs[0])
    if list(map(tuple, objs)).count(shape) != n:
        return None
    names = set(shape)
    if "body" not in names or "bodyBase64" in names:
        return None
    texts = _column(objs, "body")
    if not _all(texts, str):
        return None
    for name in ("tags", "keys"):  # put in the map by the loop: rare outside it
        if name in names and any(_column(objs, name)):
            return None
    if to_topic:
        topics = [to_topic] * n
    else:
        if "topic" not in names:
            return None
        topics = _column(objs, "topic")
        if not _all(topics, str) or not all(topics):
            return None
    if "flag" in names:
        flags = _column(objs, "flag")
        if not _all(flags, int) or min(flags) < -_INT32 or max(flags) >= _INT32:
            return None
    else:
        flags = [0] * n
    for name in _INTS:
        if name in names and not _all(_column(objs, name), int):
            return None
    if "storeHost" in names and "commitLogOffset" in names and not _all(_column(objs, "commitLogOffset"), int):
        return None
    if "properties" in names:
        srcs = _column(objs, "properties")
        if not _all(srcs, dict):
            return None
        try:
            "".join(chain.from_iterable(map(dict.values, srcs)))  # every value a str
        except TypeError:
            return None
        keys = tuple(srcs[0])
        if list(map(tuple, srcs)).count(keys) != n:
            return None
    else:
        srcs, keys = [{}] * n, ()
    origin_key, dlq_key, uniq_key = P.ORIGIN_MESSAGE_ID, P.DLQ_ORIGIN_MESSAGE_ID, P.UNIQ_KEY
    columns: dict[str, list[str]] = {k: _column(srcs, k) for k in keys}
    if "msgId" in names and uniq_key not in columns and origin_key not in columns:
        ids = _column(objs, "msgId")
        if not _all(ids, str) or not all(ids):
            return None  # some lines with an id and some without: two shapes of map
        columns[origin_key] = ids  # the loop's map gets it last
    candidates = [columns[k] for k in (origin_key, dlq_key, uniq_key) if k in columns]
    if not candidates:
        return None
    origins = candidates[0] if len(candidates) == 1 else [a or b for a, b in zip(*candidates[:2], strict=True)]
    if len(candidates) == 3:
        origins = [a or b for a, b in zip(origins, candidates[2], strict=True)]
    if not all(origins):
        return None  # no origin id, or an offset msgId: the loop's cases
    out_names = [k for k in columns if k not in DROPPED_PROPERTIES]
    if origin_key not in out_names:
        out_names.append(origin_key)
    columns[origin_key] = origins
    values = [columns[k] for k in out_names]
    out_names.append(P.WAIT)  # the Message's own, after the user map
    values.append(["true"] * n)
    maps = list(map(dict, map(zip, repeat(out_names), zip(*values, strict=True))))
    try:
        bodies = list(map(str.encode, texts))
    except UnicodeEncodeError:  # a lone surrogate: the loop's error
        return None
    return topics, bodies, flags, maps, origins
