"""SEND_BATCH_MESSAGE straight into records (`LocalBroker.send_batch_body`) stores and answers
exactly as the per-message path (one MessageExt per inner message, `LocalBroker.send_batch`).

Two brokers with the same clock, UNIQ_KEY factory and random queue choice get the same random
batches, usual and unusual (entries decode_properties drops, separators in values, DELAY and
timer keys, invalid UTF-8, empty bodies, batches crossing CommitLog, ConsumeQueue and index
files); one has the fast path switched off. Answers, CommitLog, ConsumeQueue and index files must
come out byte for byte the same, and the fast path must have taken the usual batches.
"""

from __future__ import annotations

import asyncio
import random
from pathlib import Path

import pytest

from rmqtool.broker.controller import BrokerController
from rmqtool.broker.send import encode_batch_body
from rmqtool.layouts.msgid import UniqKeyFactory
from rmqtool.layouts.net import Host
from rmqtool.remoting.command import RemotingCommand
from rmqtool.store.config import StoreConfig
from rmqtool.store.local import LocalBroker

NOW = 1_700_000_000_000
TOPIC = "BatchBody"


class _Conn:
    peer = Host("10.1.2.3", 40000)


def _open(root: Path) -> tuple[LocalBroker, BrokerController]:
    cfg = StoreConfig(flush_disk_type="ASYNC_FLUSH", mapped_file_size_commit_log=64 * 1024,
                      mapped_file_size_consume_queue=50 * 20, max_hash_slot_num=64, max_index_num=256)
    local = LocalBroker.open(root, cfg, clock=lambda: NOW)
    local._random = random.Random(7)
    local.uniq_keys = UniqKeyFactory("127.0.0.1", pid=1, seed=1)
    return local, BrokerController(local, Host("127.0.0.1", 10911))


USUAL = ["KEYS\x01k{i}\x02WAIT\x01true\x02UNIQ_KEY\x01{u}\x02", "TAGS\x01TagA\x02KEYS\x01a b\x02UNIQ_KEY\x01{u}",
         "WAIT\x01true\x02KEYS\x01only-keys\x02", "", "TAGS\x01é\x02color\x01rouge\x02UNIQ_KEY\x01{u}\x02",
         "CLUSTER\x01elsewhere\x02KEYS\x01c{i}\x02UNIQ_KEY\x01{u}\x02"]
UNUSUAL = ["a\x01b\x01c\x02", "a\x01b\x02a\x01c\x02", "\x02\x02KEYS\x01k\x02", "k\x01\x02bad", "DELAY\x012\x02",
           "TIMER_DELAY_SEC\x015\x02", "xy", "\x01v\x02", "UNIQ_KEY\x01\x02KEYS\x01x\x02"]
HEADER_PROPS = ["WAIT\x01true", "WAIT\x01false\x02x\x01y", "", "UNIQ_KEY\x01BATCHUNIQ\x02WAIT\x01true",
                "TAGS\x01HeadTag\x02KEYS\x01head-key\x02CLUSTER\x01x"]


def _batch(rnd: random.Random, seq: int) -> RemotingCommand:
    items = []
    for i in range(rnd.randrange(1, 9)):
        text = rnd.choice(USUAL if rnd.random() < 0.97 else UNUSUAL).format(i=i, u=f"{seq:016X}{i:016X}")
        body = rnd.randbytes(rnd.choice((1, 100, 1024, 3000)))
        if rnd.random() < 0.01:
            body = b""
        items.append((rnd.randrange(3), body, text))
    data = encode_batch_body(items)
    if rnd.random() < 0.02:  # invalid UTF-8 in the last message's properties
        data = data[:-1] + b"\xff"
    ext = {"a": "pg", "b": TOPIC, "c": "TBW102", "d": "4", "e": str(rnd.randrange(4)), "f": "0",
           "g": str(NOW - seq), "h": "0", "i": rnd.choice(HEADER_PROPS), "j": str(rnd.randrange(2)), "k": "false",
           "m": "true"}
    return RemotingCommand(320, ext, data, seq, 0)


def _files(root: Path) -> dict[str, bytes]:
    out = {}
    for sub in ("commitlog", "consumequeue", "index"):
        for p in sorted((root / sub).rglob("*")):
            if p.is_file():
                out[str(p.relative_to(root))] = p.read_bytes().rstrip(b"\0")
    return out


@pytest.mark.parametrize("seed", [1, 2])
def test_batch_body_path_stores_and_answers_as_the_per_message_path(tmp_path, seed):
    fast_local, fast = _open(tmp_path / "fast")
    slow_local, slow = _open(tmp_path / "slow")
    slow_local.send_batch_body = lambda *args: None  # the per-message path only
    taken = []
    send_body = fast_local.send_batch_body

    def counting(*args):
        r = send_body(*args)
        taken.append(r is not None)
        return r

    fast_local.send_batch_body = counting
    rnd = random.Random(seed)
    try:
        for seq in range(300):
            cmd = _batch(rnd, seq)
            answers = []
            for ctl in (fast, slow):
                random.seed(seq)  # the broker's own queue choice
                answers.append(ctl.handle(cmd, _Conn()))
            a, b = answers
            assert (a.code, a.remark, a.ext_fields) == (b.code, b.remark, b.ext_fields), seq
        got, want = _files(tmp_path / "fast"), _files(tmp_path / "slow")
        assert list(got) == list(want) and len(want["commitlog/" + min(
            p.split("/")[1] for p in want if p.startswith("commitlog"))]) > 0
        assert got == want
        assert sum(taken) > 0.7 * len(taken) and not all(taken)
        assert len([p for p in want if p.startswith("commitlog")]) > 3  # batches crossed file ends
    finally:
        for local, ctl in ((fast_local, fast), (slow_local, slow)):
            ctl.executor.shutdown(wait=False)
            local.close()


def test_batch_body_with_sync_flush_answers_from_the_pool_both_ways(tmp_path):
    """SYNC_FLUSH: the store call runs on the worker pool; a batch the fast path leaves alone
    (DELAY) is answered by the per-message path in the same coroutine."""
    cfg = StoreConfig(flush_disk_type="SYNC_FLUSH", mapped_file_size_commit_log=1024 * 1024)
    local = LocalBroker.open(tmp_path / "sync", cfg)
    ctl = BrokerController(local, Host("127.0.0.1", 10911))
    usual = [(0, b"a" * 10, f"KEYS\x01k{i}\x02UNIQ_KEY\x01{i:032X}\x02") for i in range(5)]
    delayed = [(0, b"b", "DELAY\x012\x02")]

    def cmd(items, seq):
        ext = {"a": "pg", "b": TOPIC, "c": "TBW102", "d": "4", "e": "1", "f": "0", "g": str(NOW), "h": "0",
               "i": "WAIT\x01true", "j": "0", "k": "false", "m": "true"}
        return RemotingCommand(320, ext, encode_batch_body(items), seq, 0)

    async def go():
        out = []
        for seq, items in enumerate((usual, delayed, usual)):
            r = ctl.handle(cmd(items, seq), _Conn())
            out.append(await r if not isinstance(r, RemotingCommand) else r)
        return out

    try:
        a, b, c = asyncio.run(go())
        assert [r.code for r in (a, b, c)] == [0, 0, 0], [r.remark for r in (a, b, c)]
        assert len(a.ext_fields["msgId"].split(",")) == 5 and a.ext_fields["queueOffset"] == "0"
        assert c.ext_fields["queueOffset"] == "5"  # the delayed message went to the schedule topic
        assert local.store.get_max_offset_in_queue(TOPIC, 1) == 10
    finally:
        ctl.executor.shutdown(wait=False)
        local.close()
