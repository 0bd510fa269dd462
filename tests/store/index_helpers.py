"""What the index tests share (test_index_process, test_index_defer): puts of every key mix the
dispatcher has a path for, an in-process reference store, its index files and checkpoint time."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from rmqtool.store.checkpoint import StoreCheckpoint
from rmqtool.store.messagestore import MessageStore
from tests.store.conftest import Clock, make_msg

TOPICS = ("TopicTest", "Other")


def messages(first: int, n: int) -> list:
    """Each kind of key mix the dispatcher has a path for: one KEYS token, several, none, no UNIQ_KEY."""
    out = []
    for i in range(first, first + n):
        m = make_msg(i, topic=TOPICS[i % 7 == 3], queue_id=i % 3)
        if i % 11 == 5:
            m.properties["KEYS"] = f"a{i} b{i}  c{i}"
        elif i % 13 == 6:
            del m.properties["KEYS"]
        elif i % 17 == 8:
            del m.properties["UNIQ_KEY"]
        out.append(m)
    return out


def fill(store: MessageStore, clock: Clock, rounds: int, first: int = 0,
         after_round: Callable[[int], None] | None = None) -> int:
    """Single puts and batches, the clock moving on by 0.4 s per round; returns the next id."""
    i = first
    for r in range(rounds):
        clock.now += 400
        if r % 2:
            for m in messages(i, 5):
                assert store.put_message(m).ok
            i += 5
        else:
            assert all(res.ok for res in store.put_messages(messages(i, 40)))
            i += 40
        if after_round is not None:
            after_round(r)
    return i


def index_files(root: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted((root / "index").iterdir())}


def index_ts(root: Path) -> int:
    cp = StoreCheckpoint(root / "checkpoint", read_only=True)
    try:
        return cp.index_msg_timestamp
    finally:
        cp.close()


def reference(tmp_path: Path, cfg, rounds: int) -> Path:
    clock = Clock()
    with MessageStore.open(tmp_path / "inproc", cfg, clock=clock) as store:
        fill(store, clock, rounds)
    return tmp_path / "inproc"
