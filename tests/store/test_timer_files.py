"""TimerLog, TimerWheel and timercheck at the byte level, and the pure timer arithmetic."""

from __future__ import annotations

import struct

import pytest

from rmqtool.errors import StoreError
from rmqtool.layouts.checkpoint import TimerCheckpoint as TimerCheckpointLayout
from rmqtool.layouts.constants import BLANK_MAGIC_CODE
from rmqtool.layouts.timer import TimerLogBlank, TimerLogUnit, TimerSlot
from rmqtool.store.timer.hooks import round_deliver_ms, snap_precision
from rmqtool.store.timer.timercheck import TimerCheckpoint
from rmqtool.store.timer.timerlog import TimerLog, pack_unit
from rmqtool.store.timer.timerstore import roll_target, roll_window_slots
from rmqtool.store.timer.timerwheel import IGNORE, TimerWheel


def test_timerlog_units_are_52_bytes_and_parse_with_the_layout(tmp_path):
    log = TimerLog(tmp_path / "timerlog", 1024)
    log.load()
    p0 = log.append(pack_unit(-1, 1, 1000, 5000, 4096, 300, 123))
    p1 = log.append(pack_unit(p0, 3, 2000, 4000, 8192, 301, -5))
    assert (p0, p1) == (0, 52)
    raw = (tmp_path / "timerlog" / "00000000000000000000").read_bytes()
    assert len(raw) == 1024
    u = TimerLogUnit.parse(raw[52:104])
    assert (u.size, u.prevPos, u.magic, u.currWriteTime, u.delayTime, u.offsetPy, u.sizePy,
            u.hashCodeOfRealTopic, u.reserved) == (52, 0, 3, 2000, 4000, 8192, 301, -5, 0)
    assert log.read_unit(52).delayed_time == 6000


@pytest.mark.parametrize("file_size", [52 * 4 + 16, 200, 104857600 // 1024])
def test_timerlog_blank_at_file_end_then_next_file(tmp_path, file_size):
    log = TimerLog(tmp_path / "timerlog", file_size)
    log.load()
    per_file = (file_size - 16) // 52
    positions = [log.append(pack_unit(-1, 1, 0, 0, i, 100, 0)) for i in range(per_file + 1)]
    assert positions[:per_file] == [52 * i for i in range(per_file)]
    assert positions[per_file] == file_size  # first unit of the second file
    first = (tmp_path / "timerlog" / f"{0:020d}").read_bytes()
    blank = TimerLogBlank.parse(first[52 * per_file: 52 * per_file + 16])
    assert blank.size == file_size - 52 * per_file
    assert struct.unpack(">i", first[52 * per_file + 12: 52 * per_file + 16])[0] == BLANK_MAGIC_CODE
    assert (tmp_path / "timerlog" / f"{file_size:020d}").stat().st_size == file_size


def test_default_timerlog_last_unit_and_blank_positions(tmp_path):
    log = TimerLog(tmp_path / "timerlog", 104857600)
    assert log.offset_for_last_unit() == 104857532  # blank at 104857584


def test_timerlog_refuses_a_file_of_the_wrong_size(tmp_path):
    (tmp_path / "timerlog").mkdir()
    (tmp_path / "timerlog" / f"{0:020d}").write_bytes(b"\0" * 100)
    (tmp_path / "timerlog" / f"{1024:020d}").write_bytes(b"")
    with pytest.raises(StoreError):
        TimerLog(tmp_path / "timerlog", 1024).load()


def test_timerlog_truncate_zeroes_the_tail_and_drops_later_files(tmp_path):
    log = TimerLog(tmp_path / "timerlog", 52 * 2 + 16)
    log.load()
    for i in range(5):
        log.append(pack_unit(-1, 1, 0, 0, i, 1, 0))
    log.truncate_dirty_files(52)
    assert [f.from_offset for f in log.files] == [0]
    assert (tmp_path / "timerlog" / f"{0:020d}").read_bytes()[52:] == bytes(52 * 2 + 16 - 52)
    assert log.append(pack_unit(-1, 1, 0, 0, 9, 1, 0)) == 52


def test_wheel_file_size_and_slot_index_rule(tmp_path):
    wheel = TimerWheel(tmp_path / "timerwheel", 604800, 1000)
    assert (tmp_path / "timerwheel").stat().st_size == 38707200
    t = 1_700_000_123_456
    assert wheel.get_slot_index(t) == (t // 1000) % 1209600
    wheel.put_slot(t, 52, 104, 2, 0)
    wheel.close()
    raw = (tmp_path / "timerwheel").read_bytes()
    s = TimerSlot.parse(raw[wheel.get_slot_index(t) * 32:][:32])
    assert (s.timeSecs, s.firstPos, s.lastPos, s.num, s.magic) == (t // 1000, 52, 104, 2, 0)


def test_wheel_slot_time_is_stored_in_units_of_precision(tmp_path):
    wheel = TimerWheel(tmp_path / "timerwheel", 604800, 100)
    t = 1_700_000_000_250
    wheel.put_slot(t, 0, 0, 1, 0)
    assert wheel.get_slot(t).time_ms == 1_700_000_000_200
    raw = bytes(wheel._map[wheel.get_slot_index(t) * 32:][:8])
    assert struct.unpack(">q", raw)[0] == t // 100


def test_get_slot_ignores_a_slot_from_another_lap_of_the_ring(tmp_path):
    wheel = TimerWheel(tmp_path / "timerwheel", 604800, 1000)
    t = 1_700_000_000_000
    wheel.put_slot(t, 0, 52, 2, 0)
    lap = t + 2 * 604800 * 1000  # same index, two weeks later
    assert wheel.get_slot_index(lap) == wheel.get_slot_index(t)
    assert wheel.get_slot(lap).time_ms == -1
    assert (wheel.get_slot(lap).first_pos, wheel.get_slot(lap).last_pos, wheel.get_slot(lap).num) == (-1, -1, 0)
    assert wheel.get_slot(t + 999).last_pos == 52


def test_revise_slot(tmp_path):
    wheel = TimerWheel(tmp_path / "timerwheel", 604800, 1000)
    t = 1_700_000_000_000
    wheel.revise_slot(t, IGNORE, 104, force=False)
    assert wheel.get_slot(t).time_ms == -1  # not forced: an empty slot stays empty
    wheel.revise_slot(t, IGNORE, 104, force=True)
    s = wheel.get_slot(t)
    assert (s.first_pos, s.last_pos) == (104, 104)
    wheel.revise_slot(t, IGNORE, 208, force=True)
    s = wheel.get_slot(t)
    assert (s.first_pos, s.last_pos) == (104, 208)


def test_wheel_of_the_wrong_length_is_refused(tmp_path):
    (tmp_path / "timerwheel").write_bytes(b"\0" * 64)
    with pytest.raises(StoreError):
        TimerWheel(tmp_path / "timerwheel", 604800, 1000)


def test_timercheck_is_4096_bytes_with_56_bytes_of_fields(tmp_path):
    path = tmp_path / "config" / "timercheck"
    cp = TimerCheckpoint(path)
    cp.value.last_read_time_ms = 1_700_000_001_000
    cp.value.last_timer_log_flush_pos = 520
    cp.value.last_timer_queue_offset = 10
    cp.value.master_timer_queue_offset = 10
    cp.update_data_version(0, 1_700_000_002_000)
    cp.close()
    raw = path.read_bytes()
    assert len(raw) == 4096 and raw[56:] == bytes(4040)
    c = TimerCheckpointLayout.parse(raw)
    assert (c.lastReadTimeMs, c.lastTimerLogFlushPos, c.lastTimerQueueOffset, c.masterTimerQueueOffset,
            c.stateVersion, c.timestamp, c.counter) == (1_700_000_001_000, 520, 10, 10, 0, 1_700_000_002_000, 1)
    assert TimerCheckpoint(path).value.last_timer_queue_offset == 10


@pytest.mark.parametrize("deliver, expected", [
    (1_700_000_005_000, 1_700_000_004_000),  # exact multiple: one precision back
    (1_700_000_005_001, 1_700_000_005_000),
    (1_700_000_005_999, 1_700_000_005_000),
    (1_700_000_004_999, 1_700_000_004_000),
])
def test_rounding_to_precision(deliver, expected):
    assert round_deliver_ms(deliver, 1000) == expected


def test_rounding_with_100ms_precision_and_precision_snapping():
    assert round_deliver_ms(1_700_000_000_300, 100) == 1_700_000_000_200
    assert round_deliver_ms(1_700_000_000_301, 100) == 1_700_000_000_300
    assert [snap_precision(p) for p in (50, 100, 150, 200, 499, 500, 999, 1000, 5000)] == \
        [100, 100, 100, 200, 200, 500, 500, 1000, 1000]


def test_roll_window_and_roll_target():
    assert roll_window_slots(172800) == 172800
    assert roll_window_slots(1) == 604740 and roll_window_slots(604741) == 604740
    w, p, now = 100, 1000, 1_700_000_000_000
    assert roll_target(now + 99_000, now, w, p) == (now + 99_000, False)
    # beyond the window by more than window/3: re-target to the window's end
    assert roll_target(now + 200_000, now, w, p) == (now + 100_000, True)
    # beyond by less than window/3 (33 slots): half the window, leaving room for the next roll
    assert roll_target(now + 120_000, now, w, p) == (now + 50_000, True)
    assert roll_target(now + 100_000, now, w, p) == (now + 50_000, True)


def test_timerlog_files_are_full_size_with_blocks_reserved_a_chunk_ahead(tmp_path, monkeypatch):
    import os

    from rmqtool.store.timer import timerlog

    monkeypatch.setattr(timerlog, "TIMERLOG_RESERVE_AHEAD", 64 << 10)
    log = TimerLog(tmp_path / "timerlog", 4 << 20)
    log.load()
    log.append(pack_unit(-1, 1, 1000, 5000, 4096, 300, 123))
    f = log.files[-1]
    st = os.fstat(f.fd)
    assert st.st_size == 4 << 20 and st.st_blocks * 512 == 64 << 10 == f.reserved
    for i in range(2000):  # 104 KB of units: past the first chunk
        log.append(pack_unit(-1, 1, 1000, 5000, 4096 + i, 300, 123))
    assert f.reserved > log.wrote_position > 64 << 10  # reserved again before the write that needed it
    assert os.fstat(f.fd).st_blocks * 512 >= f.reserved
    log.close()
    again = TimerLog(tmp_path / "timerlog", 4 << 20)
    again.load()
    assert again.files[-1].reserved == 0  # not known after a reopen: the next write reserves from the start
    again.close()
