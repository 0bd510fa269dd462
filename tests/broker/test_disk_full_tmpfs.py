"""A real full disk: `serve` on a 128 MB tmpfs (root only; unprivileged coverage: store/test_diskspace.py).

A ballast file brings the disk near the warning ratio, then sends (sync and async flush) fill it: sends get
SERVICE_NOT_AVAILABLE ("the broker's disk is full") once usage passes
diskSpaceWarningLevelRatio, serve stays up and answers pulls. With the disk 100 % full, serve is
killed -9 and restarted (recovery on a full disk), `verify` and `inspect` run on it and on a sparse
copy of it (as an older rmqtool or a Java broker leaves files), and a sparse file on the full
tmpfs is read through `map_read_only` (a plain mapping dies of SIGBUS).
When the ballast goes, sends are taken again and every acknowledged message is intact.
"""

from __future__ import annotations

import errno
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.broker.conftest import ServeProcess, Wire, decode_records, pull_ext, send_ext
from tests.serve_helpers import rmqtool_env
from tests.tmpfs_helpers import mounted_tmpfs, used_ratio

pytestmark = pytest.mark.slow

CONF = """\
brokerClusterName=DefaultCluster
brokerName=broker-a
mappedFileSizeCommitLog=4194304
mappedFileSizeConsumeQueue=60000
maxHashSlotNum=2000
maxIndexNum=8000
cleanResourceInterval=200
cleanFileForciblyEnable=false
"""
TOPIC = "DiskFullTopic"
BODY = 4096


@pytest.fixture
def tmpfs(tmp_path: Path):
    with mounted_tmpfs(tmp_path / "mnt", "128m", "store/test_diskspace.py covers a full disk without it") as mnt:
        yield mnt


def _fill(ballast: Path, upto: float | None) -> None:
    """Grow the ballast until the file system is `upto` used (None: until ENOSPC)."""
    chunk = bytes(1 << 20)
    with open(ballast, "ab") as f:
        while upto is None or used_ratio(ballast.parent) < upto:
            try:
                f.write(chunk)
                f.flush()
            except OSError as e:
                assert e.errno == errno.ENOSPC
                break
    if upto is None:  # the last pages, below 1 MiB
        with open(ballast, "ab", buffering=0) as f:
            try:
                while True:
                    f.write(bytes(4096))
            except OSError:
                pass


def _body(i: int) -> bytes:
    return f"msg-{i:08d}-".encode().ljust(BODY, b"x")


def _send(w: Wire, i: int):
    return w.request(310, send_ext(TOPIC, 0), _body(i))


def _pull_all(w: Wire) -> list[bytes]:
    bodies: list[bytes] = []
    offset = 0
    while True:
        r = w.request(11, pull_ext(TOPIC, "disk_cg", 0, offset, max_msgs=32))
        if r.code != 0:
            assert r.code in (19, 20), (r.code, r.remark)  # no new message
            return bodies
        bodies += [m.body for m in decode_records(r.body)]
        offset = int(r.ext_fields["nextBeginOffset"])


def _run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "rmqtool", *args], capture_output=True, text=True,
                          env=rmqtool_env(), timeout=120)


def _sparse_read_code(path: Path, safe: bool) -> int:
    how = "map_read_only(fd, os.fstat(fd).st_size)" if safe else "mmap.mmap(fd, 0, access=mmap.ACCESS_READ)"
    code = ("import mmap, os\nfrom rmqtool.store.diskspace import map_read_only\n"
            f"fd = os.open({str(path)!r}, os.O_RDONLY)\nmm = {how}\nassert mm[3 << 20 : (3 << 20) + 8] == bytes(8)\n")
    return subprocess.run([sys.executable, "-c", code], env=rmqtool_env(), timeout=60).returncode


@pytest.mark.parametrize("flush", ["sync", "async"])
def test_full_disk_refuses_sends_keeps_serving_and_loses_nothing(tmpfs: Path, flush: str):
    store = tmpfs / "store"
    serve = ServeProcess(store, conf=CONF, extra_args=("--flush", flush))
    acked: list[int] = []
    try:
        w = Wire(serve.broker)
        for i in range(20):
            assert _send(w, i).code == 0
            acked.append(i)
        sparse = tmpfs / "sparse"  # what an older rmqtool or a Java broker leaves: holes
        with open(sparse, "wb") as f:
            f.write(b"head")
            f.truncate(4 << 20)
        # a copy of the store as an older rmqtool or a Java broker leaves it: every zero run a hole
        sparse_store = tmpfs / "sparse-store"
        subprocess.run(["cp", "-a", "--sparse=always", str(store), str(sparse_store)], check=True, timeout=60)
        ballast = tmpfs / "ballast"
        _fill(ballast, 0.86)
        # sends until the broker refuses them: RocketMQ's disk-full answer
        refusal = None
        i = len(acked)
        while refusal is None and i < 20_000:
            r = _send(w, i)
            if r.code == 0:
                acked.append(i)
            else:
                refusal = r
            i += 1
        assert refusal is not None, f"{len(acked)} sends and never refused at {used_ratio(tmpfs):.2f} used"
        assert refusal.code == 14, (refusal.code, refusal.remark)  # SERVICE_NOT_AVAILABLE
        assert "the broker's disk is full [CL: " in refusal.remark
        assert used_ratio(tmpfs) > 0.88
        # serve stays up and keeps serving reads
        assert _pull_all(w) == [_body(k) for k in acked]
        # the disk entirely full: still a clean refusal, still reads
        _fill(ballast, None)
        assert _send(w, i).code == 14
        assert _pull_all(w) == [_body(k) for k in acked]
        w.close()
        # reading a sparse file on the full tmpfs: a plain mapping faults, map_read_only does not
        assert _sparse_read_code(sparse, safe=False) == -signal.SIGBUS
        assert _sparse_read_code(sparse, safe=True) == 0
        # kill -9 and restart on the full disk: abnormal recovery must not need a free block
        serve.stop(signal.SIGKILL)
        serve = ServeProcess(store, conf=CONF, extra_args=("--flush", flush))
        w = Wire(serve.broker)
        assert _pull_all(w) == [_body(k) for k in acked]
        assert _send(w, i).code == 14
        w.close()
        assert serve.stop() == 0, serve.stderr
        assert "Traceback" not in serve.stderr
        # verify and inspect on the full disk
        v = _run("verify", str(store))
        assert v.returncode == 0, v.stdout + v.stderr
        s = _run("inspect", "store", str(store), "--json")
        assert s.returncode == 0 and "Traceback" not in s.stderr, s.stderr
        # and of the sparse copy: reading its holes through a plain mapping would be SIGBUS here
        v = _run("verify", str(sparse_store))
        assert v.returncode == 0, v.stdout + v.stderr
        s = _run("inspect", "commitlog", str(sparse_store / "commitlog"), "--json")
        assert s.returncode == 0 and s.stdout.count("\n") == 20, s.stderr
        # space returns: sends are taken again
        ballast.unlink()
        sparse.unlink()
        serve = ServeProcess(store, conf=CONF, extra_args=("--flush", flush))
        w = Wire(serve.broker)
        for k in range(i, i + 50):
            assert _send(w, k).code == 0
            acked.append(k)
        assert _pull_all(w) == [_body(k) for k in acked]
        w.close()
    finally:
        code = serve.stop()
    assert code == 0, serve.stderr
    assert "Traceback" not in serve.stderr
    v = _run("verify", str(store))
    assert v.returncode == 0, v.stdout + v.stderr
