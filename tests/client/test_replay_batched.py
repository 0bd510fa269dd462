"""`replay` into the embedded store in batches (`StoreTarget.send_many`) gives the results and
records one `send` per message gives, a refused message included (its batch goes one by one)."""

from __future__ import annotations

import random

import pytest

from rmqtool.client import replay as R
from rmqtool.layouts.message import MessageExt
from rmqtool.layouts.msgid import UniqKeyFactory

NOW = 1_700_000_000_000


class _OneByOne:
    """A StoreTarget without `send_many`: the one-message-at-a-time loop."""

    def __init__(self, target: R.StoreTarget) -> None:
        self.target = target

    def send(self, msg):
        return self.target.send(msg)


def _items(n: int, one_topic: bool) -> list[R.ReplayItem]:
    rnd = random.Random(5)
    out = []
    for i in range(n):
        topic = "ReplayA" if one_topic or rnd.random() < 0.7 else "ReplayB"
        body = b"" if i == 300 else rnd.randbytes(rnd.randrange(1, 600))  # message 300 is refused
        props = {"UNIQ_KEY": f"{i:032X}", "KEYS": f"k{i}"}
        if i % 3 == 0:
            props["TAGS"] = f"T{i % 5}"
        out.append(R.ReplayItem(MessageExt(topic, body, properties=props, flag=i % 4), topic))
    return out


def _files(root) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes().rstrip(b"\0") for sub in ("consumequeue", "index")
            for p in sorted((root / sub).rglob("*")) if p.is_file()}


def _run(tmp_path, name, monkeypatch, batched: bool, one_topic: bool):
    monkeypatch.setattr(R.time, "time", lambda: NOW / 1000)
    monkeypatch.setattr(R.os, "urandom", lambda n: b"\x00\x03"[:n])
    target = R.StoreTarget(tmp_path / name)
    target.uniq = UniqKeyFactory("127.0.0.1", pid=1, seed=1)
    target.broker.clock = target.broker.store.clock = lambda: NOW
    rows, errors = [], []
    try:
        summary = R.replay(_items(700, one_topic), target if batched else _OneByOne(target), on_result=rows.append,
                           on_error=lambda msg, e: errors.append((msg.body, str(e))))
        cl = target.broker.store.commitlog
        log = bytes(cl.read_bytes(cl.min_offset, cl.max_offset - cl.min_offset))
    finally:
        target.close()
    return rows, errors, (summary.selected, summary.sent, summary.failed, summary.by_topic), log, _files(
        tmp_path / name)


@pytest.mark.parametrize("one_topic", [False, True], ids=["two-topics", "one-topic"])
def test_batched_replay_matches_one_by_one(tmp_path, monkeypatch, one_topic):
    """One topic: the batches go in as records packed from their fields (`send_records`, a
    queue per message); two: through `send_batch`. ConsumeQueue and index files too."""
    batched = _run(tmp_path, "batched", monkeypatch, True, one_topic)
    single = _run(tmp_path, "single", monkeypatch, False, one_topic)
    assert batched[0] == single[0] and len(batched[0]) == 699
    assert batched[1] == single[1] and len(batched[1]) == 1
    assert batched[2] == single[2] == (700, 699, 1, batched[2][3])
    assert batched[3] == single[3] and len(batched[3]) > 0
    assert batched[4] == single[4] and len(batched[4]) >= 5
