"""Embedded `consume`: caught up, `--timeout` (no new message for N seconds) and `--deadline`
(a hard stop with exit 124, said on stderr, only when it cut the read short)."""

from __future__ import annotations

import time

from tests.conftest import run_rmqtool


def test_deadline_cuts_a_follow_short_with_exit_124(tmp_path):
    store = str(tmp_path / "s")
    assert run_rmqtool("send", "--store", store, "L", "a", input="").returncode == 0
    t0 = time.monotonic()
    r = run_rmqtool("consume", "L", "--store", store, "--follow", "--deadline", "2", "--format", "%s", input="")
    assert r.returncode == 124 and "--deadline 2s reached" in r.stderr, r.stderr
    assert r.stdout.split() == ["a"] and time.monotonic() - t0 < 30
    # a read that ended by itself (caught up) before the deadline is not cut: exit 0, nothing said
    r = run_rmqtool("consume", "L", "--store", store, "--from", "first", "--deadline", "60", "--format", "%s",
                    input="")
    assert r.returncode == 0 and r.stdout.split() == ["a"] and r.stderr == "", r.stderr
    r = run_rmqtool("consume", "L", "--store", store, "--from", "first", "--deadline", "0", input="")
    assert r.returncode == 124 and r.stdout == ""


def test_timeout_waits_for_a_due_timer_and_stops_when_idle(tmp_path):
    store = str(tmp_path / "s")
    assert run_rmqtool("send", "--store", store, "W", "later", "--delay-level", "1", input="").returncode == 0
    r = run_rmqtool("consume", "W", "--store", store, "--format", "%s", input="")
    assert r.returncode == 0  # caught up at once, whether or not the timer was due yet
    got = r.stdout.split()
    t0 = time.monotonic()
    r = run_rmqtool("consume", "W", "--store", store, "--timeout", "2", "--format", "%s", input="")
    assert r.returncode == 0 and r.stderr == "", r.stderr
    assert got + r.stdout.split() == ["later"]
    assert time.monotonic() - t0 >= 2


def test_since_is_from_time_and_excludes_from(tmp_path):
    store = str(tmp_path / "s")
    assert run_rmqtool("send", "--store", store, "S", "x", input="").returncode == 0
    r = run_rmqtool("consume", "S", "--store", store, "--since", "2000-01-01T00:00:00Z", "--format", "%s",
                    "--no-commit", input="")
    assert r.returncode == 0 and r.stdout.split() == ["x"]
    r = run_rmqtool("consume", "S", "--store", store, "--since", "4102444800000", "--format", "%s", input="")
    assert r.returncode == 0 and r.stdout == ""
    r = run_rmqtool("consume", "S", "--store", store, "--since", "0", "--from", "first", input="")
    assert r.returncode == 2 and "exclude each other" in r.stderr
