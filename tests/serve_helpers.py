"""Starting and stopping a real `python -m rmqtool serve` for tests (broker and client tests share it).

The process runs on loopback ephemeral ports unless told otherwise; its stderr goes to a file in
which we wait for the ready line (cli.md: serve prints it once both listeners are up).
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# MULTILINE: the ready line need not be the last line of stderr when we look; "store" after the
# ports means the ports were written in full.
READY = re.compile(r"name server ([\d.]+):(\d+), broker (\S+) ([\d.]+):(\d+), (?:gRPC (?:[\d.]+:(\d+)|off \([^)]*\)), )?store (.+)$",
                   re.MULTILINE)


def rmqtool_env() -> dict[str, str]:
    """This checkout first on PYTHONPATH, and no NAMESRV_ADDR / RMQ_STORE leaking in from the caller."""
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    env.pop("NAMESRV_ADDR", None)
    env.pop("RMQ_STORE", None)
    return env


def start_serve(store: Path, conf_path: Path, stderr_path: Path, *, namesrv_port: int = 0,
                broker_port: int | None = 0, extra_args: tuple[str, ...] = (),
                stdout: int = subprocess.DEVNULL,
                timeout: float = 30) -> tuple[subprocess.Popen, re.Match[str] | None]:
    """Spawn serve and wait for its ready line; the match is None when it exited or timed out first.

    Without `--grpc-port` in `extra_args` the gRPC endpoint is off (`-1`): tests that do not use
    it neither pay for loading grpc nor contend for the default port 8081."""
    if "--grpc-port" not in extra_args:
        extra_args = (*extra_args, "--grpc-port", "-1")
    with open(stderr_path, "wb") as err:
        proc = subprocess.Popen(
            [sys.executable, "-m", "rmqtool", "serve", "--store", str(store), "--namesrv-port", str(namesrv_port),
             *(["--broker-port", str(broker_port)] if broker_port is not None else []),
             "-c", str(conf_path), *extra_args],
            stdout=stdout, stderr=err, env=rmqtool_env())
    deadline = time.time() + timeout
    while time.time() < deadline:
        m = READY.search(stderr_path.read_text(errors="replace"))
        if m:
            return proc, m
        if proc.poll() is not None:
            break
        time.sleep(0.05)
    return proc, None


def stop_process(proc: subprocess.Popen, sig: int = signal.SIGTERM, timeout: float = 20) -> int:
    """Send `sig` and wait; SIGKILL when it does not exit within `timeout`. Returns the exit code."""
    if proc.poll() is None:
        proc.send_signal(sig)
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    return proc.returncode
