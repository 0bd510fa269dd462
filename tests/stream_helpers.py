"""Watching a streaming `rmqtool` subprocess (send, replay --jsonl): one stdout line within a
time limit, and the peak of its memory figures while it runs. Shared by tests/cli/test_send_stream,
test_replay_stream and tests/client/test_cli_network; not collected as tests."""

from __future__ import annotations

import os
import select
import subprocess
import time


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
