"""When the timer and delay-level threads next wake: from their state, not a fixed poll.

The services used to poll (every 10 ms, every 100 ms); now each computes its next work
(`next_run_ms`) and arrivals on its topic wake it. These check the computed times on an
injected clock, and that the arrival listeners fire only for their own topic.
"""

from __future__ import annotations

from timer_support import T0, Clock, open_env

from rmqtool.layouts.constants import SCHEDULE_TOPIC, TIMER_TOPIC
from rmqtool.store.schedule import DELAY_FOR_A_WHILE_MS, IDLE_RECHECK_MS
from rmqtool.store.timer.timercheck import TimerCheckpoint


def test_an_idle_timer_service_waits_for_the_next_slot_boundary(tmp_path):
    clock = Clock(T0 + 250)
    env = open_env(tmp_path, clock)
    try:
        env.timer.run_due(clock.now)
        assert env.timer.next_run_ms(clock.now) == T0 + 1000
        env.timer.run_due(clock.advance(750))
        assert env.timer.next_run_ms(clock.now) == T0 + 2000
    finally:
        env.close()


def test_a_loaded_slot_is_warmed_before_its_boundary_then_delivered_at_it(tmp_path):
    clock = Clock(T0 + 250)
    env = open_env(tmp_path, clock)
    try:
        env.send("T", TIMER_DELIVER_MS=str(T0 + 2500))  # slot T0+2000, delivered as the write time passes it
        assert env.timer.run_due(clock.now) == 0
        env.timer.run_due(clock.advance(750))
        env.timer.run_due(clock.advance(1000))  # T0+2000: the message's slot is now the read-time slot
        assert env.timer.next_run_ms(clock.now) == T0 + 3000 - env.timer._warm_ahead_ms
        env.timer.run_due(clock.advance(700))
        assert env.timer._warm is not None
        assert env.timer.next_run_ms(clock.now) == T0 + 3000
        assert env.timer.run_due(clock.advance(300)) == 1
        assert [m.topic for m in env.delivered("T")] == ["T"]
    finally:
        env.close()


def test_a_failed_timer_run_is_retried_after_javas_idle_wait(tmp_path):
    clock = Clock(T0 + 250)
    env = open_env(tmp_path, clock)
    try:
        env.timer.run_due(clock.now)
        env.timer._failed_run = True
        assert env.timer.next_run_ms(clock.now) == clock.now + env.timer.precision_ms // 10
    finally:
        env.close()


def test_arrivals_wake_only_the_service_of_their_topic(tmp_path):
    clock = Clock()
    env = open_env(tmp_path, clock)
    try:
        env.send("Plain")
        assert not env.timer._wake.is_set() and not env.schedule._wake.is_set()
        env.send("T", TIMER_DELAY_SEC="5")
        assert env.timer._wake.is_set() and not env.schedule._wake.is_set()
        env.send("T", DELAY="2")
        assert env.schedule._wake.is_set()
        env.schedule._wake.clear()
        env.schedule.wakeup(TIMER_TOPIC, 0)
        assert not env.schedule._wake.is_set()
    finally:
        env.close()


def test_the_delay_service_waits_for_the_head_message_or_an_arrival(tmp_path):
    clock = Clock()
    env = open_env(tmp_path, clock)
    try:
        env.schedule.run_due(clock.now)
        assert env.schedule.next_run_ms(clock.now) == T0 + IDLE_RECHECK_MS  # nothing pending
        env.send("T", DELAY="1")  # level 1: 1 s
        assert env.schedule.next_run_ms(clock.now) == T0 + DELAY_FOR_A_WHILE_MS  # pending, head unread
        env.schedule.run_due(clock.advance(1))
        assert env.schedule.next_run_ms(clock.now) == T0 + 1000  # the head's delivery time
        assert env.schedule.run_due(clock.advance(998)) == 0
        assert env.schedule.run_due(clock.advance(1)) == 1
        assert env.schedule.next_run_ms(clock.now) == clock.now + IDLE_RECHECK_MS
        assert SCHEDULE_TOPIC not in {m.topic for m in env.delivered("T")}
    finally:
        env.close()


def test_timercheck_write_skips_an_unchanged_value(tmp_path):
    path = tmp_path / "timercheck"
    cp = TimerCheckpoint(path)
    cp.value.last_read_time_ms = T0
    cp.write()
    with open(path, "r+b") as f:  # scribble over the first byte behind the writer's back
        f.write(b"\xff")
    cp.write()  # same value: no rewrite
    assert path.read_bytes()[:1] == b"\xff"
    cp.value.last_read_time_ms = T0 + 1000
    cp.write()
    assert path.read_bytes()[:1] != b"\xff"
    cp.close()
