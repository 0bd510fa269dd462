"""cli/replayread.py reads `replay --jsonl` input on the main thread and parses a chunk's lines as
one JSON array: the lines, their numbers and their values must be those of `line_batches` (the
reader thread) and of one `orjson.loads` per line, whatever the chunk boundaries and whatever
the input (blank lines, \\r, bad lines, lines holding two values or values spanning lines)."""

from __future__ import annotations

import os
import random

import orjson
import pytest

from rmqtool.cli import sendstream
from rmqtool.cli.replayread import json_batches
from rmqtool.cli.replaystream import line_batches

_GOOD = [b'{"topic":"T","body":"b %d","properties":{"WAIT":"true"}}', b'{"topic": "T", "body": "x\\ny %d"}',
         b'{"body":"},{ %d"}', b'{"a": {"b": [1, %d]}}']
_ODD = [b"", b"  ", b'{"a":1},{"b":2}', b'{"a":1} , {"b":2}', b'{"a":[{"b":1}', b'{"c":2}]}', b'{"s":"x',
        b'y"}', b"[1", b"2]", b"not json", b"7", b'"str"', b"{", b"}", b'{"n":123456789012345678901234567890}']


def _input(rng: random.Random, n: int) -> bytes:
    out = []
    for i in range(n):
        line = rng.choice(_GOOD) % i if rng.random() < 0.8 else rng.choice(_ODD)
        out.append(line + rng.choice([b"\n"] * 8 + [b"\r\n", b"\r"]))
    data = b"".join(out)
    return data if rng.random() < 0.7 else data.rstrip(b"\r\n")


def _flat(batches) -> list[tuple[int, bytes]]:
    return [(first + i, line) for first, lines in batches for i, line in enumerate(lines)]


def _loads(line: bytes):
    try:
        return orjson.loads(line)
    except orjson.JSONDecodeError:
        return None


@pytest.mark.parametrize("seed", range(40))
def test_json_batches_give_the_reader_threads_lines_and_each_lines_own_value(tmp_path, monkeypatch, seed):
    rng = random.Random(seed)
    monkeypatch.setattr(sendstream, "READ_CHUNK", rng.choice([7, 64, 300, 1000, 1 << 20]))
    path = tmp_path / "in.jsonl"
    path.write_bytes(_input(rng, rng.choice([1, 5, 40, 300])) if seed % 5 else
                     b"".join(rng.choice(_GOOD[:2]) % i + b"\n" for i in range(600)))
    size = rng.choice([1, 3, 256])
    with open(path, "rb") as f:
        want = _flat(line_batches(f, size))
    got: list[tuple[int, bytes]] = []
    parsed = 0
    with open(path, "rb") as f:
        for batch in json_batches(f, size):
            assert 1 <= len(batch) <= size
            lines = batch.lines()
            got += [(batch.first + i, line) for i, line in enumerate(lines)]
            objs = batch.objs()
            if objs is not None:  # one value per line, as each line alone gives it
                parsed += 1
                assert objs == [_loads(line) for line in lines]
    assert got == want
    if seed % 5 == 0:
        assert parsed  # well-formed lines take the chunk parse


def test_values_spanning_lines_and_two_values_on_a_line_are_not_taken_as_lines(tmp_path):
    # as one array these are 3 values for 3 lines; parsed line by line, two of them are no JSON
    for text in (b'{"a":[{"b":1}\n{"c":2}]}\n{"x":1},{"y":2}\n', b'{"s":"a\n"}\n{"x":1}, {"y":2}\n'):
        path = tmp_path / "odd.jsonl"
        path.write_bytes(b'{"first":0}\n' + text)
        with open(path, "rb") as f:
            batches = list(json_batches(f, 256))
        assert [b.objs() for b in batches] == [None]
        assert batches[0].lines() == [b'{"first":0}', *text.rstrip(b"\n").split(b"\n")]


def test_a_partial_batch_of_a_pipe_is_handed_over_on_the_timer():
    r, w = os.pipe()
    with os.fdopen(r, "rb", buffering=0) as rf:
        got = json_batches(rf, 3, flush_s=0.1)
        os.write(w, b'{"a":1}\r\n{"b":2}\n{"c"')
        batch = next(got)
        assert (batch.first, batch.lines(), batch.objs()) == (1, [b'{"a":1}', b'{"b":2}'], [{"a": 1}, {"b": 2}])
        os.write(w, b':3}\n{"d":4}\n{"e":5}\n{"f":6}\n')
        batch = next(got)
        assert (batch.first, batch.objs()) == (3, [{"c": 3}, {"d": 4}, {"e": 5}])
        batch = next(got)
        assert (batch.first, batch.objs()) == (6, [{"f": 6}])  # on the timer again
        os.close(w)
        with pytest.raises(StopIteration):
            next(got)
