"""A store written by rmqtool's own store engine (LocalBroker) verifies clean; damage to it is found.

Cross-checks the two independent readings of formats.md: the engine that writes and the
inspector that checks.
"""

from __future__ import annotations

import os
import struct
from pathlib import Path

import pytest

from rmqtool.inspect.repair import repair
from rmqtool.inspect.verify import check_store
from rmqtool.layouts import properties as P
from rmqtool.layouts.message import MessageExt

local = pytest.importorskip("rmqtool.store.local")
config = pytest.importorskip("rmqtool.store.config")

SIZES = {"mappedFileSizeCommitLog": 64 * 1024, "mappedFileSizeConsumeQueue": 1000, "maxHashSlotNum": 16,
         "maxIndexNum": 40, "mappedFileSizeTimerLog": 52 * 20 + 16}


def _write(root: Path) -> None:
    now = [1_764_460_800_000]
    cfg = config.StoreConfig(store_path_root_dir=root, mapped_file_size_commit_log=SIZES["mappedFileSizeCommitLog"],
                             mapped_file_size_consume_queue=SIZES["mappedFileSizeConsumeQueue"],
                             max_hash_slot_num=SIZES["maxHashSlotNum"], max_index_num=SIZES["maxIndexNum"],
                             mapped_file_size_timer_log=SIZES["mappedFileSizeTimerLog"])
    b = local.LocalBroker.open(root, cfg, clock=lambda: now[0])
    try:
        for i in range(90):
            now[0] += 5
            props = {P.TAGS: "TagA" if i % 2 else "TagB", P.KEYS: f"k{i} u{i % 3}"}
            if i % 10 == 3:
                props[P.DELAY] = "1"
            if i % 10 == 7:
                props[P.TIMER_DELAY_SEC] = "60"
            b.send(MessageExt(topic="TopicTest", body=f"m{i} ".encode() * 250, queue_id=i % 4, properties=props))
        for step in (2000, 70_000):
            now[0] += step
            for s in b.services:
                try:
                    s.run_due(now[0])
                except ModuleNotFoundError:  # a service still being built on another branch
                    pass
    finally:
        b.close()
    (root / "broker.conf").write_text("".join(f"{k}={v}\n" for k, v in SIZES.items()))


@pytest.fixture(scope="module")
def engine_store(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("engine") / "store"
    _write(root)
    return root


def test_engine_written_store_verifies_clean(engine_store):
    assert list(check_store(engine_store)) == []
    assert len(list((engine_store / "commitlog").iterdir())) >= 2, "the store should span CommitLog files"


def test_a_torn_record_in_an_engine_store_is_found_and_repaired(engine_store, tmp_path):
    import shutil

    root = tmp_path / "store"
    shutil.copytree(engine_store, root)
    seg = sorted((root / "commitlog").iterdir())[0]
    with open(seg, "r+b") as fh:
        total = struct.unpack(">i", os.pread(fh.fileno(), 4, 0))[0]
        os.pwrite(fh.fileno(), b"\xff", total + 100)  # inside the second record's fixed fields
    problems = list(check_store(root))
    assert (problems[0].path, problems[0].pos) == (f"commitlog/{seg.name}", total)
    repair(root)
    assert [p for p in check_store(root)] == []
