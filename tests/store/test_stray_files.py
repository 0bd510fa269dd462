"""A stray file in a mapped-file queue's directory: the engine opens it as MappedFileQueue.doLoad does.

Java's doLoad takes every file of the directory (only subdirectories are skipped): an empty file
that sorts last is deleted, any other stray fails the load. CommitLog and ConsumeQueue
(MappedFileQueue) and TimerLog (Java's TimerLog.load is MappedFileQueue.load) behave the same.
"""

from __future__ import annotations

import pytest

from rmqtool.errors import StoreError
from rmqtool.store.mappedfile import MappedFileQueue
from rmqtool.store.timer.timerlog import TimerLog, pack_unit

SIZE = 1024


def _mfq(d, read_only=False):
    q = MappedFileQueue(d, SIZE, read_only=read_only)
    q.load()
    return [mf.from_offset for mf in q.files]


def _timerlog(d, read_only=False):
    log = TimerLog(d, SIZE, read_only=read_only)
    log.load()
    return [f.from_offset for f in log.files]


LOADERS = pytest.mark.parametrize("load", [_mfq, _timerlog], ids=["MappedFileQueue", "TimerLog"])


def _queue(tmp_path):
    d = tmp_path / "q"
    d.mkdir()
    (d / f"{0:020d}").write_bytes(bytes(SIZE))
    (d / f"{SIZE:020d}").write_bytes(bytes(SIZE))
    return d


@LOADERS
def test_a_stray_file_of_another_size_refuses_the_store(tmp_path, load):
    d = _queue(tmp_path)
    (d / "junk.txt").write_bytes(b"hi")
    with pytest.raises(StoreError, match=r"junk\.txt is 2 bytes, expected 1024") as e:
        load(d)
    assert "\n" not in str(e.value)
    with pytest.raises(StoreError):
        load(d, read_only=True)


@LOADERS
def test_a_full_size_file_without_an_offset_name_refuses_the_store(tmp_path, load):
    d = _queue(tmp_path)
    (d / "copy").write_bytes(bytes(SIZE))  # Java: Long.parseLong throws
    with pytest.raises(StoreError, match=r"copy: the name is not a 20-digit offset"):
        load(d)
    (d / "copy").unlink()
    (d / "2048").write_bytes(bytes(SIZE))  # Java would load it at offset 2048, sorted before 000...
    with pytest.raises(StoreError, match=r"2048: the name is not a 20-digit offset"):
        load(d)


@LOADERS
def test_an_empty_stray_is_deleted_only_when_it_sorts_last(tmp_path, load):
    d = _queue(tmp_path)
    (d / "zzz").write_bytes(b"")
    assert load(d, read_only=True) == [0, SIZE] and (d / "zzz").exists()
    assert load(d) == [0, SIZE] and not (d / "zzz").exists()
    (d / ".keep").write_bytes(b"")  # sorts first: a broker fails on its size
    with pytest.raises(StoreError, match=r"\.keep is 0 bytes, expected 1024"):
        load(d)


@LOADERS
def test_subdirectories_are_skipped_but_count_for_last(tmp_path, load):
    d = _queue(tmp_path)
    (d / "zzz").mkdir()
    assert load(d) == [0, SIZE]
    (d / f"{2 * SIZE:020d}").write_bytes(b"")  # empty, but the subdirectory sorts after it
    with pytest.raises(StoreError, match=r"is 0 bytes, expected 1024"):
        load(d)


def test_timerlog_still_loads_its_files_and_appends(tmp_path):
    d = tmp_path / "timerlog"
    log = TimerLog(d, SIZE)
    log.load()
    log.append(pack_unit(-1, 1, 0, 0, 0, 1, 0))
    log.close()
    assert _timerlog(d) == [0]


def test_send_on_a_store_with_a_stray_timerlog_file_is_one_line_exit_3(tmp_path, rmq):
    store = tmp_path / "store"
    assert rmq("send", "T", "hi", "--store", str(store)).returncode == 0
    (store / "timerlog").mkdir(exist_ok=True)
    (store / "timerlog" / "junk.txt").write_bytes(b"hi")
    r = rmq("send", "T", "hi", "--store", str(store))
    assert r.returncode == 3
    assert r.stderr.decode().strip().splitlines() == [
        "rmqtool: timerlog file junk.txt is 2 bytes, expected 104857600"]
    assert r.stdout == b""
