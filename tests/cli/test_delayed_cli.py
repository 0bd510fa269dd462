"""`rmqtool send --delay-level/--delay` then `rmqtool consume`, embedded, no server running."""

from __future__ import annotations

import json
import time


def test_send_delay_level_sleep_consume(tmp_path, rmq):
    store = str(tmp_path / "store")
    r = rmq("send", "T", "hi", "--delay-level", "1", "--store", store)
    assert r.returncode == 0, r.stderr
    r = rmq("send", "T", "later", "--delay", "1s", "--store", store)
    assert r.returncode == 0, r.stderr
    r = rmq("send", "T", "never", "--delay", "1h", "--store", store)
    assert r.returncode == 0, r.stderr
    time.sleep(2)
    r = rmq("consume", "T", "--store", store, "--timeout", "3")
    assert r.returncode == 0, r.stderr
    got = [json.loads(line) for line in r.stdout.splitlines()]
    assert sorted(m["body"] for m in got) == ["hi", "later"]
    level = next(m for m in got if m["body"] == "hi")
    assert level["properties"]["DELAY"] == "1" and level["properties"]["REAL_TOPIC"] == "T"
    timer = next(m for m in got if m["body"] == "later")
    assert "TIMER_DEQUEUE_MS" in timer["properties"]


def test_timer_beyond_max_delay_is_refused_with_exit_2(tmp_path, rmq):
    r = rmq("send", "T", "x", "--delay", "4d", "--store", str(tmp_path / "store"))
    assert r.returncode == 2
    assert b"timerMaxDelaySec" in r.stderr
