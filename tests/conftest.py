"""Shared test helpers: run the real `rmqtool` command as a subprocess of this checkout."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def rmqtool_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """Environment in which `python -m rmqtool` imports this checkout's code."""
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    env.pop("NAMESRV_ADDR", None)
    env.pop("RMQ_STORE", None)
    if extra:
        env.update(extra)
    return env


def run_rmqtool(*args: str, input: bytes | str | None = None, timeout: float = 60,
                env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """Run `python -m rmqtool ARGS` and capture its output (bytes unless input is str)."""
    return subprocess.run([sys.executable, "-m", "rmqtool", *args], input=input, capture_output=True,
                          timeout=timeout, env=rmqtool_env(env), text=isinstance(input, str))


@pytest.fixture
def rmq():
    return run_rmqtool


def pytest_collection_modifyitems(config, items):
    """`quiet` tests assert latencies (500 new groups: every route look-up under 100 ms), which
    tests running beside them on other cores would make: in a parallel run (an xdist worker)
    they are skipped, and the README's test command runs them afterwards on their own."""
    if not hasattr(config, "workerinput"):
        return
    skip = pytest.mark.skip(reason="quiet: measured alone by `python3 -m pytest -ra -m quiet -n 0`")
    for item in items:
        if item.get_closest_marker("quiet") is not None:
            item.add_marker(skip)
