"""Flushed CommitLog pages far behind the write position leave RSS but keep their bytes."""

from __future__ import annotations

from rmqtool.store import mappedfile
from rmqtool.store.mappedfile import MappedFile


def _rss_pages_of(mf: MappedFile) -> int:
    """Resident pages of this mapping, from /proc/self/smaps."""
    with open("/proc/self/smaps") as fh:
        lines = fh.read().splitlines()
    for i, line in enumerate(lines):
        if line.endswith(str(mf.path)):
            for follow in lines[i + 1 : i + 25]:
                if follow.startswith("Rss:"):
                    return int(follow.split()[1]) // 4
    return 0


def test_flush_releases_old_pages_and_data_stays(tmp_path, monkeypatch):
    monkeypatch.setattr(mappedfile, "RELEASE_BEHIND", 1 << 20)
    mf = MappedFile(tmp_path / "00000000000000000000", 8 << 20, create=True)
    try:
        chunk = bytes(range(256)) * 4096  # 1 MiB
        for _ in range(6):
            mf.append(chunk)
        before = _rss_pages_of(mf)
        mf.flush()
        after = _rss_pages_of(mf)
        assert mf.released_position == 5 << 20
        assert after < before
        assert mf.read(0, len(chunk)) == chunk and mf.read(5 << 20, len(chunk)) == chunk
    finally:
        mf.close()


def test_a_consume_queue_keeps_only_a_small_window_and_a_full_file_none(tmp_path):
    from rmqtool.store.consumequeue import ConsumeQueue
    from rmqtool.store.mappedfile import CQ_RELEASE_BEHIND

    cq = ConsumeQueue(tmp_path, "T", 0, 100_000 * 20)
    try:
        cq.put_batch([(i * 100, 100, 0, i) for i in range(100_000)])  # fills the first file
        cq.put_batch([(10**7 + i * 100, 100, 0, 100_000 + i) for i in range(60_000)])
        full, last = cq.mfq.files
        assert _rss_pages_of(full) > 400 and _rss_pages_of(last) > 250
        cq.flush()
        assert _rss_pages_of(full) == 0
        assert _rss_pages_of(last) <= CQ_RELEASE_BEHIND // 4096 + 1
        assert cq.get_unit(5) == (500, 100, 0) and cq.get_unit(159_999) == (10**7 + 59_999 * 100, 100, 0)
    finally:
        cq.close()


def test_an_index_file_releases_old_entries_and_its_slot_table_after_a_flush(tmp_path):
    from rmqtool.store.index import INDEX_RELEASE_BEHIND, IndexFile

    f = IndexFile(tmp_path / "20260101000000000", 100_000, 400_000, create=True)
    try:
        for i in range(200_000):
            f.put_key(f"T#k{i}", i * 100, 1_700_000_000_000, write_header=False)
        f.flush_header()
        before = _rss_pages_of(f)
        assert before > 1000  # 400 KB of slots, 4 MB of entries
        f.flush()
        after = _rss_pages_of(f)
        assert after <= INDEX_RELEASE_BEHIND // 4096 + 2, (before, after)
        out: list[int] = []
        f.select_phy_offsets(out, "T#k123", 10, 0, 2**62)
        assert out == [12300]
    finally:
        f.close()
