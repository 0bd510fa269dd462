"""Small-file store fixtures: 64 KiB commitlog files, 10-unit ConsumeQueue files, tiny index files."""

from __future__ import annotations

from pathlib import Path

import pytest

from rmqtool.layouts.message import MessageExt
from rmqtool.layouts.net import Host
from rmqtool.store.config import StoreConfig


def small_config(**kw) -> StoreConfig:
    base = dict(mapped_file_size_commit_log=64 * 1024, mapped_file_size_consume_queue=10 * 20,
                max_hash_slot_num=16, max_index_num=32)
    base.update(kw)
    return StoreConfig(**base)


def local_config() -> StoreConfig:
    """LocalBroker's tests (test_local, test_topicdelete): a 64 MiB CommitLog file, 100-unit
    ConsumeQueue files."""
    return small_config(mapped_file_size_commit_log=64 * 1024 * 1024, mapped_file_size_consume_queue=100 * 20,
                        max_hash_slot_num=64, max_index_num=256)


# the born host of the replication tests' messages (test_ha, tests/cli/test_replicate)
BORN_HOST = Host("127.0.0.1", 40000)


def commitlog_files(root: Path) -> dict[str, bytes]:
    """Every CommitLog file of the store at `root` by name: two replicas compare byte for byte."""
    return {p.name: p.read_bytes() for p in sorted((root / "commitlog").iterdir())}


def make_msg(i: int, topic: str = "TopicTest", queue_id: int = 0, body_size: int = 100, **props: str) -> MessageExt:
    properties = {"TAGS": "TagA", "KEYS": f"key{i} common", "UNIQ_KEY": f"UNIQ{i:08d}"}
    properties.update(props)
    body = (f"msg-{i}-".encode() * (body_size // 6 + 1))[:body_size]
    return MessageExt(topic=topic, body=body, queue_id=queue_id, properties=properties, born_timestamp=1700000000000)


class Clock:
    """A settable epoch-ms clock."""

    def __init__(self, now: int = 1_700_000_000_000) -> None:
        self.now = now

    def __call__(self) -> int:
        return self.now


@pytest.fixture
def store_dir(tmp_path: Path) -> Path:
    return tmp_path / "store"


@pytest.fixture
def cfg() -> StoreConfig:
    return small_config()
