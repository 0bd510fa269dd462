"""A full disk over the wire, unprivileged: serve in-process with an injected usage probe and ENOSPC.

The send answers are SendMessageProcessor's: SERVICE_NOT_AVAILABLE (14) with the disk-full remark
while usage is above diskSpaceWarningLevelRatio, SYSTEM_ERROR (1) "create mapped file failed"
when a new CommitLog file cannot get its blocks; pulls go on, and sends are taken again when
space returns. The same on a real full tmpfs: test_disk_full_tmpfs.py (root).
"""

from __future__ import annotations

import errno
import os
import time

from rmqtool.store import cleanup, diskspace
from tests.broker.conftest import InProcessServe, Wire, decode_records, pull_ext, send_ext

CONF = """\
brokerClusterName=DefaultCluster
brokerName=broker-a
mappedFileSizeCommitLog=65536
mappedFileSizeConsumeQueue=6000
maxHashSlotNum=100
maxIndexNum=400
cleanResourceInterval=100
"""


def _pull_all(w: Wire, topic: str) -> list[bytes]:
    bodies, offset = [], 0
    while True:
        r = w.request(11, pull_ext(topic, "cg_full", 0, offset, max_msgs=32))
        if r.code != 0:
            return bodies
        bodies += [m.body for m in decode_records(r.body)]
        offset = int(r.ext_fields["nextBeginOffset"])


def _until(pred, timeout: float = 10.0):
    deadline = time.time() + timeout
    while time.time() < deadline:
        got = pred()
        if got:
            return got
        time.sleep(0.05)
    raise AssertionError("condition not reached")


def test_sends_get_rocketmq_errors_on_a_full_disk_and_reads_go_on(tmp_path, monkeypatch):
    usage = {"ratio": 0.40}
    monkeypatch.setattr(cleanup, "disk_used_ratio", lambda p: usage["ratio"])
    monkeypatch.setattr(diskspace, "disk_used_ratio", lambda p: usage["ratio"])
    serve = InProcessServe(tmp_path, CONF)
    w = Wire(serve.broker)
    acked: list[bytes] = []

    def send(i: int):
        body = f"m{i:06d}".encode().ljust(1000, b".")
        r = w.request(310, send_ext("FullTopic", 0), body)
        if r.code == 0:
            acked.append(body)
        return r

    try:
        for i in range(10):
            assert send(i).code == 0
        usage["ratio"] = 0.93  # above diskSpaceWarningLevelRatio: refused within cleanResourceInterval
        refused = _until(lambda: (r := send(100)).code != 0 and r)
        assert refused.code == 14
        assert refused.remark.startswith("service not available now. It may be caused by one of the following "
                                         "reasons: the broker's disk is full [CL:  0.93 CQ:  0.93 INDEX:  0.93]")
        assert _pull_all(w, "FullTopic") == acked
        usage["ratio"] = 0.87  # between the clean-forcibly and the warning ratio: still refused
        time.sleep(0.3)
        assert send(101).code == 14
        usage["ratio"] = 0.50
        _until(lambda: send(102).code == 0)
        # a new CommitLog file that cannot get its blocks
        real = os.posix_fallocate

        def enospc(*_a):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

        monkeypatch.setattr(os, "posix_fallocate", enospc)
        codes = {send(200 + i).code for i in range(80)}  # 80 KB: more than a 64 KiB file holds
        assert 1 in codes
        failed = send(300)
        assert (failed.code, failed.remark) == (1, "create mapped file failed, server is busy or broken.")
        assert _pull_all(w, "FullTopic") == acked
        monkeypatch.setattr(os, "posix_fallocate", real)
        for i in range(20):
            assert send(400 + i).code == 0
        assert _pull_all(w, "FullTopic") == acked
    finally:
        w.close()
        serve.close()
