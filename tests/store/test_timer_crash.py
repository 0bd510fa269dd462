"""kill -9 while timer messages are enqueued and while they are delivered: nothing is lost.

After the restart every delay-level and timer message that reached the CommitLog is delivered
to its real topic at least once, `delayOffset.json` and `config/timercheck` agree with the queues,
and the wheel matches the TimerLog.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from timer_support import T0, Clock, open_env

from rmqtool.layouts.constants import SCHEDULE_TOPIC, TIMER_TOPIC
from rmqtool.store.schedule import decode_delay_offset
from rmqtool.store.timer.check import check_timer_store
from rmqtool.store.timer.timercheck import TimerCheckpoint

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
TIMERLOG_FILE = 52 * 500 + 16


def start_child(root: Path, phase: str, *args: str) -> subprocess.Popen:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(HERE), str(ROOT)]))
    return subprocess.Popen([sys.executable, str(HERE / "timer_crash_child.py"), str(root), phase, *args],
                            stdout=subprocess.PIPE, env=env, text=True)


def kill_after(proc: subprocess.Popen, marker: str, delay: float, *, then: str | None = None) -> None:
    """SIGKILL `delay` s after the child says `marker` (and then `then`, when given)."""
    for expect in (marker, then) if then else (marker,):
        line = proc.stdout.readline().strip()
        assert line == expect, f"child said {line!r}"
    import time

    time.sleep(delay)
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    assert proc.returncode == -signal.SIGKILL


def expected_keys(env) -> set[str]:
    """UNIQ_KEYs of every delayed message that reached the CommitLog before the kill."""
    keys = set()
    for qid in range(18):
        keys |= {m.properties["UNIQ_KEY"] for m in env.delivered(SCHEDULE_TOPIC, qid)}
    keys |= {m.properties["UNIQ_KEY"] for m in env.delivered(TIMER_TOPIC)}
    return keys


def restart_and_check(root: Path, clock_start: int) -> tuple[int, int]:
    """Reopen, deliver everything, check consistency; returns (delivered before restart, expected)."""
    clock = Clock(clock_start)
    env = open_env(root, clock, mapped_file_size_timer_log=TIMERLOG_FILE)
    before = env.store.get_max_offset_in_queue("T", 0)
    want = expected_keys(env)
    cp = env.timer.timer_checkpoint.value
    assert 0 <= cp.last_timer_queue_offset <= env.store.get_max_offset_in_queue(TIMER_TOPIC, 0)
    while clock.now < T0 + 200_000:
        clock.advance(1000)
        env.run()
    got = [m.properties["UNIQ_KEY"] for m in env.delivered("T")]
    missing = want - set(got)
    assert not missing, f"{len(missing)} delayed messages lost, e.g. {sorted(missing)[:5]}"
    # progress files agree with the queues
    table, _ = decode_delay_offset((root / "config" / "delayOffset.json").read_text())
    for level, offset in table.items():
        assert offset == env.store.get_max_offset_in_queue(SCHEDULE_TOPIC, level - 1)
    env.close()
    cp = TimerCheckpoint(root / "config" / "timercheck", read_only=True).value
    assert cp.last_timer_queue_offset == cp.master_timer_queue_offset
    assert cp.last_timer_queue_offset == env.store.get_max_offset_in_queue(TIMER_TOPIC, 0)
    assert cp.last_read_time_ms >= T0 + 62_000  # every slot with a message was passed
    assert list(check_timer_store(root, timerlog_file_size=TIMERLOG_FILE)) == []
    return before, len(want)


@pytest.mark.parametrize("seed", [1, 2])
def test_kill_during_enqueue(tmp_path, seed):
    proc = start_child(tmp_path, "enqueue")
    kill_after(proc, "ready", random.Random(seed).uniform(0.3, 1.2))
    _, expected = restart_and_check(tmp_path, T0)
    assert expected > 100  # the kill landed after a good number of sends


def test_kill_during_dequeue(tmp_path):
    # The child says when a random share of its delivery window has passed, and is killed at
    # once: a fixed delay after "enqueued" missed the delivery entirely on a fast or a loaded machine.
    mid_way = 0
    for seed in range(3):
        root = tmp_path / f"r{seed}"
        frac = random.Random(seed).uniform(0.1, 0.7)
        proc = start_child(root, "dequeue", f"{frac:.3f}")
        kill_after(proc, "enqueued", 0, then="kill-me")
        before, expected = restart_and_check(root, T0 + 40_000)
        mid_way += 0 < before < expected
    assert mid_way >= 2, "the kills did not land while messages were being delivered"
