"""Driving a streaming `rmqtool` subprocess (send, replay --jsonl): started with its pipes and
killed if a test leaves it running, a line written and its result line read within a time
limit, and the peak of its memory figures while it runs. Shared by tests/cli/test_send_stream,
test_replay_stream and tests/client/test_cli_network; not collected as tests."""

from __future__ import annotations

import contextlib
import os
import select
import subprocess
import sys
import time
from collections.abc import Iterator


def readline(proc: subprocess.Popen, timeout: float) -> bytes:
    """One stdout line, or b'' when none came within `timeout` seconds."""
    assert proc.stdout is not None
    fd = proc.stdout.fileno()
    buf = b""
    end = time.monotonic() + timeout
    while not buf.endswith(b"\n"):
        left = end - time.monotonic()
        if left <= 0 or not select.select([fd], [], [], left)[0]:
            return b""
        chunk = os.read(fd, 1)
        if not chunk:
            return buf
        buf += chunk
    return buf


@contextlib.contextmanager
def piped_rmqtool(args: list[str], env: dict[str, str]) -> Iterator[subprocess.Popen]:
    """`python -m rmqtool ARGS` with stdin, stdout and stderr piped; killed if still running at the end."""
    proc = subprocess.Popen([sys.executable, "-m", "rmqtool", *args], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env=env)
    try:
        yield proc
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def exchange(proc: subprocess.Popen, line: bytes, timeout: float) -> tuple[bytes, float]:
    """Write `line` to the stdin of `proc` (flushed, as `tail -f` does) and read one stdout line:
    (that line or b'' after `timeout` seconds, the seconds it took)."""
    assert proc.stdin is not None
    t0 = time.monotonic()
    proc.stdin.write(line)
    proc.stdin.flush()
    return readline(proc, timeout), time.monotonic() - t0


def peak_status_kb(proc: subprocess.Popen, *fields: str, step: float = 0.02) -> dict[str, int]:
    """The highest value in kB of each /proc/PID/status field (RssAnon, VmRSS, RssFile) seen until
    `proc` exits, read every `step` seconds."""
    peak = dict.fromkeys(fields, 0)
    while proc.poll() is None:
        try:
            with open(f"/proc/{proc.pid}/status") as f:
                for line in f:
                    name, _, value = line.partition(":")
                    if name in peak:
                        peak[name] = max(peak[name], int(value.split()[0]))
        except (FileNotFoundError, ProcessLookupError):
            pass
        time.sleep(step)
    return peak
