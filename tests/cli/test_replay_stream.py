"""`rmqtool replay --jsonl` streams its input (issue #10): a line written to a pipe is replayed and
its result printed while the pipe is still open, a bad line stops the stream after what came
before it, and the memory of a long input does not grow with its length."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from rmqtool.cli.replaystream import line_batches
from tests.conftest import rmqtool_env
from tests.stream_helpers import exchange, peak_status_kb, piped_rmqtool


def _jsonl(i: int, topic: str = "Stream") -> bytes:
    return json.dumps({"topic": topic, "body": f"line {i}", "msgId": f"7F000001{i:024X}",
                       "properties": {"UNIQ_KEY": f"7F000001{i:024X}", "WAIT": "true", "color": "red"}}).encode() + b"\n"


def test_each_line_of_an_open_pipe_is_replayed_and_printed_before_eof(tmp_path):
    store = tmp_path / "s"
    with piped_rmqtool(["replay", "--jsonl", "-", "--store", str(store), "--json"], rmqtool_env(None)) as proc:
        for i in range(3):  # the first waits for start-up (creating the store)
            got, _ = exchange(proc, _jsonl(i), 30)
            assert got, f"no result for line {i} while stdin is open"
            row = json.loads(got)
            assert (row["status"], row["originMsgId"]) == ("SEND_OK", f"7F000001{i:024X}")
        proc.stdin.close()
        assert proc.wait(timeout=60) == 0
        assert b"3 selected, sent 3, 0 failed" in proc.stderr.read()
    r = subprocess.run([sys.executable, "-m", "rmqtool", "consume", "Stream", "--store", str(store), "--json"],
                       capture_output=True, env=rmqtool_env(None), timeout=60)
    got = [json.loads(x) for x in r.stdout.splitlines()]
    assert sorted(x["body"] for x in got) == ["line 0", "line 1", "line 2"]
    assert all(x["properties"]["color"] == "red" for x in got)


def test_a_bad_line_stops_the_stream_after_the_lines_before_it(tmp_path):
    store = tmp_path / "s"
    good = b"".join(_jsonl(i) for i in range(300))  # more than one batch before the bad line
    r = subprocess.run([sys.executable, "-m", "rmqtool", "replay", "--jsonl", "-", "--store", str(store), "--json"],
                       input=good + b"\n{not json\n" + _jsonl(301), capture_output=True, env=rmqtool_env(None),
                       timeout=120)
    assert r.returncode == 2
    assert b"line 302" in r.stderr  # 300 lines, an empty one, the bad one
    rows = [json.loads(x) for x in r.stdout.splitlines()]
    assert len(rows) >= 256 and all(x["status"] == "SEND_OK" for x in rows)


def test_a_bad_first_line_creates_nothing(tmp_path):
    store = tmp_path / "s"
    path = tmp_path / "in.jsonl"
    path.write_bytes(_jsonl(0) + b'{"topic": "Stream"}\n')
    r = subprocess.run([sys.executable, "-m", "rmqtool", "replay", "--jsonl", str(path), "--store", str(store)],
                       capture_output=True, env=rmqtool_env(None), timeout=60)
    assert r.returncode == 2 and b"line 2: no body or bodyBase64" in r.stderr
    assert r.stdout == b"" and not store.exists()


def test_line_batches_number_lines_as_text_mode_splits_them():
    r, w = os.pipe()
    with os.fdopen(r, "rb", buffering=0) as rf:
        got = line_batches(rf, 3, flush_s=0.1)
        os.write(w, b"a\r\nb\rc\r")  # the last \r may start a \r\n: held until more comes
        assert next(got) == (1, [b"a", b"b"])  # a partial batch, on the timer
        os.write(w, b"\nd\n\ne")
        assert next(got) == (3, [b"c", b"d", b""])
        os.close(w)
        assert next(got) == (6, [b"e"])
        with pytest.raises(StopIteration):
            next(got)


def _peak_anon_rss_kb(n: int, tmp_path) -> int:
    path = tmp_path / f"in-{n}.jsonl"
    with open(path, "wb") as f:
        for i in range(n):
            f.write(_jsonl(i).replace(b'"line', b'"' + b"x" * 900 + b" line"))
    proc = subprocess.Popen([sys.executable, "-m", "rmqtool", "replay", "--jsonl", str(path), "--store",
                             str(tmp_path / f"s-{n}"), "--json"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            env=rmqtool_env(None))
    peak = peak_status_kb(proc, "RssAnon")["RssAnon"]
    assert proc.returncode == 0, proc.stderr.read()
    return peak


@pytest.mark.slow
@pytest.mark.skipif(not os.path.exists("/proc/self/status"), reason="reads RssAnon from /proc")
def test_replay_of_a_long_file_runs_in_memory_that_does_not_grow_with_it(tmp_path):
    """10,000 and 100,000 lines of 1 KiB: reading all of them first took ~250 MB at 100,000."""
    small = _peak_anon_rss_kb(10_000, tmp_path)
    big = _peak_anon_rss_kb(100_000, tmp_path)
    assert big - small < 12 * 1024, f"RssAnon grew from {small // 1024} MB to {big // 1024} MB with 10x the input"
