"""`config/timermetrics`: waiting timer messages per real topic, counted and persisted as the broker does."""

from __future__ import annotations

import json

from timer_support import T0, Clock, open_env

from rmqtool.store.timer.timermetrics import TimerMetrics, concurrent_hash_map_order


def counts(root) -> dict[str, int]:
    data = json.loads((root / "config" / "timermetrics").read_text())
    return {t: m["count"] for t, m in data["timingCount"].items()}


def test_counts_follow_enqueue_delivery_cancel_and_roll(tmp_path):
    env = open_env(tmp_path, Clock(T0), timer_roll_window_slot=10)
    for i in range(5):
        env.send("A", b"a", TIMER_DELIVER_MS=str(T0 + 3000 + 1000 * i), UNIQ_KEY=f"A{i}")
    env.send("B", b"far", TIMER_DELIVER_MS=str(T0 + 25_000), UNIQ_KEY="B0")  # rolled once at the window end
    env.send("B", b"gone", TIMER_DELIVER_MS=str(T0 + 4000), UNIQ_KEY="B1")
    env.send("B", b"marker", TIMER_DELIVER_MS=str(T0 + 4000), UNIQ_KEY="M", TIMER_DEL_UNIQKEY="B+B1")
    env.send("C", b"due", TIMER_DELIVER_MS=str(T0 - 5000), UNIQ_KEY="C0")  # due on arrival: never counted
    env.run()
    assert env.timer.timer_metrics.count("A") == 5
    assert env.timer.timer_metrics.count("B") == 1  # far + gone - marker
    assert env.timer.timer_metrics.count("C") == 0
    env.clock.advance(1000)
    env.run()  # a flush: the file is written
    assert counts(tmp_path) == {"A": 5, "B": 1}
    while env.clock.now < T0 + 8000:
        env.clock.advance(1000)
        env.run()
    assert env.timer.timer_metrics.count("A") == 0
    assert env.timer.timer_metrics.count("B") == 1  # the rolled message still waits
    while env.clock.now < T0 + 30_000:
        env.clock.advance(1000)
        env.run()
    assert [m.body for m in env.delivered("B")] == [b"far"]
    env.close()
    assert counts(tmp_path) == {"A": 0, "B": 0}
    text = (tmp_path / "config" / "timermetrics").read_text()
    assert text.startswith('{"dataVersion":{"counter":') and '"timingCount":{' in text and "\n" not in text


def test_counts_survive_a_restart(tmp_path):
    clock = Clock(T0)
    env = open_env(tmp_path, clock)
    for i in range(7):
        env.send("T", b"x", TIMER_DELAY_MS=str(60_000), UNIQ_KEY=f"U{i}")
    env.run()
    env.close()
    env = open_env(tmp_path, clock)
    assert env.timer.timer_metrics.count("T") == 7
    while clock.now < T0 + 62_000:
        clock.advance(1000)
        env.run()
    assert env.timer.timer_metrics.count("T") == 0
    env.close()


def test_file_text_is_fastjson_compact_in_concurrent_hash_map_order(tmp_path):
    m = TimerMetrics(tmp_path)
    for topic in ("TopicTest", "Orders", "a"):
        m.add(topic, 2, 1_700_000_000_000)
    m.persist()
    order = concurrent_hash_map_order(["TopicTest", "Orders", "a"])
    assert list(json.loads((tmp_path / "timermetrics").read_text())["timingCount"]) == order
    assert (tmp_path / "timermetrics").read_text() == (
        '{"dataVersion":{"counter":3,"stateVersion":0,"timestamp":1700000000000},"timingCount":{'
        + ",".join(f'"{t}":{{"count":2,"timeStamp":1700000000000}}' for t in order) + "}}")
    again = TimerMetrics(tmp_path)
    assert again.load() and again.count("Orders") == 2 and again.data_version.counter == 3


def test_concurrent_hash_map_order_is_javas():
    # printed by Java 17: new ConcurrentHashMap<>(1024), these puts in this order, then keySet()
    keys = ["Orders", "TopicTest", "a", "zzz", "TopicTest2", "%RETRY%g1"]
    assert concurrent_hash_map_order(keys) == ["a", "TopicTest", "%RETRY%g1", "zzz", "Orders", "TopicTest2"]
