"""`rmqtool send` streams stdin: each line of a slow pipe is sent (and its result printed) within
a second, and the memory of a long pipe does not grow with its length.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest

from rmqtool.cli.sendstream import batches
from tests.conftest import rmqtool_env
from tests.stream_helpers import exchange, peak_status_kb, piped_rmqtool


@pytest.mark.parametrize("batch", ["1", "256"])
def test_tail_f_style_input_is_sent_within_a_second_of_each_line(tmp_path, batch):
    with piped_rmqtool(["send", "Tail", "--store", str(tmp_path / "s"), "--batch", batch, "--json"],
                       rmqtool_env(None)) as proc:
        first, _ = exchange(proc, b"first\n", 30)  # start-up: opening (creating) the store
        assert json.loads(first)["status"] == "SEND_OK", proc.stderr.read() if not first else first
        for i in range(3):
            got, took = exchange(proc, f"line {i}\n".encode(), 5)
            assert got and json.loads(got)["status"] == "SEND_OK"
            assert took < 1.0, f"line {i} took {took:.2f}s to be sent"
        proc.stdin.close()
        assert proc.wait(timeout=30) == 0
    r = subprocess.run([sys.executable, "-m", "rmqtool", "consume", "Tail", "--store", str(tmp_path / "s"),
                        "--from", "first", "--format", "%s"], capture_output=True, env=rmqtool_env(None), timeout=60)
    assert sorted(r.stdout.split()) == sorted([b"first", b"line", b"0", b"line", b"1", b"line", b"2"])


def _peak_anon_rss_kb(lines: int, store) -> tuple[int, int]:
    """(peak RssAnon, printed result lines) of `seq LINES | rmqtool send --batch 256`."""
    seq = subprocess.Popen(["seq", str(lines)], stdout=subprocess.PIPE)
    out = open(store.parent / f"out-{lines}", "wb")  # noqa: SIM115 - closed below
    proc = subprocess.Popen([sys.executable, "-m", "rmqtool", "send", "Seq", "--batch", "256", "--store", str(store),
                             "--json"], stdin=seq.stdout, stdout=out, stderr=subprocess.PIPE, env=rmqtool_env(None))
    assert seq.stdout is not None
    seq.stdout.close()
    peak = peak_status_kb(proc, "RssAnon")["RssAnon"]
    out.close()
    assert proc.returncode == 0, proc.stderr.read()
    with open(store.parent / f"out-{lines}", "rb") as f:
        printed = sum(1 for _ in f)
    return peak, printed


@pytest.mark.slow
@pytest.mark.skipif(not os.path.exists("/proc/self/status"), reason="reads RssAnon from /proc")
def test_seq_into_send_runs_in_memory_that_does_not_grow_with_the_input(tmp_path):
    """The issue's `seq 10000000 | rmqtool send T --batch 256`, at 20,000 and 200,000 lines.

    RssAnon is the process's own memory; the pages of the mapped CommitLog it writes are the
    kernel's page cache (RssFile) and are not what the stream buffers.
    """
    small, n_small = _peak_anon_rss_kb(20_000, tmp_path / "small")
    big, n_big = _peak_anon_rss_kb(200_000, tmp_path / "big")
    assert (n_small, n_big) == (20_000, 200_000)
    assert big < 100 * 1024, f"peak RssAnon {big // 1024} MB"
    assert big - small < 12 * 1024, f"RssAnon grew from {small // 1024} MB to {big // 1024} MB with 10x the input"


def test_batches_flush_a_partial_batch_on_the_timer():
    r, w = os.pipe()
    with os.fdopen(r, "rb", buffering=0) as rf:
        got = batches(rf, 100, max_line=1 << 20, flush_s=0.1)
        os.write(w, b"a\r\nb\n\nc")
        t0 = time.monotonic()
        assert next(got) == [b"a", b"b"]
        assert time.monotonic() - t0 < 1.0
        os.write(w, b"\n" + b"x\n" * 250)
        assert next(got) == [b"c"] + [b"x"] * 99
        assert next(got) == [b"x"] * 100
        os.close(w)
        assert next(got) == [b"x"] * 51
        with pytest.raises(StopIteration):
            next(got)


def test_a_line_without_end_over_the_limit_is_refused_after_what_came_before():
    r, w = os.pipe()
    from rmqtool.errors import InvalidMessage

    with os.fdopen(r, "rb", buffering=0) as rf:
        got = batches(rf, 10, max_line=1000, flush_s=5)
        os.write(w, b"ok\n" + b"y" * 1500)
        assert next(got) == [b"ok"]
        with pytest.raises(InvalidMessage, match="longer than 1000 bytes"):
            next(got)
        os.close(w)


def test_quiet_prints_a_summary_instead_of_each_result(tmp_path):
    r = subprocess.run([sys.executable, "-m", "rmqtool", "send", "Q", "--store", str(tmp_path / "s"), "--batch", "16",
                        "--quiet"], input=b"".join(b"%d\n" % i for i in range(1000)), capture_output=True,
                       env=rmqtool_env(None), timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout == b"" and b"send: 1000 message(s)" in r.stderr and b"(SEND_OK 1000)" in r.stderr


def test_json_results_are_what_a_json_encoder_writes(tmp_path):
    from rmqtool.cli.common import json_line
    from rmqtool.cli.send import _json_result

    r = {"status": "SEND_OK", "msgId": "7F0000010000", "offsetMsgId": "7F00000100002A9F0000000000000000",
         "topic": "T-1%x|y", "queueId": 2, "queueOffset": 5}
    assert _json_result(r) == json_line(r) + "\n"
    odd = dict(r, queueOffset=None)
    assert json.loads(_json_result(odd)) == odd


def _peak_rss_kb(lines: int, store) -> tuple[int, int]:
    """(peak VmRSS, peak RssFile) in kB of `seq LINES | rmqtool send --batch 256 --quiet`."""
    seq = subprocess.Popen(["seq", str(lines)], stdout=subprocess.PIPE)
    proc = subprocess.Popen([sys.executable, "-m", "rmqtool", "send", "Seq", "--batch", "256", "--store", str(store),
                             "--quiet"], stdin=seq.stdout, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            env=rmqtool_env(None))
    assert seq.stdout is not None
    seq.stdout.close()
    peak = peak_status_kb(proc, "VmRSS", "RssFile", step=0.05)
    assert proc.returncode == 0, proc.stderr.read()
    assert b"(SEND_OK %d)" % lines in proc.stderr.read()
    return peak["VmRSS"], peak["RssFile"]


@pytest.mark.slow
@pytest.mark.skipif(not os.path.exists("/proc/self/status"), reason="reads VmRSS from /proc")
def test_seq_into_send_keeps_total_rss_with_mapped_pages_under_100_mb(tmp_path):
    """The whole RSS, mapped store pages included, of 1,200,000 lines stays < 100 MB.

    Each million messages writes ~20 MB of ConsumeQueue units and ~20 MB of index entries and
    touches the 20 MB slot table; kept resident they took the RSS of this run to ~150 MB. The
    flushes now drop the pages behind a small window (CommitLog, ConsumeQueue, index entries)
    and the slot table (refaulted from the page cache where keys land).
    """
    peak, peak_file = _peak_rss_kb(1_200_000, tmp_path / "s")
    assert peak < 100 * 1024, f"peak VmRSS {peak // 1024} MB (RssFile {peak_file // 1024} MB)"
    assert peak_file < 60 * 1024, f"peak RssFile {peak_file // 1024} MB"
