"""The one timer consistency check (`rmqtool.store.timer.check`, also behind `verify`) on damaged stores."""

from __future__ import annotations

import random
import struct

from timer_support import T0, Clock, open_env

from rmqtool.layouts.constants import TIMERLOG_UNIT_SIZE
from rmqtool.store.mappedfile import offset_files
from rmqtool.store.timer.check import check_timer_store, iter_timerlog

LOG0 = "timerlog/00000000000000000000"


def _two_in_one_slot(root):
    env = open_env(root, Clock(T0))
    env.send("T", b"a", TIMER_DELAY_MS="5000", UNIQ_KEY="A")
    env.send("T", b"b", TIMER_DELAY_MS="5000", UNIQ_KEY="B")
    env.run()
    env.close()
    assert list(check_timer_store(root)) == []


def _patch(path, pos: int, data: bytes) -> None:
    with open(path, "r+b") as f:
        f.seek(pos)
        f.write(data)


def test_a_prev_pos_pointing_forward_is_reported_on_the_unit_and_the_slot(tmp_path):
    _two_in_one_slot(tmp_path)
    _patch(tmp_path / LOG0, TIMERLOG_UNIT_SIZE + 4, struct.pack(">q", TIMERLOG_UNIT_SIZE))  # unit 2 -> itself
    got = {(p["file"], p["pos"], p["kind"]) for p in check_timer_store(tmp_path)}
    assert (LOG0, TIMERLOG_UNIT_SIZE, "timerlog-bad-prev") in got
    assert any(f == "timerwheel" and k == "wheel-chain-loop" for f, _, k in got)


def test_a_wrong_real_topic_hash_and_a_wrong_size_py_are_bad_targets(tmp_path):
    _two_in_one_slot(tmp_path)
    _patch(tmp_path / LOG0, 40, struct.pack(">i", 12345))  # hashCodeOfRealTopic of unit 1
    _patch(tmp_path / LOG0, TIMERLOG_UNIT_SIZE + 36, struct.pack(">i", 77))  # sizePy of unit 2
    got = [(p["pos"], p["kind"], p["detail"]) for p in check_timer_store(tmp_path) if p["file"] == LOG0]
    assert [(pos, kind) for pos, kind, _ in got] == [(0, "timerlog-bad-target"), (52, "timerlog-bad-target")]
    assert "REAL_TOPIC hash 12345" in got[0][2] and "sizePy 77" in got[1][2]


def test_a_bad_unit_ends_the_scan_like_recovery(tmp_path):
    _two_in_one_slot(tmp_path)
    _patch(tmp_path / LOG0, TIMERLOG_UNIT_SIZE + 12, struct.pack(">i", 0x40))  # magic with a non-flag bit
    problems: list = []
    units = list(iter_timerlog(offset_files(tmp_path / "timerlog"), problems=problems))
    assert [u.offset for u in units] == [0]
    assert [(p["pos"], p["kind"]) for p in problems] == [(TIMERLOG_UNIT_SIZE, "timerlog-bad-unit")]
    kinds = {p["kind"] for p in check_timer_store(tmp_path)}
    assert {"timerlog-bad-unit", "wheel-chain-broken"} <= kinds


def test_garbage_in_the_timer_files_is_reported_never_raised(tmp_path):
    _two_in_one_slot(tmp_path)
    log = (tmp_path / LOG0).read_bytes()[:4096]
    rng = random.Random(7)
    for _ in range(40):
        data = bytearray(log)
        for _ in range(rng.randint(1, 6)):
            at = rng.randrange(0, 3 * TIMERLOG_UNIT_SIZE)
            data[at : at + 8] = rng.randbytes(8)
        _patch(tmp_path / LOG0, 0, bytes(data))
        for p in check_timer_store(tmp_path):
            assert set(p) == {"file", "pos", "kind", "detail"}
            assert isinstance(p["pos"], int) and p["pos"] >= 0 and p["detail"]


def test_offset_files_take_what_mapped_file_queue_load_takes(tmp_path):
    """The one listing behind inspect and the timer check: regular files with 20-digit names, by offset."""
    d = tmp_path / "q"
    d.mkdir()
    for name in ("00000000000000001024", "00000000000000000000", "0", "000000000000000000001",
                 "00000000000000000000.tmp", "\u00b2" * 20):
        (d / name).write_bytes(b"")
    (d / "00000000000000002048").mkdir()
    assert [(f.name, f.base) for f in offset_files(d)] == [("00000000000000000000", 0),
                                                            ("00000000000000001024", 1024)]
    assert offset_files(tmp_path / "missing") == [] and offset_files(d / "0") == []


def test_the_timer_check_ignores_files_that_are_not_timerlog_files(tmp_path):
    """A stray digit-named file in timerlog/ is not a TimerLog file (it once crashed or was scanned)."""
    _two_in_one_slot(tmp_path)
    (tmp_path / "timerlog" / "7").write_bytes(b"\x01" * 100)
    (tmp_path / "timerlog" / ("\u00b2" * 3)).write_bytes(b"")
    assert list(check_timer_store(tmp_path)) == []
