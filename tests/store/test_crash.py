"""Crash test (issue 2 "Done when"): SIGKILL a SYNC_FLUSH sender at random moments, then recover.

After every kill the store is reopened (abnormal recovery, `abort` present) and must hold every
acknowledged message exactly once; every ConsumeQueue unit and index key must agree with the
CommitLog, and no torn tail may remain. RMQ_CRASH_ROUNDS sets the number of rounds (default 20).
"""

from __future__ import annotations

import os
import random
import signal
import struct
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

from rmqtool.layouts.constants import INDEX_ENTRY_SIZE, INDEX_HEADER_SIZE
from rmqtool.layouts.index import INDEX_ENTRY
from rmqtool.layouts.message import Blank, RecordError, decode_record
from rmqtool.store.index import index_key_hash
from rmqtool.store.messagestore import MessageStore
from tests.store.crash_child import TOPIC, crash_config

CHILD = Path(__file__).with_name("crash_child.py")
REPO = Path(__file__).resolve().parents[2]


def run_child(root: Path, first_id: int, threads: int, run_s: float) -> list[int]:
    env = dict(os.environ, PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    proc = subprocess.Popen([sys.executable, str(CHILD), str(root), str(first_id), str(threads)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    assert proc.stdout is not None
    first = proc.stdout.readline()
    if first != b"ready\n":
        proc.kill()
        raise AssertionError(proc.communicate()[1].decode())
    time.sleep(run_s)
    proc.send_signal(signal.SIGKILL)
    out, err = proc.communicate()
    assert proc.returncode == -signal.SIGKILL, err.decode()
    lines = out.split(b"\n")
    return [int(x) for x in lines[:-1]]  # the last piece is partial or empty


def tear_tail(root: Path, rng: random.Random) -> None:
    """Simulate a write torn by the crash: half a record (or garbage) after the last valid one."""
    ro = MessageStore.open(root, crash_config(), read_only=True)
    try:
        cl = ro.commitlog
        last = cl.mfq.files[-1]
        end = cl.max_offset - last.from_offset
        first = cl.mfq.files[0].from_offset
        sample = cl.read_bytes(first, cl.record_size_at(first))
        path, size = last.path, last.file_size
    finally:
        ro.close()
    # cut before the end of the body, so the body CRC (or the size) gives the tear away
    torn = sample[: rng.randrange(8, 140)] if rng.random() < 0.7 else os.urandom(rng.randrange(1, 300))
    torn = torn[: size - end]
    with open(path, "r+b") as fh:
        fh.seek(end)
        fh.write(torn)


def index_report(store: MessageStore, key: str, found: list) -> str:
    """What a failed look-up needs to be understood from a CI log alone: the record, every
    index file's header, where the key's entries are and what its slot chain reaches."""
    uniq = key if key.startswith("ID") else "ID" + key[1:]
    rec = next((m for m in store.commitlog.iter_records(store.commitlog.min_offset)
                if m.uniq_key == uniq), None)
    lines = [f"{key!r} found {found}; record at {rec and rec.commit_log_offset}, stored "
             f"{rec and rec.store_timestamp}; page cache intact: {store.page_cache_intact}; "
             f"CommitLog {store.commitlog.min_offset}..{store.commitlog.max_offset}"]
    h = index_key_hash(f"{TOPIC}#{key}")
    files = store.index.files
    lines.append(f"  {len(files)} index files; those holding the key's hash, and the last three:")
    for k, f in enumerate(files):
        base, count = f.entries_base, f.index_count
        at = [i for i in range(1, f.index_num)
              if INDEX_ENTRY.unpack_from(f.mm, base + i * INDEX_ENTRY_SIZE)[0] == h]
        if not at and k < len(files) - 3:
            continue
        slots = struct.unpack_from(f">{f.hash_slot_num}i", f.mm, INDEX_HEADER_SIZE)
        chain, nxt = [], slots[h % f.hash_slot_num]
        while 0 < nxt < f.index_num and nxt not in chain and len(chain) < 50:
            chain.append(nxt)
            nxt = INDEX_ENTRY.unpack_from(f.mm, base + nxt * INDEX_ENTRY_SIZE)[3]
        past = [i for i in range(count, f.index_num) if any(f.mm[base + i * INDEX_ENTRY_SIZE:
                                                                base + (i + 1) * INDEX_ENTRY_SIZE])]
        lines.append(f"  {f.path.name}: count {count}, phy {f.begin_phy_offset}..{f.end_phy_offset}, "
                     f"time {f.begin_timestamp}..{f.end_timestamp}; key's entries at {at}, slot chain {chain}; "
                     f"slots past the count {sum(v >= count for v in slots)}, entries past it {past[:10]}")
    return "\n".join(lines)


def check_store(root: Path, acked: set[int]) -> int:
    cfg = crash_config()
    with MessageStore.open(root, cfg) as store:
        assert not store.last_exit_ok
        cl = store.commitlog
        ids: Counter[int] = Counter()
        by_queue: dict[int, list] = {}
        for msg in cl.iter_records(cl.min_offset, check_crc=True):
            msg_id = int(msg.uniq_key[2:])
            ids[msg_id] += 1
            assert msg.body == f"crash-{msg_id}-".encode() * 5
            by_queue.setdefault(msg.queue_id, []).append(msg)
        dup = [i for i, n in ids.items() if n > 1]
        assert not dup, f"stored twice: {dup[:10]}"
        missing = acked - set(ids)
        assert not missing, f"acknowledged but lost: {sorted(missing)[:10]}"
        # ConsumeQueue: one unit per record, in order, pointing at the record with that queue offset
        for qid, msgs in by_queue.items():
            assert store.get_max_offset_in_queue(TOPIC, qid) == len(msgs)
            for k, msg in enumerate(msgs):
                assert msg.queue_offset == k
                assert store.get_commit_log_offset_in_queue(TOPIC, qid, k) == msg.commit_log_offset
        assert set(by_queue) <= set(store.topic_queues().get(TOPIC, []))
        # index: every stored message is found by its UNIQ_KEY and key, exactly once
        sample = random.sample(sorted(ids), min(len(ids), 300))
        for msg_id in sample:
            for key in (f"ID{msg_id}", f"k{msg_id}"):
                found = [m.uniq_key for m in store.query_message(TOPIC, key, 10, 0, 2**62)]
                assert found == [f"ID{msg_id}"], index_report(store, key, found)
        # no torn tail: after the last record there are only zeros, and no later file
        last = cl.mfq.files[-1]
        end = cl.max_offset - last.from_offset
        assert last.mm[end:] == bytes(last.file_size - end)
        files = sorted((root / "commitlog").iterdir())
        assert files[-1].name == last.path.name
        try:
            decode_record(last.mm, end, last.file_size)
            raise AssertionError("a record after the recovered end")
        except (RecordError, Blank):
            pass
        return len(ids)


def test_sigkill_under_sync_flush_loses_no_acknowledged_message(tmp_path):
    rounds = int(os.environ.get("RMQ_CRASH_ROUNDS", "20"))
    seed = int(os.environ.get("RMQ_CRASH_SEED") or random.randrange(1 << 30))
    rng = random.Random(seed)
    root = tmp_path / "store"
    acked: set[int] = set()
    total = 0
    for r in range(rounds):
        got = run_child(root, r * 10_000_000, threads=rng.choice([1, 4, 8]), run_s=rng.uniform(0.02, 0.25))
        acked.update(got)
        torn = rng.random() < 0.5
        if torn:
            tear_tail(root, rng)
        try:
            total = check_store(root, acked)
        except AssertionError as e:
            raise AssertionError(f"round {r} (RMQ_CRASH_SEED={seed}, torn tail: {torn}): {e}") from e
    assert total >= len(acked) > 0
