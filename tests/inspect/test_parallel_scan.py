"""The two-process CommitLog scan gives exactly the sequential scan's problems and summary."""

from __future__ import annotations

import pytest

from rmqtool.inspect import commitlog as C
from rmqtool.inspect.files import queue_files

STORES = ["good", "damaged-torn-tail", "damaged-crc-mismatch", "damaged-bad-magic", "damaged-phys-offset-mismatch",
          "damaged-gap-between-files"]


def _both(files, root):
    r_seq, r_par = C.ScanResult(), C.ScanResult()
    seq = list(C.scan_commitlog(files, root, result=r_seq))
    par = list(C.scan_commitlog_parallel(files, root, result=r_par, jobs=2))
    return (seq, r_seq), (par, r_par)


@pytest.mark.parametrize("name", STORES)
def test_split_by_files_equals_sequential(stores, monkeypatch, name):
    monkeypatch.setattr(C, "PARALLEL_MIN_BYTES", 0)
    root = stores / name
    (seq, r_seq), (par, r_par) = _both(queue_files(root / "commitlog"), root)
    assert par == seq
    assert r_par == r_seq


@pytest.mark.parametrize("name", STORES)
def test_split_inside_one_file_equals_sequential(stores, monkeypatch, name):
    monkeypatch.setattr(C, "PARALLEL_MIN_BYTES", 0)
    root = stores / name
    files = queue_files(root / "commitlog")[:1]
    sync = C._sync_point(files[0], files[0].path.stat().st_size)
    assert sync is not None and sync > 0
    (seq, r_seq), (par, r_par) = _both(files, root)
    assert par == seq
    assert r_par == r_seq


def test_good_store_is_joined_without_the_sequential_fallback(stores, monkeypatch):
    monkeypatch.setattr(C, "PARALLEL_MIN_BYTES", 0)
    calls = []
    real = C.scan_commitlog

    def spy(files, root, **kw):
        calls.append((len(files), kw.get("byte_range")))
        return real(files, root, **kw)

    monkeypatch.setattr(C, "scan_commitlog", spy)
    root = stores / "good"
    files = queue_files(root / "commitlog")[:1]
    list(C.scan_commitlog_parallel(files, root, jobs=2))
    # the child's call happens in the forked process; here only the first half, never a full rescan
    assert len(calls) == 1 and calls[0][1] is not None and calls[0][1][0] == 0
