"""Timer messages end to end on an injectable clock: rewrite, wheel, roll, cancel, delivery, recovery."""

from __future__ import annotations

import pytest
from timer_support import T0, Clock, open_env

from rmqtool.errors import InvalidMessage
from rmqtool.layouts.constants import TIMER_TOPIC
from rmqtool.store.timer.check import check_timer_store

LONG_MAX = str(2**63 - 1)


def run_until(env, end: int, step: int = 100) -> list[int]:
    """Advance the clock to `end` in `step`s; return the times at which something was delivered."""
    hits = []
    while env.clock.now < end:
        env.clock.advance(step)
        if env.run():
            hits.append(env.clock.now)
    return hits


def test_put_rewrites_to_the_timer_topic(tmp_path):
    env = open_env(tmp_path, Clock(T0 + 250))
    m = env.send("T", b"x", TIMER_DELAY_MS="3000", UNIQ_KEY="U").msg
    assert (m.topic, m.queue_id) == (TIMER_TOPIC, 0)
    assert m.properties["TIMER_OUT_MS"] == str(T0 + 3000)  # 3250 floored
    assert (m.properties["REAL_TOPIC"], m.properties["REAL_QID"], m.properties["TIMER_DELAY_MS"]) == ("T", "0", "3000")
    env.close()


@pytest.mark.parametrize("props, out", [
    ({"TIMER_DELIVER_MS": str(T0 + 5000)}, T0 + 4000),  # exact multiple: one precision back
    ({"TIMER_DELIVER_MS": str(T0 + 5001)}, T0 + 5000),
    ({"TIMER_DELIVER_MS": str(T0 + 5999)}, T0 + 5000),
    ({"TIMER_DELAY_SEC": "7"}, T0 + 6000),  # now is T0: T0+7000 is an exact multiple
    ({"TIMER_DELAY_SEC": "7", "TIMER_DELAY_MS": "1"}, T0 + 6000),  # SEC wins over MS
    ({"TIMER_DELAY_MS": "1", "TIMER_DELIVER_MS": str(T0 + 9999)}, T0),  # MS wins over DELIVER
])
def test_rounding_and_key_precedence(tmp_path, props, out):
    env = open_env(tmp_path, Clock(T0))
    assert env.send("T", **props).msg.properties["TIMER_OUT_MS"] == str(out)
    env.close()


@pytest.mark.parametrize("requested", [T0 + 5000, T0 + 5001, T0 + 5999, T0 + 4321])
def test_delivered_at_the_first_precision_boundary_at_or_after_the_request(tmp_path, requested):
    env = open_env(tmp_path, Clock(T0))
    env.send("T", b"x", TIMER_DELIVER_MS=str(requested), UNIQ_KEY="U")
    hits = run_until(env, T0 + 10_000, step=1)  # 1 ms steps
    boundary = -(-requested // 1000) * 1000
    assert hits == [boundary]
    [m] = env.delivered("T")
    assert m.properties["TIMER_ENQUEUE_MS"] == str(T0)
    assert m.properties["TIMER_DEQUEUE_MS"] == str(boundary)
    # the string was built before REAL_TOPIC/REAL_QID left the map, so they are still on disk
    assert (m.properties["REAL_TOPIC"], m.properties["REAL_QID"]) == ("T", "0")
    env.close()


def test_precision_100ms(tmp_path):
    env = open_env(tmp_path, Clock(T0), timer_precision_ms=100)
    env.send("T", TIMER_DELAY_MS="250")
    assert run_until(env, T0 + 1000, step=10) == [T0 + 300]
    env.close()


def test_far_future_is_rejected_with_a_clear_error(tmp_path):
    env = open_env(tmp_path, Clock(T0))
    with pytest.raises(InvalidMessage, match="timerMaxDelaySec"):
        env.send("T", TIMER_DELAY_SEC=str(259200 + 1))
    env.send("T", TIMER_DELAY_SEC="259200")  # exactly 3 days is allowed
    with pytest.raises(InvalidMessage):
        env.send("T", TIMER_DELIVER_MS="soon")
    assert env.store.get_max_offset_in_queue("T", 0) == 0
    env.close()


def test_past_delivery_time_is_stored_unchanged_but_a_past_delete_is_refused(tmp_path):
    env = open_env(tmp_path, Clock(T0))
    m = env.send("T", TIMER_DELIVER_MS=str(T0 - 5)).msg
    assert m.topic == "T" and "TIMER_OUT_MS" not in m.properties
    with pytest.raises(InvalidMessage, match="TIMER_DEL_UNIQKEY"):
        env.send("T", TIMER_DELIVER_MS=str(T0), TIMER_DEL_UNIQKEY="T+abc")
    env.close()


def test_already_due_at_enqueue_skips_the_wheel(tmp_path):
    env = open_env(tmp_path, Clock(T0))
    env.send("T", b"late", TIMER_DELAY_MS="1500", UNIQ_KEY="U")
    env.clock.advance(5000)  # nothing ran meanwhile: the message is due before it is enqueued
    assert env.run() == 1
    [m] = env.delivered("T")
    assert m.properties["TIMER_ENQUEUE_MS"] == LONG_MAX
    assert env.timer.timer_log.wrote_position == 0
    env.close()


def test_wheel_and_timerlog_after_enqueue(tmp_path):
    env = open_env(tmp_path, Clock(T0 + 10))
    r1 = env.send("T", TIMER_DELAY_MS="5000", UNIQ_KEY="A")
    r2 = env.send("Other", TIMER_DELAY_MS="5100", UNIQ_KEY="B")
    env.run()
    slot = env.timer.timer_wheel.get_slot(T0 + 5000)
    assert (slot.first_pos, slot.last_pos, slot.num) == (0, 52, 2)
    u0, u1 = env.timer.timer_log.read_unit(0), env.timer.timer_log.read_unit(52)
    assert (u0.prev_pos, u1.prev_pos) == (-1, 0)
    assert (u1.magic, u1.curr_write_time, u1.delay_time) == (1, T0, 5000)
    assert (u0.offset_py, u0.size_py, u1.offset_py, u1.size_py) == (r1.wrote_offset, r1.wrote_bytes,
                                                                    r2.wrote_offset, r2.wrote_bytes)
    from rmqtool.layouts.javahash import java_string_hash
    assert u1.hash_code_of_real_topic == java_string_hash("Other")
    cp = env.timer.timer_checkpoint.value
    assert (cp.last_timer_queue_offset, cp.master_timer_queue_offset) == (2, 2)
    assert list(check_timer_store(tmp_path)) == []
    env.close()


def test_roll_beyond_the_window(tmp_path):
    env = open_env(tmp_path, Clock(T0), timer_roll_window_slot=10)
    env.send("T", b"far", TIMER_DELIVER_MS=str(T0 + 25_500), UNIQ_KEY="F")
    env.run()
    u = env.timer.timer_log.read_unit(0)
    assert u.magic == 1 | 2 and u.delayed_time == T0 + 10_000  # 15 s beyond: re-targeted to the window end
    hits = run_until(env, T0 + 40_000, step=1000)
    assert hits == [T0 + 26_000]
    [m] = env.delivered("T")
    assert m.properties["TIMER_ROLL_TIMES"] == "2" and m.properties["TIMER_OUT_MS"] == str(T0 + 25_000)
    rolled = env.delivered(TIMER_TOPIC)
    assert len(rolled) == 3 and rolled[1].properties["TIMER_ROLL_TIMES"] == "1"
    assert list(check_timer_store(tmp_path)) == []
    env.close()


def test_cancel_with_timer_del_uniqkey(tmp_path):
    env = open_env(tmp_path, Clock(T0))
    env.send("T", b"keep", TIMER_DELIVER_MS=str(T0 + 3500), UNIQ_KEY="K")
    env.send("T", b"gone", TIMER_DELIVER_MS=str(T0 + 3500), UNIQ_KEY="G")
    env.send("T", b"marker", TIMER_DELIVER_MS=str(T0 + 3500), UNIQ_KEY="M", TIMER_DEL_UNIQKEY="T+G")
    env.send("Other", b"other", TIMER_DELIVER_MS=str(T0 + 3500), UNIQ_KEY="G")  # same key, other topic
    env.run()
    slot = env.timer.timer_wheel.get_slot(T0 + 3000)
    assert slot.num == 3 - 1  # keep, gone, other; minus the marker
    assert env.timer.timer_log.read_unit(104).magic == 1 | 4
    run_until(env, T0 + 10_000)
    assert [m.body for m in env.delivered("T")] == [b"keep"]
    assert [m.body for m in env.delivered("Other")] == [b"other"]
    assert list(check_timer_store(tmp_path)) == []
    env.close()


def test_pending_timers_survive_a_clean_reopen(tmp_path):
    clock = Clock(T0)
    env = open_env(tmp_path, clock)
    for i in range(20):
        env.send("T", b"%d" % i, TIMER_DELAY_MS=str(1000 * (i + 1)), UNIQ_KEY=f"U{i}")
    env.run()
    run_until(env, T0 + 5000)
    env.close()
    env = open_env(tmp_path, clock)
    assert env.timer.curr_queue_offset == 20
    run_until(env, T0 + 30_000)
    assert sorted(int(m.body) for m in env.delivered("T")) == list(range(20))
    env.close()


def test_check_reports_a_broken_chain_and_a_dangling_unit(tmp_path):
    env = open_env(tmp_path, Clock(T0))
    env.send("T", TIMER_DELAY_MS="5000")
    env.send("T", TIMER_DELAY_MS="5000")
    env.run()
    wheel = env.timer.timer_wheel
    s = wheel.get_slot(T0 + 4000)
    wheel.put_slot(T0 + 4000, s.first_pos, s.last_pos, 7, 0)
    log = env.timer.timer_log
    from rmqtool.store.timer.timerlog import pack_unit
    log.append(pack_unit(-1, 1, T0, 9000, 10**9, 200, 0))
    env.close()
    kinds = {(p["file"], p["kind"]) for p in check_timer_store(tmp_path)}
    assert ("timerwheel", "wheel-slot-num-mismatch") in kinds
    assert ("timerlog/00000000000000000000", "timerlog-dangling") in kinds
    assert ("timerlog/00000000000000000000", "timerlog-unit-not-in-slot") not in kinds  # its slot is empty


def test_warmed_slot_is_delivered_once_at_the_boundary(tmp_path):
    env = open_env(tmp_path, Clock(T0))
    env.send("T", b"w", TIMER_DELIVER_MS=str(T0 + 3500), UNIQ_KEY="W")
    assert env.run(T0 + 3800) == 0  # 200 ms before the boundary: read and converted ahead
    assert env.timer._warm is not None and env.timer._warm[0] == T0 + 3000
    assert env.run(T0 + 4000) == 1
    [m] = env.delivered("T")
    assert m.properties["TIMER_DEQUEUE_MS"] == str(T0 + 4000)
    assert env.run(T0 + 9000) == 0
    env.close()


def test_a_cancel_arriving_after_the_slot_was_warmed_still_applies(tmp_path):
    env = open_env(tmp_path, Clock(T0))
    env.send("T", b"keep", TIMER_DELIVER_MS=str(T0 + 3500), UNIQ_KEY="K")
    env.send("T", b"gone", TIMER_DELIVER_MS=str(T0 + 3500), UNIQ_KEY="G")
    env.run(T0 + 3800)
    assert env.timer._warm is not None
    env.clock.now = T0 + 3850
    # still in the future, and floored into the same slot
    env.send("T", b"marker", TIMER_DELIVER_MS=str(T0 + 3900), UNIQ_KEY="M", TIMER_DEL_UNIQKEY="T+G")
    env.run(T0 + 3900)  # enqueued into the warmed slot, which changes its chain
    env.run(T0 + 4000)
    assert [m.body for m in env.delivered("T")] == [b"keep"]
    env.close()


def test_recovery_revises_a_slot_that_missed_its_last_unit(tmp_path):
    """A crash between the TimerLog append and the slot update: the wheel lags the log."""
    from rmqtool.layouts.timer import TIMER_SLOT
    from rmqtool.store.timer.timercheck import TimerCheckpointValue

    clock = Clock(T0)
    env = open_env(tmp_path, clock)
    env.send("T", b"a", TIMER_DELIVER_MS=str(T0 + 5500), UNIQ_KEY="A")
    env.send("T", b"b", TIMER_DELIVER_MS=str(T0 + 5500), UNIQ_KEY="B")
    env.run()
    idx = env.timer.timer_wheel.get_slot_index(T0 + 5000)
    env.close()
    # put the wheel and the checkpoint back to "only A enqueued"
    with open(tmp_path / "timerwheel", "r+b") as f:
        f.seek(idx * 32)
        f.write(TIMER_SLOT.pack((T0 + 5000) // 1000, 0, 0, 1, 0))
    cp = TimerCheckpointValue.unpack((tmp_path / "config" / "timercheck").read_bytes())
    cp.last_timer_queue_offset = cp.master_timer_queue_offset = 1
    with open(tmp_path / "config" / "timercheck", "r+b") as f:
        f.write(cp.pack())
    assert {p["kind"] for p in check_timer_store(tmp_path)} == {"timerlog-unit-not-in-slot"}
    env = open_env(tmp_path, clock)
    slot = env.timer.timer_wheel.get_slot(T0 + 5000)
    assert (slot.first_pos, slot.last_pos) == (0, 52)
    run_until(env, T0 + 10_000)
    assert {m.body for m in env.delivered("T")} == {b"a", b"b"}  # at least once each
    env.close()
    assert list(check_timer_store(tmp_path)) == []


def test_a_failed_delivery_put_is_retried_not_lost(tmp_path):
    from rmqtool.errors import StoreError

    env = open_env(tmp_path, Clock(T0))
    env.send("T", b"a", TIMER_DELIVER_MS=str(T0 + 2500), UNIQ_KEY="A")
    env.run()
    real_put = env.store.put_messages

    def failing(msgs):
        raise StoreError("disk full")

    env.store.put_messages = failing
    assert env.run(T0 + 3000) == 0
    assert env.timer.curr_read_time_ms == T0 + 2000  # the slot is still to do
    env.store.put_messages = real_put
    assert env.run(T0 + 3100) == 1
    assert [m.body for m in env.delivered("T")] == [b"a"]
    env.close()
