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
