"""`IndexService.build_index_usual` (a pair of entries per record, keys hashed in columns)
writes the index files `build_index` writes one record at a time, byte for byte."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from rmqtool.store.dispatch import build_index_columns
from rmqtool.store.index import IndexService

_HEX = "0123456789ABCDEF"
_batch = st.lists(st.tuples(st.text(_HEX, min_size=2, max_size=2), st.text("k0123456789", min_size=1, max_size=3)),
                  min_size=1, max_size=30)


def _files(directory) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(directory.iterdir())}


@settings(max_examples=60, deadline=None)
@given(batches=st.lists(_batch, min_size=1, max_size=5), slots=st.sampled_from([1, 3, 17]),
       entries=st.sampled_from([7, 40, 400]), spaced=st.booleans())
def test_usual_batches_write_what_one_record_at_a_time_writes(tmp_path_factory, batches, slots, entries, spaced):
    """Few slots make both keys of a record share one (and chains long); few entries make a
    batch fill a file and go on in the next (the per-record path then); `spaced` puts a KEYS
    value with two tokens in, which the columns hand to `build_index_batch`."""
    one_dir, usual_dir = tmp_path_factory.mktemp("one"), tmp_path_factory.mktemp("usual")
    one, usual = IndexService(one_dir, slots, entries), IndexService(usual_dir, slots, entries)
    phy, ts = 0, 1_700_000_000_000
    for batch in batches:
        uniqs = ["7F0000010000" + "2A9F0000" * 2 + u for u, _ in batch]
        texts = [k if not (spaced and i == 0) else f"{k} x" for i, (_, k) in enumerate(batch)]
        phys = [phy + 100 * i for i in range(len(batch))]
        for p, u, k in zip(phys, uniqs, texts, strict=True):
            one.build_index("T", p, ts, u, k, ts)
        build_index_columns(usual, ["T"] * len(batch), ts, phys, uniqs, texts)
        phy += 100 * len(batch)
        ts += 1500
    one.close()
    usual.close()
    assert _files(one_dir) == _files(usual_dir)


@settings(max_examples=60, deadline=None)
@given(runs=st.lists(st.lists(st.tuples(st.text(_HEX, min_size=2, max_size=2), st.integers(0, 2500)),
                              min_size=1, max_size=30), min_size=1, max_size=5),
       slots=st.sampled_from([1, 17, 4096]), entries=st.sampled_from([7, 400]))
def test_single_sends_gathered_write_what_one_record_at_a_time_writes(tmp_path_factory, runs, slots, entries):
    """serve's deferred index hands `build_index_batch` the single sends of a few milliseconds:
    one topic, a UNIQ_KEY each and no KEYS, each with a store time of its own (in steps that
    cross whole seconds, so the entries' timeDiffs differ), chains and files filling up included."""
    one_dir, gathered_dir = tmp_path_factory.mktemp("one"), tmp_path_factory.mktemp("gathered")
    one, gathered = IndexService(one_dir, slots, entries), IndexService(gathered_dir, slots, entries)
    phy, ts = 0, 1_700_000_000_000
    for run in runs:
        records = []
        for u, step in run:
            ts += step
            records.append(("T", phy, ts, "7F0000010000" + "2A9F0000" * 2 + u, None))
            phy += 100
        for topic, p, t, u, k in records:
            one.build_index(topic, p, t, u, k, t)
        gathered.build_index_batch(records)
    one.close()
    gathered.close()
    assert _files(one_dir) == _files(gathered_dir)
