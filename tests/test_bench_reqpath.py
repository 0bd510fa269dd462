"""benchmarks/reqpath.py: serve's request path in one process, with and without caches evicted between requests."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _run(*args: str) -> str:
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    out = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "reqpath.py"), *args], capture_output=True,
                         text=True, timeout=120, env=env)
    assert out.returncode == 0, out.stderr
    return out.stderr


def test_each_request_can_be_timed_after_the_caches_were_pushed_out():
    text = _run("send", "40", "--evict", "256")
    m = re.search(r"send: 40 requests, ([\d.]+) µs of CPU per request \(each after 256 KiB written elsewhere", text)
    assert m is not None, text
    assert float(m.group(1)) > 0


def test_without_evict_the_whole_run_is_timed_as_before():
    text = _run("batch", "4")
    assert re.search(r"batch: 4 requests, [\d.]+ µs of CPU per request, [\d.]+ µs per message$", text.strip()), text


def test_calls_counts_the_functions_a_request_enters():
    text = _run("send", "40", "--calls")
    m = re.search(r"send: 40 requests, per request \(median of the later half\): (\d+) distinct Python functions, "
                  r"(\d+) distinct C functions, (\d+) calls", text)
    assert m is not None, text
    py, c, calls = map(int, m.groups())
    assert py > 10 and c > 5 and calls >= py + c  # a send goes through frame decode, handler, store, answer


def test_the_ceiling_s_handler_enters_fewer_functions_than_a_stored_send():
    def py_functions(*args: str) -> int:
        m = re.search(r"(\d+) distinct Python functions", _run("send", "40", "--calls", *args))
        assert m is not None
        return int(m.group(1))

    assert py_functions("--ceiling") < py_functions()
