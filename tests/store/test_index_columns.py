"""The index's column writes (indexbatch.py `_put_distinct`: every key of a run in a slot of
its own, the slots read and written by one map each, the entries packed at once) write the
files one `build_index` per record writes, byte for byte: records with a UNIQ_KEY and no KEYS
(a Java producer's batch without keys, `build_index_batch`), with one KEYS token
(`build_index_usual`), with many slots (the column path) and few (shared slots: the per-key
loop), and with a stale slot value past the file's count (a crash's leftover: the loop's rule)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from rmqtool.layouts.constants import INDEX_HEADER_SIZE, INDEX_SLOT_SIZE
from rmqtool.store import indexbatch
from rmqtool.store.dispatch import build_index_columns
from rmqtool.store.index import IndexService

_HEX = "0123456789ABCDEF"
_batch = st.lists(st.tuples(st.text(_HEX, min_size=4, max_size=4), st.text("k0123456789", min_size=1, max_size=3)),
                  min_size=1, max_size=40)


def _files(directory) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(directory.iterdir())}


def _uniq(u: str) -> str:
    return "7F0000013DF218B4AAC20000" + u + "0000"  # MessageClientIDSetter's shape: 32 hex digits


@settings(max_examples=40, deadline=None)
@given(batches=st.lists(_batch, min_size=1, max_size=5), slots=st.sampled_from([3, 17, 4099]),
       entries=st.sampled_from([40, 400, 4000]), with_keys=st.booleans(), stale=st.integers(-5, 5000))
def test_column_runs_write_what_one_record_at_a_time_writes(tmp_path_factory, batches, slots, entries, with_keys,
                                                            stale):
    one_dir, cols_dir = tmp_path_factory.mktemp("one"), tmp_path_factory.mktemp("cols")
    one, cols = IndexService(one_dir, slots, entries), IndexService(cols_dir, slots, entries)
    phy, ts = 0, 1_700_000_000_000
    for n, batch in enumerate(batches):
        uniqs = [_uniq(u) for u, _ in batch]
        texts = [k if with_keys else None for _, k in batch]
        phys = [phy + 100 * i for i in range(len(batch))]
        for p, u, k in zip(phys, uniqs, texts, strict=True):
            one.build_index("T", p, ts, u, k, ts)
        build_index_columns(cols, ["T"] * len(batch), ts, phys, uniqs, texts)
        if n == 0:  # a slot holding a value it should not (negative, or past the count): both read it
            for service in (one, cols):
                f = service.files[-1]
                f.mm[INDEX_HEADER_SIZE + 2 * INDEX_SLOT_SIZE : INDEX_HEADER_SIZE + 3 * INDEX_SLOT_SIZE] = (
                    stale.to_bytes(4, "big", signed=True))
        phy += 100 * len(batch)
        ts += 1500
    one.close()
    cols.close()
    assert _files(one_dir) == _files(cols_dir)


def test_a_java_batch_without_keys_takes_the_column_path(tmp_path, monkeypatch):
    """32 UNIQ_KEYs and no KEYS into a file of many slots: one column run, the same files."""
    runs = []
    put = indexbatch._put_distinct

    def counting(*args):
        done = put(*args)
        runs.append(done)
        return done

    monkeypatch.setattr(indexbatch, "_put_distinct", counting)
    one, cols = IndexService(tmp_path / "one", 5_000_000 // 64, 20_000), IndexService(tmp_path / "cols",
                                                                                     5_000_000 // 64, 20_000)
    phy, ts = 0, 1_700_000_000_000
    for b in range(6):
        uniqs = [_uniq(f"{b * 32 + i:04X}") for i in range(32)]
        phys = [phy + 1200 * i for i in range(32)]
        for p, u in zip(phys, uniqs, strict=True):
            one.build_index("Topic", p, ts, u, None, ts)
        build_index_columns(cols, ["Topic"] * 32, ts, phys, uniqs, [None] * 32)
        phy += 1200 * 32
        ts += 7
    one.close()
    cols.close()
    assert _files(tmp_path / "one") == _files(tmp_path / "cols")
    assert runs.count(True) == 5  # all but the first batch, which starts the file
