"""The recovery scan on more than one core (store/scanparallel.py) answers what one core answers:
the same processOffset and the same records dispatched, whatever the damage and wherever the
stretches are cut, true record boundaries or not."""

from __future__ import annotations

import shutil

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rmqtool.store import scanparallel
from rmqtool.store.commitlog import CommitLog
from rmqtool.store.messagestore import MessageStore
from tests.store.conftest import make_msg, small_config

FILE = 64 * 1024


@pytest.fixture(scope="module")
def log_dir(tmp_path_factory):
    """About 6 CommitLog files of records from 60 bytes of body to 3 KiB (blanks close each file)."""
    root = tmp_path_factory.mktemp("scan") / "store"
    with MessageStore.open(root, small_config()) as store:
        for i in range(220):
            store.put_message(make_msg(i, queue_id=i % 3, body_size=60 + (i * 397) % 3000))
    return root / "commitlog"


def _open(d) -> CommitLog:
    cl = CommitLog(d, FILE)
    cl.load()
    return cl


def _damaged(log_dir, tmp_path, flips) -> CommitLog:
    d = tmp_path / "commitlog"
    shutil.rmtree(d, ignore_errors=True)
    shutil.copytree(log_dir, d)
    files = sorted(d.iterdir())
    for where, value in flips:
        f = files[(where // FILE) % len(files)]
        data = bytearray(f.read_bytes())
        data[where % FILE] = value
        f.write_bytes(bytes(data))
    return _open(d)


def _scan(cl: CommitLog, *, parallel: bool, check_crc: bool, dispatch_from: int | None,
          monkeypatch, points=None) -> tuple[int, list[int]]:
    seen: list[int] = []
    with monkeypatch.context() as m:
        if parallel:
            m.setattr(scanparallel, "PARALLEL_SCAN_MIN", 0)
            m.setattr(scanparallel, "scan_jobs", lambda: 3)
            if points is not None:
                m.setattr(scanparallel, "_split", lambda _cl, _s, _e, _j: points)
        else:
            m.setattr(scanparallel, "PARALLEL_SCAN_MIN", 1 << 62)
        end = cl.scan_valid(0, check_crc=check_crc, on_record=None if dispatch_from is None else
                            (lambda _mv, _pos, off: seen.append(off)), dispatch_from=dispatch_from or 0)
    return end, seen


def _both(cl, monkeypatch, **kw):
    one = _scan(cl, parallel=False, monkeypatch=monkeypatch, **kw)
    many = _scan(cl, parallel=True, monkeypatch=monkeypatch, **kw)
    return one, many


def test_the_whole_log_checked_in_stretches_ends_where_one_core_ends(log_dir, monkeypatch):
    cl = _open(log_dir)
    assert len(cl.mfq.files) >= 5
    joined = []
    real = scanparallel.scan_ahead

    def spy(*a):
        joined.append(real(*a))
        return joined[-1]

    monkeypatch.setattr("rmqtool.store.commitlog.scan_ahead", spy)
    for dispatch_from in (None, 3 * FILE + 100, 0):
        one, many = _both(cl, monkeypatch, check_crc=True, dispatch_from=dispatch_from)
        assert one == many
        assert one[0] > 5 * FILE
    # split twice (3 jobs), joined up to the log's end, and not tried where everything is dispatched
    joined = [j for j in joined if j is not None]
    assert joined[0] == one[0] and joined[1] >= 3 * FILE + 100 and len(joined) == 2
    assert _split_points(cl)


def _split_points(cl):
    return scanparallel._split(cl, 0, cl.mfq.files[-1].from_offset + FILE, 3)


def test_sync_points_are_record_starts(log_dir):
    cl = _open(log_dir)
    points = _split_points(cl)
    assert len(points) == 2
    starts = []
    cl.scan_range(0, check_crc=True, on_record=lambda _mv, _pos, off: starts.append(off))
    assert set(points) <= set(starts)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(flips=st.lists(st.tuples(st.integers(0, 6 * FILE), st.integers(0, 255)), max_size=3),
       points=st.lists(st.integers(1, 6 * FILE), max_size=3, unique=True).map(sorted),
       check_crc=st.booleans(), dispatch_from=st.sampled_from([None, 2 * FILE, 5 * FILE + 7]))
def test_any_damage_and_any_cut_give_the_one_core_answer(log_dir, tmp_path, monkeypatch, flips, points, check_crc,
                                                          dispatch_from):
    """Cuts at arbitrary offsets (most of them not record starts: false sync points) and bytes
    changed anywhere: the joined answer and the records dispatched are the sequential ones."""
    cl = _damaged(log_dir, tmp_path, flips)
    try:
        one, many = (_scan(cl, parallel=False, check_crc=check_crc, dispatch_from=dispatch_from,
                           monkeypatch=monkeypatch),
                     _scan(cl, parallel=True, check_crc=check_crc, dispatch_from=dispatch_from,
                           monkeypatch=monkeypatch, points=points))
        assert one == many
    finally:
        cl.mfq.close()


def test_a_child_that_fails_costs_only_time(log_dir, monkeypatch):
    cl = _open(log_dir)
    monkeypatch.setattr(scanparallel, "_answer", lambda pid, fd: (scanparallel._reap(pid), None)[1])
    one, many = _both(cl, monkeypatch, check_crc=True, dispatch_from=None)
    assert one == many


def test_recovery_after_a_crash_uses_the_stretches(tmp_path, monkeypatch):
    """A store copied while open (kill -9), recovered with the check split: the same log end,
    queues and keys as the one-core recovery."""
    cfg = small_config(max_index_num=4096, max_hash_slot_num=512)
    root = tmp_path / "store"
    store = MessageStore.open(root, cfg)
    try:
        for i in range(150):
            store.put_message(make_msg(i, queue_id=i % 2, body_size=1500))
        store.flush()
        for i in range(150, 153):
            store.put_message(make_msg(i, queue_id=i % 2, body_size=1500))
        for name in ("one", "many"):
            shutil.copytree(root, tmp_path / name, ignore=shutil.ignore_patterns("lock"))
    finally:
        store.close()
    ends = {}
    joined = []
    real = scanparallel.scan_ahead
    monkeypatch.setattr("rmqtool.store.commitlog.scan_ahead", lambda *a: joined.append(real(*a)) or joined[-1])
    for name in ("one", "many"):
        with monkeypatch.context() as m:
            m.setattr(scanparallel, "PARALLEL_SCAN_MIN", 1 << 62 if name == "one" else 0)
            m.setattr(scanparallel, "scan_jobs", lambda: 2)
            with MessageStore.open(tmp_path / name, cfg) as s:
                ends[name] = (s.max_phy_offset, [s.get_max_offset_in_queue("TopicTest", q) for q in (0, 1)],
                              [len(s.query_message("TopicTest", f"key{i}", 5, 0, 2**62)) for i in range(153)])
    assert ends["one"] == ends["many"]
    assert joined[0] is None and joined[1] is not None and len(joined) == 2
    assert ends["one"][1] == [77, 76] and ends["one"][2] == [1] * 153
