"""The index's write paths for many records at once: keys hashed together, entries in one pass.

RocketMQ's `IndexService.buildIndex` -> `IndexFile.putKey` per key of each dispatched record;
here a batch of appended records is indexed in one call (`IndexService.build_index_batch`,
`build_index_usual`) and the files come out byte for byte as from one `build_index` per
record (tests/store/test_crash_index.py and test_index_usual.py compare them). The key helpers
live here too, so that index.py (the files and look-ups) and this module share them.
"""

from __future__ import annotations

import struct
from itertools import chain, repeat
from operator import add, itemgetter, mod, mul
from typing import Any

from rmqtool.layouts.constants import INDEX_ENTRY_SIZE, INDEX_HEADER_SIZE, INDEX_SLOT_SIZE
from rmqtool.layouts.index import INDEX_ENTRY
from rmqtool.layouts.javahash import java_string_hashes

_I32 = struct.Struct(">i")
_pack_i32 = _I32.pack_into
_pack_entry = INDEX_ENTRY.pack_into
# two entries side by side: a usual record's UNIQ_KEY and KEYS entries in one call
_ENTRY_PAIR = struct.Struct(">" + INDEX_ENTRY.format.lstrip("<>!=@") * 2)
_I32_MAX = 0x7FFFFFFF
_entry_runs: dict[int, struct.Struct] = {}  # n entries side by side, for `_put_distinct`
_first = itemgetter(0)


def index_key_hash(key: str) -> int:
    """`IndexFile.indexKeyHashMethod`: abs(String.hashCode()), 0 for Integer.MIN_VALUE."""
    return index_key_hashes([key], "")[0]


def index_key_hashes(suffixes: list[str], prefix: str) -> list[int]:
    """`index_key_hash(prefix + s)` for every suffix, hashed together (`java_string_hashes`);
    the absolute values are taken in C, Integer.MIN_VALUE (whose abs stays negative in Java) found
    with one scan."""
    hashes = list(map(abs, java_string_hashes(suffixes, prefix, signed=True)))
    if 0x80000000 in hashes:
        hashes = [0 if h == 0x80000000 else h for h in hashes]
    return hashes


# One record's index work for `IndexService.build_index_batch`:
# (topic, commitLogOffset, storeTimestamp, UNIQ_KEY, KEYS)
IndexRecord = tuple[str, int, int, "str | None", "str | None"]


def record_keys(uniq_key: str | None, key_text: str | None) -> list[str]:
    """The index keys of one record without their `topic#` prefix: UNIQ_KEY, then each KEYS item."""
    keys = [uniq_key] if uniq_key else []
    if key_text:
        if " " in key_text:
            keys += [k for k in key_text.split(" ") if k]
        else:
            keys.append(key_text)
    return keys


def _time_diff(begin_timestamp: int, store_timestamp: int) -> int:
    """`IndexFile.putKey`'s timeDiff: whole seconds since the file's first key, in [0, Integer.MAX]."""
    if begin_timestamp <= 0:
        return 0
    diff = int((store_timestamp - begin_timestamp) / 1000)
    return 0 if diff < 0 else (_I32_MAX if diff > _I32_MAX else diff)


def _slot_positions(hashes: list[int], slots: int) -> list[int]:
    """Each hash's slot's position in the file: `INDEX_HEADER_SIZE + (h % slots) * INDEX_SLOT_SIZE`, in C."""
    return list(map(add, repeat(INDEX_HEADER_SIZE), map(mul, map(mod, hashes, repeat(slots)),
                                                        repeat(INDEX_SLOT_SIZE))))


def _pairs(a: list[int], b: list[int]) -> list[int]:
    """a[0], b[0], a[1], b[1], ...: a record's UNIQ_KEY and KEYS columns in entry order."""
    return list(chain.from_iterable(zip(a, b, strict=True)))


def _put_distinct(f: Any, hashes: list[int], slot_positions: list[int], phys: list[int], time_diff: int) -> bool:
    """The entries of keys that all fall in different slots, each slot holding a valid or no
    entry, written a column at a time (one pack of every entry, the slots by one map); False,
    with nothing written, for anything else (the caller's per-key loop then takes them).

    `IndexFile.putKey` per key in order: an entry holds its slot's previous value (0 for a
    slot that was empty or held more than the file's count, which then counts as a new slot),
    then the slot holds the entry's number. Slots no earlier key of the run wrote read the
    same before the run as at their key, so the values are read first, all at once. The
    caller has made sure the file has room for every key and already holds its first."""
    n = len(hashes)
    if len(set(slot_positions)) != n:
        return False
    mm, count = f.mm, f.index_count
    prevs = list(map(_first, map(_I32.unpack_from, repeat(mm, n), slot_positions)))
    if min(prevs) < 0 or max(prevs) > count:  # a stale value (crash): the loop's rule per key
        return False
    run = _entry_runs.get(n)
    if run is None:
        if len(_entry_runs) > 256:
            _entry_runs.clear()
        run = _entry_runs[n] = struct.Struct(">" + "iqii" * n)
    f.ensure_entries(count + n)  # every entry has its blocks before any is written
    run.pack_into(mm, f.entries_base + count * INDEX_ENTRY_SIZE,
                  *chain.from_iterable(zip(hashes, phys, repeat(time_diff, n), prevs, strict=True)))
    any(map(_pack_i32, repeat(mm, n), slot_positions, range(count, count + n)))  # each returns None: all run
    f.index_count = count + n
    f.hash_slot_count += prevs.count(0)
    return True


def _build_uniq_only(service: Any, records: list[IndexRecord]) -> bool:
    """`build_batch` of records of one topic and store time, each with a UNIQ_KEY and no KEYS
    (a Java producer's batch sent without keys), into the last file when it has room for them
    all, already holds its first key and has indexed none of them; False (nothing done) else."""
    topics, phys, stamps, uniq_keys, key_texts = zip(*records, strict=True)
    n = len(records)
    if any(key_texts) or topics.count(topics[0]) != n or stamps.count(stamps[0]) != n:
        return False
    return build_uniq_columns(service, topics[0], stamps[0], list(phys), list(uniq_keys))


def build_uniq_columns(service: Any, topic: str, store_timestamp: int, phys: list[int],
                       uniq_keys: list[str | None]) -> bool:
    """`_build_uniq_only` of columns (`IndexService.build_index_columns` of a batch without KEYS):
    records of `topic` and one store time with these CommitLog offsets and UNIQ_KEYs, written
    when every key has one, the last file has room for them all, already holds its first key
    and has indexed none of them, and the offsets grow; False (nothing done) else."""
    n = len(phys)
    f = service.files[-1] if service.files else None
    if (f is None or not n or f.index_count <= 1 or f.index_count + n > f.index_num or phys[0] < f.end_phy_offset
            or not all(uniq_keys) or (n > 1 and sorted(phys) != phys)):
        return False
    hashes = index_key_hashes(uniq_keys, topic + "#")  # type: ignore[arg-type]
    if not _put_distinct(f, hashes, _slot_positions(hashes, f.hash_slot_num), phys,
                         _time_diff(f.begin_timestamp, store_timestamp)):
        return False
    f.end_phy_offset = phys[-1]
    f.end_timestamp = store_timestamp
    f._write_header()
    return True


def build_batch(service: Any, records: list[IndexRecord]) -> None:
    """`build_index` for each record in order, with every key hashed at once.

    Entries, slots and chains come out exactly as from one `build_index` per record; the
    header is written once per file touched instead of once per record (it is read back
    only when the file is opened). A new file is named after the store time of the record
    that needs it, as `build_index(..., now_ms=storeTimestamp)` does for dispatch.
    """
    if not records or _build_uniq_only(service, records):
        return
    suffixes: list[str] = []
    counts: list[int] = []  # keys per record
    first_topic = records[0][0]
    one_topic = True
    add_count = counts.append
    for topic, _phy, _ts, uniq_key, key_text in records:
        if uniq_key and key_text and " " not in key_text:  # the usual record: record_keys inline
            suffixes += (uniq_key, key_text)
            add_count(2)
        else:
            keys = record_keys(uniq_key, key_text)
            suffixes += keys
            add_count(len(keys))
        if topic != first_topic:
            one_topic = False
    if one_topic:
        hashes = index_key_hashes(suffixes, first_topic + "#")
    else:
        topics: dict[str, list[int]] = {}  # topic -> positions of its keys in `suffixes`
        k = 0
        for (topic, *_), n in zip(records, counts, strict=True):
            topics.setdefault(topic, []).extend(range(k, k + n))
            k += n
        hashes = [0] * len(suffixes)
        for topic, where in topics.items():
            for i, h in zip(where, index_key_hashes([suffixes[i] for i in where], topic + "#"), strict=True):
                hashes[i] = h
    f = service.files[-1] if service.files else None
    if f is None or f.index_count >= f.index_num:
        f = service._last_writable(records[0][2])
    f.ensure_entries(f.index_count + len(hashes))  # every key's entry has its blocks before any is written
    mm, count, limit, slots, base = f.mm, f.index_count, f.index_num, f.hash_slot_num, f.entries_base
    slot_count, end_phy = f.hash_slot_count, f.end_phy_offset
    unpack_i32, pack_i32, pack_entry = _I32.unpack_from, _pack_i32, _pack_entry
    # slot positions up front, in one comprehension (all files of a store have the same slot count)
    slot_positions = [INDEX_HEADER_SIZE + (h % slots) * INDEX_SLOT_SIZE for h in hashes]
    k = 0
    diff_begin = diff_ts = diff_value = -1
    for (_topic, phy, ts, _u, _k), n in zip(records, counts, strict=True):
        if count >= limit:  # the previous record filled the file: build_index moves on first
            f.index_count, f.hash_slot_count = count, slot_count
            f._write_header()
            f = service._last_writable(ts)
            f.ensure_entries(f.index_count + len(hashes) - k)
            mm, count, limit, base = f.mm, f.index_count, f.index_num, f.entries_base
            slot_count, end_phy = f.hash_slot_count, f.end_phy_offset
        if phy < end_phy or not n:
            k += n  # already indexed (re-dispatch), or nothing to index
            continue
        begin = f.begin_timestamp
        if begin != diff_begin or ts != diff_ts:  # a batch's records share one store time
            diff_begin, diff_ts = begin, ts
            diff_value = _time_diff(begin, ts)
        time_diff = diff_value
        for key_hash, slot_pos in zip(hashes[k : k + n], slot_positions[k : k + n], strict=True):
            if count >= limit:  # full in the middle of a record: the rest go to a new file
                f.index_count, f.hash_slot_count = count, slot_count
                f.end_phy_offset = end_phy = phy
                f.end_timestamp = ts
                f._write_header()
                f = service._last_writable(ts)
                f.ensure_entries(f.index_count + len(hashes) - k)
                mm, count, limit, base = f.mm, f.index_count, f.index_num, f.entries_base
                slot_count = f.hash_slot_count
                begin = f.begin_timestamp
                time_diff = _time_diff(begin, ts)
            slot_value = unpack_i32(mm, slot_pos)[0]
            if slot_value <= 0 or slot_value > count:
                slot_value = 0
                slot_count += 1
            pack_entry(mm, base + count * INDEX_ENTRY_SIZE, key_hash, phy, time_diff, slot_value)
            pack_i32(mm, slot_pos, count)
            if count <= 1:
                f.begin_phy_offset = phy
                f.begin_timestamp = ts
                time_diff = 0
            count += 1
        k += n
        f.end_phy_offset = end_phy = phy
        f.end_timestamp = ts
    f.index_count, f.hash_slot_count = count, slot_count
    f._write_header()


def build_usual(service: Any, topic: str, store_timestamp: int, phys: list[int], uniq_keys: list[str],
                keys: list[str]) -> None:
    """`build_batch` of records of one topic and one store time, each with a UNIQ_KEY and a
    single KEYS token (both non-empty): what a batch of one producer's messages usually is.

    When the last file has room for all keys and already holds its first one, the two keys of
    each record are written as one pair of entries (the UNIQ_KEY's, then the KEYS token's,
    each holding its slot's previous value) before the two slots point at them, in one loop
    without per-record bookkeeping; anything else takes `build_batch`.
    """
    n = len(phys)
    f = service.files[-1] if service.files else None
    if (f is None or not n or f.index_count <= 1 or f.index_count + 2 * n > f.index_num
            or phys[0] < f.end_phy_offset):
        build_batch(service, [(topic, phy, store_timestamp, u, k) for phy, u, k in zip(phys, uniq_keys, keys,
                                                                                      strict=True)])
        return
    prefix = topic + "#"
    uniq_hashes = index_key_hashes(uniq_keys, prefix)
    key_hashes = index_key_hashes(keys, prefix)
    count = f.index_count
    f.ensure_entries(count + 2 * n)  # every entry has its blocks before any is written
    slots = f.hash_slot_num
    uniq_slots = _slot_positions(uniq_hashes, slots)
    key_slots = _slot_positions(key_hashes, slots)
    time_diff = _time_diff(f.begin_timestamp, store_timestamp)
    if _put_distinct(f, _pairs(uniq_hashes, key_hashes), _pairs(uniq_slots, key_slots), _pairs(phys, phys),
                     time_diff):  # the usual: every key in a slot of its own
        f.end_phy_offset = phys[-1]
        f.end_timestamp = store_timestamp
        f._write_header()
        return
    mm, slot_count = f.mm, f.hash_slot_count
    unpack_i32, pack_i32, pack_pair = _I32.unpack_from, _pack_i32, _ENTRY_PAIR.pack_into
    pos = f.entries_base + count * INDEX_ENTRY_SIZE
    for phy, h1, s1, h2, s2 in zip(phys, uniq_hashes, uniq_slots, key_hashes, key_slots, strict=True):
        prev1 = unpack_i32(mm, s1)[0]
        if prev1 <= 0 or prev1 > count:
            prev1 = 0
            slot_count += 1
        if s2 == s1:  # both keys in one slot: the second chains to the first
            prev2 = count
        else:
            prev2 = unpack_i32(mm, s2)[0]
            if prev2 <= 0 or prev2 > count + 1:
                prev2 = 0
                slot_count += 1
        pack_pair(mm, pos, h1, phy, time_diff, prev1, h2, phy, time_diff, prev2)
        pack_i32(mm, s1, count)
        count += 1
        pack_i32(mm, s2, count)
        count += 1
        pos += 2 * INDEX_ENTRY_SIZE
    f.index_count, f.hash_slot_count = count, slot_count
    f.end_phy_offset = phys[-1]
    f.end_timestamp = store_timestamp
    f._write_header()
