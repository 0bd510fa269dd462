"""A batch on a store with an HA service listening, as `rmqtool serve`'s always has: an
ASYNC_MASTER (or a SYNC_MASTER that needs no slave's ack) takes the encoded batch path
(`put_encoded`) and stores what `LocalBroker.send_batch` of one MessageExt per message stores;
a SYNC_MASTER that waits for slaves' acks (its wait reads each message's WAIT) declines it
before touching anything."""

from __future__ import annotations

from pathlib import Path

import pytest

from rmqtool.broker.send import decode_batch_body, encode_batch_body
from rmqtool.layouts import properties as P
from rmqtool.layouts.message import MessageExt
from rmqtool.layouts.msgid import UniqKeyFactory
from rmqtool.layouts.net import Host
from rmqtool.store.config import StoreConfig
from rmqtool.store.ha.service import HAService
from rmqtool.store.local import LocalBroker

NOW = 1_700_000_000_000
TOPIC = "HaBatch"
PEER = Host("10.1.2.3", 40000)
BODY = bytes(range(256)) * 4
BATCH_PROPS = {"WAIT": "true", "UNIQ_KEY": "7F0000013DF218B4AAC2FFFFFFFFFFFF"}


def _open(root: Path, **cfg: object) -> LocalBroker:
    config = StoreConfig(flush_disk_type="ASYNC_FLUSH", mapped_file_size_commit_log=1024 * 1024,
                         max_hash_slot_num=4099, max_index_num=4000, **cfg)
    local = LocalBroker.open(root, config, clock=lambda: NOW)
    local.uniq_keys = UniqKeyFactory("127.0.0.1", pid=1, seed=1)
    local.topics.create_in_send(TOPIC, 4, 0)
    return local


def _body(seq: int) -> bytes:
    return encode_batch_body([(0, BODY, f"UNIQ_KEY\x017F0000013DF218B4AAC2{seq:08X}{i:04X}\x02WAIT\x01true"
                                        f"\x02TAGS\x01bench\x02") for i in range(32)])


def _files(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes().rstrip(b"\0") for sub in ("commitlog", "consumequeue", "index")
            for p in sorted((root / sub).rglob("*")) if p.is_file()}


@pytest.mark.parametrize("role", ["ASYNC_MASTER", "SYNC_MASTER"])
def test_a_master_with_an_ha_service_takes_the_encoded_batch_path(tmp_path, role):
    fast, slow = _open(tmp_path / "fast", broker_role=role), _open(tmp_path / "slow")
    ha = HAService(fast.store)
    ha.start("127.0.0.1", 0)
    map_path = []
    put_batch = fast.store.put_batch
    seq = 0
    fast.store.put_batch = lambda *a, **k: map_path.append(seq) or put_batch(*a, **k)  # type: ignore[method-assign]
    try:
        for seq in range(6):
            data = _body(seq)
            result = fast.send_batch_body(TOPIC, seq % 4, data, BATCH_PROPS, 0, NOW - 5, PEER, 0)
            assert result is not None and result.status == "PUT_OK"
            msgs = []
            for flag, body, text in decode_batch_body(data):
                props = P.decode_properties(text)
                for k, v in BATCH_PROPS.items():
                    props.setdefault(k, v)
                msgs.append(MessageExt(TOPIC, body, seq % 4, flag, props, 0, NOW - 5, PEER))
            slow.send_batch(msgs)
        # every batch through put_encoded but the first, which opens the first CommitLog file
        # (put_messages does that)
        assert map_path == [0]
        assert _files(tmp_path / "fast") == _files(tmp_path / "slow")
    finally:
        ha.stop()
        fast.close()
        slow.close()


def test_a_sync_master_waiting_for_acks_declines_the_encoded_path(tmp_path):
    local = _open(tmp_path / "s", broker_role="SYNC_MASTER", in_sync_replicas=2)
    ha = HAService(local.store)
    ha.start("127.0.0.1", 0)
    try:
        before = local.store.commitlog.max_offset
        got = local.store.put_encoded(TOPIC, 0, 0, NOW - 5, PEER, 0, [0], [BODY], [b"\x00\x00"], [None], [None],
                                      [None])
        assert got is None
        assert local.store.commitlog.max_offset == before
    finally:
        ha.stop()
        local.close()
