"""Chunked block reservation on a real full tmpfs (root only), where a store into a hole faults and
even a read of a hole through a writable mapping allocates (SIGBUS when the disk is full).

A store whose files are much larger than what is reserved of them is killed -9 mid-stream, the
file system is filled to the last page, and the store is then recovered, read, verified and
inspected on it: nothing may touch a block that was never reserved. Chunks are made small (in
the child processes) so that every kind of file crosses several of them.
"""

from __future__ import annotations

import errno
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import rmqtool_env
from tests.tmpfs_helpers import mounted_tmpfs, used_ratio

N = 3000  # ~3.4 MB of CommitLog, 60 KB of ConsumeQueue units, 6,000 index entries

_SETUP = """
import sys
from rmqtool.store import index, mappedfile
from rmqtool.store.config import StoreConfig
from rmqtool.store.messagestore import MessageStore, PutMessageStatus
from rmqtool.layouts.message import MessageExt
mappedfile.RESERVE_AHEAD = 1 << 20
mappedfile.CQ_RESERVE_AHEAD = 16 << 10
index.INDEX_RESERVE_AHEAD = 64 << 10
cfg = StoreConfig(mapped_file_size_commit_log=64 << 20, mapped_file_size_consume_queue=300_000 * 20,
                  max_hash_slot_num=4096, max_index_num=400_000, disk_space_warning_level_ratio=99,
                  disk_max_used_space_ratio=99)
store_dir, N, exact = sys.argv[1], int(sys.argv[2]), sys.argv[3] == "exact"
def msg(i):
    return MessageExt(topic="T", body=b"%06d" % i + b"x" * 1000, queue_id=i % 2,
                      properties={"KEYS": f"k{i}", "UNIQ_KEY": f"U{i:08d}"}, born_timestamp=1700000000000)
"""

_WRITE_AND_DIE = _SETUP + """
import os
store = MessageStore.open(store_dir, cfg)
for start in range(0, N, 50):
    assert all(r.ok for r in store.put_messages([msg(i) for i in range(start, start + 50)]))
store.flush()
os.kill(os.getpid(), 9)
"""

_RECOVER_ON_A_FULL_DISK = _SETUP + """
store = MessageStore.open(store_dir, cfg)
got = []
for q in (0, 1):
    off = 0
    while True:
        r = store.get_message("T", q, off, 500, max_bytes=1 << 30)
        if not r.messages:
            break
        got += [int(m.body[:6]) for m in r.messages]
        off = r.next_begin_offset
assert (sorted(got) == list(range(N))) if exact else set(range(N)) <= set(got), len(got)
assert store.query_message("T", "k77", 10, 0, 2**62)
# the disk is full: what still fits in the reserved chunks is taken, then puts fail cleanly
statuses = set()
for i in range(N, N + 2000, 20):
    statuses |= {r.status for r in store.put_messages([msg(j) for j in range(i, i + 20)])}
store.close()
print(sorted(s.name for s in statuses))
"""


def _fill(ballast: Path) -> None:
    """Grow the ballast until ENOSPC, to the last page."""
    for size in (1 << 20, 4096):
        with open(ballast, "ab", buffering=0) as f:
            try:
                while True:
                    f.write(bytes(size))
            except OSError as e:
                assert e.errno == errno.ENOSPC


def _python(code: str, store: Path, exact: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code, str(store), str(N), "exact" if exact else "subset"],
                          capture_output=True, text=True,
                          env=rmqtool_env(), timeout=120)


@pytest.fixture
def small_tmpfs(tmp_path: Path):
    with mounted_tmpfs(tmp_path / "mnt", "48m", "test_messagestore_basic.py injects ENOSPC without it") as mnt:
        yield mnt


def test_a_store_of_partly_reserved_files_recovers_reads_and_verifies_on_a_full_tmpfs(small_tmpfs: Path):
    store = small_tmpfs / "store"
    r = _python(_WRITE_AND_DIE, store)
    assert r.returncode == -9, r.stderr
    cl = store / "commitlog" / f"{0:020d}"
    st = cl.stat()
    assert st.st_size == 64 << 20 and st.st_blocks * 512 < 8 << 20  # logically full-size, mostly unreserved
    _fill(small_tmpfs / "ballast")
    assert used_ratio(small_tmpfs) > 0.99

    r = _python(_RECOVER_ON_A_FULL_DISK, store)
    assert r.returncode == 0, r.stderr  # -7 would be SIGBUS
    statuses = r.stdout.split("\n")[-2]
    assert "CREATE_MAPPED_FILE_FAILED" in statuses or "SERVICE_NOT_AVAILABLE" in statuses, statuses

    for args in (["verify", str(store)], ["inspect", "store", str(store)]):
        r = subprocess.run([sys.executable, "-m", "rmqtool", *args], capture_output=True, text=True,
                           env=rmqtool_env(), timeout=120)
        assert r.returncode in (0, 1), (args, r.returncode, r.stderr)
        assert "Traceback" not in r.stderr

    (small_tmpfs / "ballast").unlink()
    r = _python(_RECOVER_ON_A_FULL_DISK, store, exact=False)  # space is back: the refused puts, then more
    assert r.returncode == 0, r.stderr
    assert r.stdout.split("\n")[-2] == "['PUT_OK']"
