"""The put path's columnar frame to the index process (store/indexframe.py) and the child's
reading of it (indexproc.FrameReader, coalescing frames of one store time): the same index
keys as the pickled columns, and the same index files as in-process indexing."""

from __future__ import annotations

import os
import pickle
import struct
from pathlib import Path

import pytest

from rmqtool.store import indexproc
from rmqtool.store.dispatch import build_index_columns
from rmqtool.store.index import IndexService
from rmqtool.store.indexframe import KIND, decode_columns, encode_columns, frame_timestamp
from rmqtool.store.indexproc import FrameReader, _index_frames
from rmqtool.store.messagestore import MessageStore
from tests.store.conftest import Clock, make_msg, small_config

TS = 1_700_000_000_123


def _none_as_empty(items):
    return [s or "" for s in items]


@pytest.mark.parametrize("topics, uniqs, texts", [
    (["T"] * 3, ["u1", "u2", "u3"], ["k1", "k2", "k3"]),
    (["T"] * 3, [None, "u2", None], ["k1", None, "a b  c"]),  # None keys, several KEYS tokens
    (["T", "Other", "T"], ["u1", "u2", "u3"], ["k1", "k2", "k3"]),  # several topics in one frame
    (["Tö", "主题", "Tö"], ["ü1", "唯一", ""], ["ключ", "k2", "€ x"]),  # non-ASCII everywhere
    (["T"], [None], [None]),
])
def test_a_frame_gives_back_the_columns_with_none_as_empty(topics, uniqs, texts):
    phys = [0, 4096, 1 << 40][: len(topics)]
    frame = encode_columns(topics, TS, phys, uniqs, texts)
    assert frame is not None and frame[0] == KIND and frame_timestamp(frame) == TS
    assert decode_columns(frame) == (topics, TS, phys, _none_as_empty(uniqs), _none_as_empty(texts))


@pytest.mark.parametrize("topics, uniqs, texts", [
    (["T", "T"], ["u1", "u\x002"], ["k1", "k2"]),  # '\x00' would add an item: pickled instead
    (["T", "T"], ["u1", "u2"], ["k\x00", "k2"]),
    (["T", "T\x00x"], ["u1", "u2"], ["k1", "k2"]),
    (["T", "T"], ["u1", "\udc80"], ["k1", "k2"]),  # a lone surrogate is no UTF-8
    (["T\udc80", "T\udc80"], ["u1", "u2"], ["k1", "k2"]),
])
def test_values_a_frame_cannot_hold_make_it_none(topics, uniqs, texts):
    assert encode_columns(topics, TS, [1, 2], uniqs, texts) is None


def _batches() -> list[tuple[list[str], int, list[int], list[str | None], list[str | None]]]:
    """Appended batches' columns: runs of one store time, key mixes of every path."""
    out, phy = [], 0
    for b in range(12):
        ts = TS + 1000 * (b // 3)  # three batches per store time
        n = 5 + b
        topics = ["TopicTest" if (b + i) % 4 else "Other" for i in range(n)] if b % 5 == 2 else ["TopicTest"] * n
        uniqs = [None if i % 7 == 3 and b % 2 else f"UNIQ{b}-{i}" for i in range(n)]
        texts = [f"k{b}-{i} c{i}" if i % 6 == 1 else (None if i % 9 == 4 else f"k{b}-{i}") for i in range(n)]
        phys = list(range(phy, phy + 100 * n, 100))
        phy += 100 * n
        out.append((topics, ts, phys, uniqs, texts))
    return out


def _files(directory: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(directory.iterdir())}


def test_coalesced_frames_write_the_files_of_one_call_per_batch(tmp_path, monkeypatch):
    batches = _batches()
    ref = IndexService(tmp_path / "ref", 16, 40)  # small files: several roll-overs
    for cols in batches:
        build_index_columns(ref, *cols)
    ref.flush()
    ref.close()
    calls: list[int] = []
    real = indexproc.build_index_columns

    def counting(service, topics, *rest):
        calls.append(len(topics))
        real(service, topics, *rest)

    monkeypatch.setattr(indexproc, "build_index_columns", counting)
    frames = [encode_columns(*cols) for cols in batches]
    assert all(frames)
    got = IndexService(tmp_path / "got", 16, 40)
    i, done = 0, 0
    while i < len(frames):
        i, done = _index_frames(got, frames, i)  # type: ignore[arg-type]
    got.flush()
    got.close()
    assert done == batches[-1][2][-1] + 1
    assert calls == [sum(len(b[2]) for b in batches[k : k + 3]) for k in range(0, 12, 3)]  # one per store time
    assert _files(tmp_path / "got") == _files(tmp_path / "ref")


@pytest.mark.parametrize("buffer_size", [1 << 20, 64])  # 64: moved to the front and grown for big frames
def test_the_reader_takes_every_frame_however_the_pipe_splits_them(monkeypatch, buffer_size):
    monkeypatch.setattr(indexproc, "READ_SIZE", buffer_size)
    frames = [encode_columns(["T"] * n, TS + n, list(range(n)), [f"u{i}" for i in range(n)], [None] * n)
              for n in (1, 300, 7, 2)]
    frames.append(pickle.dumps(("q", 1, "T", "k", 5, 0, 1), pickle.HIGHEST_PROTOCOL))
    wire = b"".join(struct.pack("!i", len(f)) + f for f in frames)  # type: ignore[arg-type]
    r, w = os.pipe()
    try:
        reader, got, sent = FrameReader(r), [], 0
        for cut in (3, 4, 40, 1000, 1001, len(wire)):  # in a length prefix, at a frame's start, in a frame
            os.write(w, wire[sent:cut])
            sent = cut
            while (more := reader.read(0.05)) is not None:  # everything waiting, however many reads it takes
                got += more
        assert got == frames
        os.close(w)
        w = -1
        with pytest.raises(EOFError):
            reader.read(1.0)
    finally:
        os.close(r)
        if w >= 0:
            os.close(w)


def _odd_messages(first: int, n: int) -> list:
    """Keys the frame has to carry or refuse: non-ASCII, '\\x00', None, several topics in one batch."""
    out = []
    for i in range(first, first + n):
        m = make_msg(i, topic="Other" if i % 5 == 2 else "TopicTest", queue_id=i % 2)
        if i % 4 == 1:
            m.properties["KEYS"] = f"ключ{i} 键{i}"
            m.properties["UNIQ_KEY"] = f"ü{i:06d}"
        elif i % 9 == 4:
            m.properties["KEYS"] = f"nul\x00{i}"  # the put path takes it: this batch goes pickled
        elif i % 6 == 3:
            del m.properties["UNIQ_KEY"]
        out.append(m)
    return out


def _put_all(store: MessageStore, clock: Clock) -> None:
    i = 0
    for r in range(16):
        clock.now += 300
        for _ in range(1 + r % 3):  # batches of one store time, for the child to coalesce
            assert all(res.ok for res in store.put_messages(_odd_messages(i, 9)))
            i += 9


def test_odd_keys_through_the_child_give_the_in_process_index_files(tmp_path):
    cfg = small_config(max_hash_slot_num=32, max_index_num=128)
    clock = Clock()
    with MessageStore.open(tmp_path / "inproc", cfg, clock=clock) as store:
        _put_all(store, clock)
    clock = Clock()
    with MessageStore.open(tmp_path / "proc", cfg, clock=clock) as store:
        assert store.start_index_process()
        _put_all(store, clock)
        assert [m.uniq_key for m in store.query_message("TopicTest", "键1")] == ["ü000001"]
        assert [m.queue_offset >= 0 for m in store.query_message("TopicTest", "nul\x004")] == [True]
        assert store.index.fallback is None
    want, got = _files(tmp_path / "inproc" / "index"), _files(tmp_path / "proc" / "index")
    assert len(want) > 2
    assert got == want
