"""The stdin readers of `send` and `replay --jsonl` (cli/sendstream.py): a regular file, a pipe
and a stream without a file descriptor (CliRunner's) are read alike, and a read of many short
lines is queued a few thousand lines at a time (a whole 1 MiB read of `seq` lines, 150,000
objects, doubled `send`'s peak RSS)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from typer.testing import CliRunner

from rmqtool.cli.main import app
from tests.conftest import rmqtool_env


def _lines(n: int) -> bytes:
    return b"".join(json.dumps({"topic": "Wide", "body": f"{i} " + "x" * 1000, "msgId": f"7F000001{i:024X}",
                                "properties": {"UNIQ_KEY": f"7F000001{i:024X}", "color": "red"}}).encode() + b"\n"
                    for i in range(n))


def _stored(store) -> list[dict]:
    r = subprocess.run([sys.executable, "-m", "rmqtool", "consume", "Wide", "--store", str(store), "--from", "first",
                        "--json"], capture_output=True, env=rmqtool_env(None), timeout=120, check=True)
    keep = ("topic", "body", "flag")  # not the queue: the first one a replay takes is chosen at random
    return sorted(({k: o.get(k) for k in keep} | {"color": o["properties"]["color"],
                                                   "origin": o["properties"]["ORIGIN_MESSAGE_ID"]}
                   for o in map(json.loads, r.stdout.splitlines())), key=lambda o: o["origin"])


def test_replay_from_a_pipe_stores_what_replay_from_a_file_does(tmp_path):
    """3,000 lines of 1 KiB (3 MB, many times what a pipe holds) through `cat |` and `<`."""
    data = tmp_path / "in.jsonl"
    data.write_bytes(_lines(3000))
    args = [sys.executable, "-m", "rmqtool", "replay", "--jsonl", "-", "--json", "--store"]
    with open(data, "rb") as f:
        from_file = subprocess.run([*args, str(tmp_path / "file")], stdin=f, capture_output=True,
                                   env=rmqtool_env(None), timeout=120)
    cat = subprocess.Popen(["cat", str(data)], stdout=subprocess.PIPE)
    from_pipe = subprocess.run([*args, str(tmp_path / "pipe")], stdin=cat.stdout, capture_output=True,
                               env=rmqtool_env(None), timeout=120)
    assert cat.stdout is not None
    cat.stdout.close()
    assert cat.wait(timeout=30) == 0
    assert from_file.returncode == from_pipe.returncode == 0, (from_file.stderr, from_pipe.stderr)
    assert len(from_file.stdout.splitlines()) == len(from_pipe.stdout.splitlines()) == 3000
    stored = _stored(tmp_path / "file")
    assert len(stored) == 3000 and sorted(o["body"] for o in stored) == sorted(
        f"{i} " + "x" * 1000 for i in range(3000))
    assert stored == _stored(tmp_path / "pipe")


def test_send_reads_a_regular_file_and_a_stream_without_a_descriptor(tmp_path):
    data = tmp_path / "bodies"
    data.write_bytes(b"".join(b"%d\n" % i for i in range(600)))
    with open(data, "rb") as f:
        r = subprocess.run([sys.executable, "-m", "rmqtool", "send", "Wide", "--batch", "256", "--json", "--store",
                            str(tmp_path / "s")], stdin=f, capture_output=True, env=rmqtool_env(None), timeout=120)
    assert r.returncode == 0, r.stderr
    assert len(r.stdout.splitlines()) == 600
    res = CliRunner().invoke(app, ["send", "Wide", "--batch", "256", "--json", "--store", str(tmp_path / "c")],
                             input=data.read_bytes())
    assert res.exit_code == 0, res.output
    assert [json.loads(x)["status"] for x in res.stdout.splitlines()] == ["SEND_OK"] * 600


def test_a_read_of_short_lines_is_queued_a_few_thousand_lines_at_a_time():
    """A 1 MiB read of `seq` lines queued whole was 150,000 objects per chunk: peak RSS doubled."""
    from rmqtool.cli.sendstream import _EOF, QUEUE_LINES, LineReader

    r, w = os.pipe()
    os.write(w, b"1\n" * 30_000)  # fits a 64 KiB pipe: the first read takes it all
    os.close(w)
    with os.fdopen(r, "rb", buffering=0) as rf:
        reader = LineReader(rf, 1 << 20)
        reader.start()
        sizes = []
        while (item := reader.lines.get(timeout=30)) is not _EOF:
            sizes.append(len(item))
    assert sum(sizes) == 30_000 and max(sizes) <= QUEUE_LINES
