"""A SEND_BATCH_MESSAGE body taken a column at a time (store/batchcolumns.py `uniform_columns`)
stores what `LocalBroker.send_batch` of one MessageExt per inner message stores, byte for byte,
and leaves to the per-message walk every batch that is not uniform: two key shapes, a message
without UNIQ_KEY among ones with it, TAGS on some only, other keys or separators at the same
lengths, an inner CLUSTER, non-ASCII text."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from rmqtool.broker.send import decode_batch_body, encode_batch_body
from rmqtool.layouts import properties as P
from rmqtool.layouts.message import MessageExt
from rmqtool.layouts.msgid import UniqKeyFactory
from rmqtool.layouts.net import Host
from rmqtool.store import sendbatch
from rmqtool.store.config import StoreConfig
from rmqtool.store.local import LocalBroker

NOW = 1_700_000_000_000
TOPIC = "Columns"
PEER = Host("10.1.2.3", 40000)


def _open(root: Path) -> LocalBroker:
    cfg = StoreConfig(flush_disk_type="ASYNC_FLUSH", mapped_file_size_commit_log=1024 * 1024,
                      max_hash_slot_num=4099, max_index_num=4000)
    local = LocalBroker.open(root, cfg, clock=lambda: NOW)
    local.uniq_keys = UniqKeyFactory("127.0.0.1", pid=1, seed=1)
    local.topics.create_in_send(TOPIC, 4, 0)
    return local


def _files(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes().rstrip(b"\0") for sub in ("commitlog", "consumequeue", "index")
            for p in sorted((root / sub).rglob("*")) if p.is_file()}


def _uniq(seq: int, i: int) -> str:
    return f"7F0000013DF218B4AAC2{seq:08X}{i:04X}"


def _java(seq: int, i: int) -> str:
    """What benchmarks/java's producer sends: TAGS, WAIT, UNIQ_KEY in the client's HashMap order."""
    return f"UNIQ_KEY\x01{_uniq(seq, i)}\x02WAIT\x01true\x02TAGS\x01bench\x02"


def _as_messages(data: bytes, batch_props: dict[str, str], queue_id: int) -> list[MessageExt]:
    """broker/send.py `_send_batch`'s per-message path."""
    msgs = []
    for flag, body, text in decode_batch_body(data):
        props = P.decode_properties(text)
        for k, v in batch_props.items():
            props.setdefault(k, v)
        msgs.append(MessageExt(TOPIC, body, queue_id, flag, props, 0, NOW - 5, PEER))
    return msgs


BODY = bytes((i * 7) % 251 for i in range(1024))
BATCH_PROPS = {"WAIT": "true", "UNIQ_KEY": "7F0000013DF218B4AAC2FFFFFFFFFFFF"}
# name -> (texts of one batch's messages (i, seq) -> text, taken by the column path)
CASES = {
    "java": (lambda s, i: _java(s, i), True),
    "keys": (lambda s, i: f"KEYS\x01k{i % 10}\x02UNIQ_KEY\x01{_uniq(s, i)}\x02WAIT\x01true\x02", True),
    "batch's uniq only": (lambda s, i: "WAIT\x01true\x02TAGS\x01bench\x02", True),
    # uniform in each batch; from batch to batch the same key shape and text length, but the
    # values' lengths (so where they start) alternate
    "values moving between batches": (lambda s, i: f"UNIQ_KEY\x01{_uniq(s, i)}\x02WAIT\x01"
                                      + ("true\x02TAGS\x01bench\x02" if s % 2 else "tru\x02TAGS\x01bench!\x02"), True),
    "two shapes": (lambda s, i: _java(s, i) if i % 2 else f"UNIQ_KEY\x01{_uniq(s, i)}\x02KEYS\x01x{i % 10}\x02", False),
    "one without uniq": (lambda s, i: _java(s, i) if i != 5 else "WAIT\x01true\x02TAGS\x01bench\x02", False),
    "tags on some": (lambda s, i: _java(s, i) if i % 3 else f"UNIQ_KEY\x01{_uniq(s, i)}\x02WAIT\x01true\x02", False),
    "other names, same lengths": (lambda s, i: _java(s, i) if i != 7 else _java(s, i).replace("TAGS", "KEYS"),
                                  False),
    "separators moved": (lambda s, i: _java(s, i) if i != 3 else _java(s, i).replace("\x02WAIT\x01true",
                                                                                      "\x02WAIT\x02true"), False),
    "values of other lengths": (lambda s, i: _java(s, i) if i != 4 else _java(s, i).replace(
        "true\x02TAGS\x01bench", "tru\x02TAGS\x01bench!"), False),
    "an entry twice": (lambda s, i: "A\x01a\x02B\x01b\x02A\x01x\x02" if i % 2 == 0 else "B\x01bb\x02A\x01aaaa\x02",
                       False),
    "inner cluster": (lambda s, i: f"CLUSTER\x01c{i % 10}\x02UNIQ_KEY\x01{_uniq(s, i)}\x02", False),
    "non-ascii": (lambda s, i: _java(s, i).replace("bench", "bénch"), False),
    "no trailing separator": (lambda s, i: _java(s, i)[:-1], False),
}


@pytest.mark.parametrize("case", list(CASES))
def test_batches_store_what_one_message_ext_each_stores(tmp_path, monkeypatch, case):
    make, uniform = CASES[case]
    taken = []
    columns = sendbatch.uniform_columns

    def counting(*args):
        got = columns(*args)
        taken.append(got is not None)
        return got

    monkeypatch.setattr(sendbatch, "uniform_columns", counting)
    fast, slow = _open(tmp_path / "fast"), _open(tmp_path / "slow")
    rnd = random.Random(case)
    sizes: list[int] = []
    try:
        for seq in range(12):
            n = rnd.choice((1, 2, 32, 33))
            sizes.append(n)
            data = encode_batch_body([(i % 3, BODY, make(seq, i)) for i in range(n)])
            queue_id = seq % 4
            result = fast.send_batch_body(TOPIC, queue_id, data, BATCH_PROPS, 0, NOW - 5, PEER, 0)
            results = slow.send_batch(_as_messages(data, BATCH_PROPS, queue_id))
            if result is None:  # the walk refused it too: the per-message path on both sides
                assert not uniform
                fast.send_batch(_as_messages(data, BATCH_PROPS, queue_id))
            else:
                assert result.wrote_offsets == [r.wrote_offset for r in results]
                assert result.queue_offset == results[0].queue_offset
        assert _files(tmp_path / "fast") == _files(tmp_path / "slow")
        big = [t for n, t in zip(sizes, taken, strict=True) if n >= 32]  # every message variant in
        assert big and (all(taken) if uniform else not any(big))
    finally:
        fast.close()
        slow.close()
