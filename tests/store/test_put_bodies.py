"""Bodies sharing one property map (`LocalBroker.send_bodies` -> `MessageStore.put_bodies`, what
`rmqtool send --batch N` stores) come out exactly as `send_batch` of one MessageExt per body.

Two stores with the same clock get the same random batches (sizes, maps with and without TAGS,
KEYS with spaces, user properties, ids of unequal length, batches crossing CommitLog,
ConsumeQueue and index files); one sends MessageExts only, the other bodies, falling back to the
MessageExts when `send_bodies` declines (as the command does). Results and the CommitLog,
ConsumeQueue and index files must be byte for byte the same, and the body path must have taken
most batches.
"""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from rmqtool.errors import InvalidMessage
from rmqtool.layouts import properties as P
from rmqtool.layouts.message import MessageExt
from rmqtool.layouts.msgid import UniqKeyFactory
from rmqtool.store.config import StoreConfig
from rmqtool.store.local import LocalBroker

NOW = 1_700_000_000_000
TOPIC = "Bodies"
MAPS = [
    {P.WAIT: "true", P.UNIQ_KEY: ""},
    {P.TAGS: "TagA", P.KEYS: "k1 k2", P.WAIT: "true", "color": "rouge", P.UNIQ_KEY: ""},
    {P.KEYS: "only", P.UNIQ_KEY: "", P.WAIT: "false"},
    {P.TAGS: "é", P.UNIQ_KEY: ""},
]


def _open(root: Path) -> LocalBroker:
    cfg = StoreConfig(flush_disk_type="ASYNC_FLUSH", mapped_file_size_commit_log=64 * 1024,
                      mapped_file_size_consume_queue=50 * 20, max_hash_slot_num=64, max_index_num=256)
    return LocalBroker.open(root, cfg, clock=lambda: NOW)


def _files(root: Path) -> dict[str, bytes]:
    out = {}
    for sub in ("commitlog", "consumequeue", "index"):
        for p in sorted((root / sub).rglob("*")):
            if p.is_file():
                out[str(p.relative_to(root))] = p.read_bytes().rstrip(b"\0")
    return out


def _messages(props: dict[str, str], bodies: list[bytes], uniq_keys: list[str], qid: int) -> list[MessageExt]:
    out = []
    for body, uniq in zip(bodies, uniq_keys, strict=True):
        d = dict(props)
        d[P.UNIQ_KEY] = uniq
        out.append(MessageExt(TOPIC, body, qid, properties=d, born_timestamp=NOW - 5))
    return out


def _answer(puts) -> list[tuple[str, int, int]]:
    return [(str(getattr(p.status, "value", p.status)), p.wrote_offset, p.queue_offset) for p in puts]


@pytest.mark.parametrize("seed", [1, 2])
def test_put_bodies_stores_as_send_batch_of_message_exts(tmp_path, seed):
    fast, slow = _open(tmp_path / "fast"), _open(tmp_path / "slow")
    rnd = random.Random(seed)
    uniq = UniqKeyFactory("127.0.0.1", pid=1, seed=seed)
    taken = []
    try:
        for seq in range(200):
            props = rnd.choice(MAPS)
            bodies = [rnd.randbytes(rnd.choice((1, 100, 1024, 3000))) for _ in range(rnd.randrange(1, 12))]
            keys = uniq.create_many(NOW + seq, len(bodies))
            if rnd.random() < 0.1:  # a client's own ids, of unequal lengths
                keys = [f"id-{seq}-{i}" for i in range(len(bodies))]
            qid = rnd.randrange(4)
            want = _answer(slow.send_batch(_messages(props, bodies, keys, qid)))
            put = fast.send_bodies(TOPIC, qid, bodies, props, keys, NOW - 5)
            taken.append(put is not None)
            if put is None:
                got = _answer(fast.send_batch(_messages(props, bodies, keys, qid)))
            else:
                got = [(put.status, o, put.queue_offset + i) for i, o in enumerate(put.wrote_offsets)]
            assert got == want, seq
        got_files, want_files = _files(tmp_path / "fast"), _files(tmp_path / "slow")
        assert list(got_files) == list(want_files)
        assert got_files == want_files
        assert sum(taken) > 0.7 * len(taken) and not all(taken)  # some batches met a file's end
        assert len([p for p in want_files if p.startswith("commitlog")]) > 3
    finally:
        fast.close()
        slow.close()


def test_send_bodies_refuses_as_send_batch_before_storing(tmp_path):
    local = _open(tmp_path / "s")
    try:
        props = {P.WAIT: "true", P.UNIQ_KEY: ""}
        with pytest.raises(InvalidMessage, match="body"):
            local.send_bodies(TOPIC, 0, [b"a", b""], props, ["A" * 32, "B" * 32], NOW)
        with pytest.raises(InvalidMessage, match="queueId"):
            local.send_bodies(TOPIC, 99, [b"a"], props, ["A" * 32], NOW)
        assert local.store.commitlog.max_offset == 0
    finally:
        local.close()
