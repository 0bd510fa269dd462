"""IndexFile and IndexService: hash index from message keys to CommitLog offsets (formats.md §4).

Mirrors RocketMQ's `IndexFile.putKey/selectPhyOffset/isTimeMatched` and
`IndexService.buildIndex/queryOffset`. Keys are `topic#UNIQ_KEY` and `topic#k` for every
space-separated KEYS token; the bucket holds the newest entry, entries chain backwards.
"""

from __future__ import annotations

import datetime
import mmap
import os
import re
import struct
from collections.abc import Iterable
from pathlib import Path

from rmqtool.errors import StoreError
from rmqtool.layouts.constants import INDEX_ENTRY_SIZE, INDEX_HEADER_SIZE, INDEX_SLOT_SIZE
from rmqtool.layouts.index import INDEX_ENTRY, INDEX_HEADER
from rmqtool.store.diskspace import map_read_only, reserve_ahead_of, written_end
from rmqtool.store.indexbatch import (  # noqa: F401 (index_key_hashes, IndexRecord: this module's API too)
    IndexRecord,
    _time_diff,
    build_batch,
    build_uniq_columns,
    build_usual,
    index_key_hash,
    index_key_hashes,
    record_keys,
)
from rmqtool.store.mappedfile import close_mapped, open_mapped

_NAME = re.compile(r"^\d{17}$")
_I32 = struct.Struct(">i")
_pack_i32 = _I32.pack_into
_pack_entry = INDEX_ENTRY.pack_into
INDEX_RELEASE_BEHIND = 256 << 10  # flushed entry bytes kept in RSS behind the newest entry
# entry bytes reserved past each write: header and slot table (hash-addressed) are reserved whole
# at creation, the 400 MB of entries (appended) a chunk at a time
INDEX_RESERVE_AHEAD = 8 << 20


def index_file_name(ms: int) -> str:
    """`UtilAll.timeMillisToHumanString`: yyyyMMddHHmmssSSS in the local time zone."""
    t = datetime.datetime.fromtimestamp(ms / 1000)
    return t.strftime("%Y%m%d%H%M%S") + f"{ms % 1000:03d}"


def index_geometry_fits(data: bytes | memoryview, hash_slot_num: int, index_num: int) -> bool:
    """Does an index file's content read right as `hash_slot_num` slots and `index_num` entries?

    The file size alone does not tell the two apart (4 * slots + 20 * entries has many
    solutions), and writing with a wrong guess would damage the file. Under the right geometry
    the header's indexCount fits, and every slot's newest entry is a key that hashes to that
    slot with a chain pointing backwards; under a wrong one, slots read entry bytes and entries
    are shifted, so these fail.
    """
    if len(data) != INDEX_HEADER_SIZE + hash_slot_num * INDEX_SLOT_SIZE + index_num * INDEX_ENTRY_SIZE:
        return False
    count = INDEX_HEADER.unpack_from(data, 0)[5]
    if count < 0 or count > index_num:
        return False
    base = INDEX_HEADER_SIZE + hash_slot_num * INDEX_SLOT_SIZE
    if any(data[base : base + INDEX_ENTRY_SIZE]):  # entry 0 is never written (indexCount starts at 1)
        return False
    checked = 0
    for slot in range(hash_slot_num):
        value = _I32.unpack_from(data, INDEX_HEADER_SIZE + slot * INDEX_SLOT_SIZE)[0]
        if value == 0:
            continue
        if value < 0 or value >= max(count, 1):
            return False
        key_hash, _phy, _diff, prev = INDEX_ENTRY.unpack_from(data, base + value * INDEX_ENTRY_SIZE)
        if key_hash < 0 or key_hash % hash_slot_num != slot or not 0 <= prev < value:
            return False
        checked += 1
        if checked >= 256:
            break
    for i in range(1, min(count, 1024)):  # each entry chains back to an older one of its slot
        key_hash, phy, diff, prev = INDEX_ENTRY.unpack_from(data, base + i * INDEX_ENTRY_SIZE)
        if key_hash < 0 or phy < 0 or diff < 0 or not 0 <= prev < i:
            return False
        if prev and INDEX_ENTRY.unpack_from(data, base + prev * INDEX_ENTRY_SIZE)[0] % hash_slot_num != (
                key_hash % hash_slot_num):
            return False
    return True


def fit_index_geometry(path: Path, default: tuple[int, int]) -> tuple[int, int] | None:
    """(maxHashSlotNum, maxIndexNum) an index file was written with, from its size and content.

    `default` wins when it fits; else the default slot count with the entries the size leaves,
    then, for files up to 16 MiB, every slot count the size allows. When several read right (a
    file with few keys), the first of the broker's usual slot:entry ratios (1:4, 1:2, 1:1, ...)
    among them; None when none does, only odd ratios do, or the file holds no entry yet: the
    caller must then be told the sizes.
    """
    size = path.stat().st_size
    body = size - INDEX_HEADER_SIZE
    if body <= 0:
        return None
    slots0, num0 = default
    if size == INDEX_HEADER_SIZE + slots0 * INDEX_SLOT_SIZE + num0 * INDEX_ENTRY_SIZE:
        return default
    with open(path, "rb") as f:
        if size > 1 << 24:  # a big file: only the default slot count is tried, on a mapping
            rest = body - slots0 * INDEX_SLOT_SIZE
            if rest <= 0 or rest % INDEX_ENTRY_SIZE:
                return None
            with map_read_only(f.fileno(), size) as mm:
                ok = INDEX_HEADER.unpack_from(mm, 0)[5] > 1 and index_geometry_fits(mm, slots0, rest // INDEX_ENTRY_SIZE)
            return (slots0, rest // INDEX_ENTRY_SIZE) if ok else None
        data = f.read()
    if INDEX_HEADER.unpack_from(data, 0)[5] <= 1:  # no entry yet: nothing tells the shape
        return None
    fits = [(slots, (body - slots * INDEX_SLOT_SIZE) // INDEX_ENTRY_SIZE)
            for slots in range(1, body // INDEX_SLOT_SIZE)
            if (body - slots * INDEX_SLOT_SIZE) % INDEX_ENTRY_SIZE == 0]
    fits = [g for g in fits if index_geometry_fits(data, *g)]
    if len(fits) <= 1:
        return fits[0] if fits else None
    for ratio in _USUAL_RATIOS:
        for slots, num in fits:
            if num == slots * ratio:
                return slots, num
    return None


_USUAL_RATIOS = (4, 2, 1, 8, 3, 5, 10, 16)  # maxIndexNum / maxHashSlotNum, the default 4 first


class IndexFile:
    """One `index/<yyyyMMddHHmmssSSS>` file, mapped in full."""

    def __init__(self, path: Path, hash_slot_num: int, index_num: int, *, create: bool = False,
                 read_only: bool = False, end_phy_offset: int = 0, end_timestamp: int = 0) -> None:
        self.path = path
        self.hash_slot_num = hash_slot_num
        self.index_num = index_num
        self.file_size = INDEX_HEADER_SIZE + hash_slot_num * INDEX_SLOT_SIZE + index_num * INDEX_ENTRY_SIZE
        self.read_only = read_only
        self.entries_base = INDEX_HEADER_SIZE + hash_slot_num * INDEX_SLOT_SIZE
        first = min(self.file_size, self.entries_base + INDEX_RESERVE_AHEAD)
        self.fd, self.mm = open_mapped(path, self.file_size, create=create, read_only=read_only,
                                       label=f"index file {path.name}", reserve=first)
        # bytes from the start with their blocks allocated; 0 for a reopened file until `ensure_entries`
        self.reserved_until = first if create else 0
        if create:
            # a file following a full one starts where that one ended (IndexService.getAndCreateLastIndexFile)
            self.begin_timestamp = self.end_timestamp = end_timestamp
            self.begin_phy_offset = self.end_phy_offset = end_phy_offset
            self.hash_slot_count = 0
            self.index_count = 1
            self._write_header()
        else:
            (self.begin_timestamp, self.end_timestamp, self.begin_phy_offset, self.end_phy_offset,
             self.hash_slot_count, count) = INDEX_HEADER.unpack_from(self.mm, 0)
            self.index_count = count if count > 0 else 1
        self._released_count = 0  # index_count at the last release of pages (`flush`)

    def ensure_entries(self, count: int) -> None:
        """Blocks for entries below `count` (and the header and slots): a chunk more when short.

        DiskFull before anything is written when the disk has no room. A reopened file is
        reserved from its start: a no-op, also on a full disk, where its blocks exist.
        """
        end = min(self.file_size, self.entries_base + count * INDEX_ENTRY_SIZE)
        if end <= self.reserved_until or self.read_only:
            return
        self.reserved_until = reserve_ahead_of(self.fd, self.reserved_until, end, INDEX_RESERVE_AHEAD,
                                               self.file_size, f"index file {self.path.name}")

    def _write_header(self) -> None:
        INDEX_HEADER.pack_into(self.mm, 0, self.begin_timestamp, self.end_timestamp, self.begin_phy_offset,
                               self.end_phy_offset, self.hash_slot_count, self.index_count)

    def is_write_full(self) -> bool:
        return self.index_count >= self.index_num

    def put_key(self, key: str, phy_offset: int, store_timestamp: int, *, write_header: bool = True) -> bool:
        """`IndexFile.putKey`; False when the file is full.

        With `write_header=False` the caller writes the header once after several keys of one
        record (`flush_header`); the header is only read back from the file on load.
        """
        count = self.index_count
        if count >= self.index_num:
            return False
        self.ensure_entries(count + 1)
        key_hash = index_key_hash(key)
        slot_pos = INDEX_HEADER_SIZE + (key_hash % self.hash_slot_num) * INDEX_SLOT_SIZE
        mm = self.mm
        slot_value = _I32.unpack_from(mm, slot_pos)[0]
        if slot_value <= 0 or slot_value > count:
            slot_value = 0
            self.hash_slot_count += 1
        begin = self.begin_timestamp
        time_diff = _time_diff(begin, store_timestamp)
        _pack_entry(mm, self.entries_base + count * INDEX_ENTRY_SIZE, key_hash, phy_offset, time_diff, slot_value)
        _pack_i32(mm, slot_pos, count)
        if count <= 1:
            self.begin_phy_offset = phy_offset
            self.begin_timestamp = store_timestamp
        self.index_count = count + 1
        self.end_phy_offset = phy_offset
        self.end_timestamp = store_timestamp
        if write_header:
            self._write_header()
        return True

    flush_header = _write_header

    def roll_back_past_header(self) -> int:
        """Undo the keys of the put the writer died in, and those of the last record counted.

        `putKey` writes an entry (holding its slot's previous value) before pointing the slot
        at it. Our header is written after all of a record's (or a batch's) keys, Java's after
        each key, so a process crash leaves written-but-uncounted entries past indexCount and,
        from Java, possibly a last record with only some of its keys counted. Walking entries
        newest first, giving each slot that points at one the entry's previous value, and
        clearing it, brings the file back to the state before its last counted record, which
        recovery then indexes again whole (its endPhyOffset is the record before). Only done
        with the page cache intact. Returns how many entries were cleared.
        """
        mm, base, count, slots = self.mm, self.entries_base, self.index_count, self.hash_slot_num
        size = INDEX_ENTRY_SIZE
        end = count
        # entries past the written end are zeros, and may be a hole a read on tmpfs would allocate
        limit = min(self.index_num, (written_end(self.fd, self.file_size, base + count * size) - base) // size)
        while end < limit and any(mm[base + end * size : base + (end + 1) * size]):
            end += 1
        last_phy = INDEX_ENTRY.unpack_from(mm, base + (count - 1) * size)[1] if count > 1 else None
        low = count
        while low > 1 and INDEX_ENTRY.unpack_from(mm, base + (low - 1) * size)[1] == last_phy:
            low -= 1
        for pos in range(end - 1, low - 1, -1):
            key_hash, _phy, _diff, prev = INDEX_ENTRY.unpack_from(mm, base + pos * size)
            if key_hash >= 0:
                slot_pos = INDEX_HEADER_SIZE + (key_hash % slots) * INDEX_SLOT_SIZE
                if _I32.unpack_from(mm, slot_pos)[0] == pos:
                    restored = prev if 0 < prev < pos else 0  # fixed in turn if prev is undone too
                    _pack_i32(mm, slot_pos, restored)
                    if restored == 0 and pos < count:
                        self.hash_slot_count = max(0, self.hash_slot_count - 1)
        if end > low:
            mm[base + low * size : base + end * size] = bytes((end - low) * size)
        if low < count:
            self.index_count = low
            if low > 1:
                _h, phy, diff, _p = INDEX_ENTRY.unpack_from(mm, base + (low - 1) * size)
                self.end_phy_offset = phy
                self.end_timestamp = max(self.begin_timestamp, self.begin_timestamp + diff * 1000)
            else:
                self.end_phy_offset, self.end_timestamp = self.begin_phy_offset, self.begin_timestamp
            self._write_header()
        return end - low

    def put_keys(self, keys: list[str], phy_offset: int, store_timestamp: int,
                 key_hashes: list[int] | None = None) -> int:
        """`putKey` for each of one record's keys, header written once; returns how many fit.

        `key_hashes`, when given, are the keys' `index_key_hash` values (`index_key_hashes`).
        """
        mm = self.mm
        count = self.index_count
        limit = self.index_num
        self.ensure_entries(count + len(keys))
        slots = self.hash_slot_num
        base = self.entries_base
        begin = self.begin_timestamp
        time_diff = _time_diff(begin, store_timestamp)
        done = 0
        for i, key in enumerate(keys):
            if count >= limit:
                break
            key_hash = index_key_hash(key) if key_hashes is None else key_hashes[i]
            slot_pos = INDEX_HEADER_SIZE + (key_hash % slots) * INDEX_SLOT_SIZE
            slot_value = _I32.unpack_from(mm, slot_pos)[0]
            if slot_value <= 0 or slot_value > count:
                slot_value = 0
                self.hash_slot_count += 1
            _pack_entry(mm, base + count * INDEX_ENTRY_SIZE, key_hash, phy_offset, time_diff, slot_value)
            _pack_i32(mm, slot_pos, count)
            if count <= 1:
                self.begin_phy_offset = phy_offset
                self.begin_timestamp = store_timestamp
                time_diff = 0  # the time base is now this record's time: later keys are relative to it
            count += 1
            done += 1
        if done:
            self.index_count = count
            self.end_phy_offset = phy_offset
            self.end_timestamp = store_timestamp
            self._write_header()
        return done

    def is_time_matched(self, begin: int, end: int) -> bool:
        b, e = self.begin_timestamp, self.end_timestamp
        return (begin < b and end > e) or b <= begin <= e or b <= end <= e

    def select_phy_offsets(self, out: list[int], key: str, max_num: int, begin: int, end: int) -> None:
        """`IndexFile.selectPhyOffset`: walk the key's bucket chain, newest first."""
        key_hash = index_key_hash(key)
        slot_pos = INDEX_HEADER_SIZE + (key_hash % self.hash_slot_num) * INDEX_SLOT_SIZE
        mm = self.mm
        count = self.index_count
        slot_value = _I32.unpack_from(mm, slot_pos)[0]
        if slot_value <= 0 or slot_value > count or count <= 1:
            return
        nxt = slot_value
        while len(out) < max_num:
            h, phy, time_diff, prev = INDEX_ENTRY.unpack_from(mm, self.entries_base + nxt * INDEX_ENTRY_SIZE)
            if time_diff < 0:
                break
            time_read = self.begin_timestamp + time_diff * 1000
            if h == key_hash and begin <= time_read <= end:
                out.append(phy)
            if prev <= 0 or prev > count or prev == nxt or time_read < begin:
                break
            nxt = prev

    def flush(self) -> None:
        if not self.read_only:
            count = self.index_count  # entries below it are complete before the fdatasync
            os.fdatasync(self.fd)
            self._release(count)

    def _release(self, count: int) -> None:
        """Drop this file's pages from RSS after a flush, as `MappedFile._release_behind` does.

        Entries are appended: those more than INDEX_RELEASE_BEHIND bytes behind the newest
        leave RSS for good. The slot table is written at hash-addressed places, so all of it is
        released each flush and only the slots the next second's keys hit come back (a
        lookup refaults from the page cache, no I/O). Without this a busy store's index held
        ~40 MB of RSS per million keys. Pages stay in the page cache, dirty ones included.
        """
        page = mmap.PAGESIZE
        end = (self.entries_base + count * INDEX_ENTRY_SIZE - INDEX_RELEASE_BEHIND) & ~(page - 1)
        if count >= self.index_num:
            end = self.file_size  # full: no key goes here again
        if end <= page or count == self._released_count:
            return
        self._released_count = count
        try:
            self.mm.madvise(mmap.MADV_DONTNEED, page, end - page)  # the header page stays
        except (OSError, ValueError, AttributeError):  # no madvise here: RSS just stays higher
            pass

    def close(self) -> None:
        close_mapped(self.fd, self.mm)

    def destroy(self) -> None:
        self.close()
        self.path.unlink(missing_ok=True)


class IndexService:
    """The index files of a store, oldest first; the last one takes new keys."""

    offloaded = False  # built here (indexclient.IndexProcess: by a second process)

    def __init__(self, directory: Path, hash_slot_num: int, index_num: int, *, read_only: bool = False) -> None:
        self.directory = directory
        self.hash_slot_num = hash_slot_num
        self.index_num = index_num
        self.read_only = read_only
        self.files: list[IndexFile] = []

    def load(self, last_exit_ok: bool, index_msg_timestamp: int, *, page_cache_intact: bool = False) -> None:
        """Open every file; after a crash, files newer than the checkpoint are destroyed (rebuilt by dispatch).

        An empty file is what a kill between `open(O_CREAT)` and `ftruncate` leaves: it is
        skipped (and removed when writable), as MappedFileQueue drops an empty last file.
        With `page_cache_intact` (only the writing process crashed: `abort_from_this_boot`)
        the files are kept instead and the last one rolled back to its header
        (`roll_back_past_header`), so recovery re-indexes only what lies past its endPhyOffset
        instead of everything since the last full file.
        """
        if not self.directory.is_dir():
            return
        for path in sorted(p for p in self.directory.iterdir() if p.is_file() and _NAME.match(p.name)):
            if path.stat().st_size == 0:
                # killed between creating the file and sizing it: it never held a key
                if not self.read_only:
                    path.unlink()
                continue
            f = IndexFile(path, self.hash_slot_num, self.index_num, read_only=self.read_only)
            if (not last_exit_ok and not self.read_only and not page_cache_intact
                    and f.end_timestamp > index_msg_timestamp):
                f.destroy()
                continue
            self.files.append(f)
        if self.files and not self.read_only:
            last = self.files[-1]
            try:  # new keys go to the last file: its holes must be real blocks before they are stored into
                last.ensure_entries(last.index_count)
            except BaseException:
                self.close()
                raise
            if not last_exit_ok and page_cache_intact:
                last.roll_back_past_header()

    def _last_writable(self, now_ms: int) -> IndexFile:
        last = self.files[-1] if self.files else None
        if last is not None and not last.is_write_full():
            return last
        if self.read_only:
            raise StoreError("store opened read-only")
        self.directory.mkdir(parents=True, exist_ok=True)
        ms = now_ms
        if self.files and index_file_name(ms) <= self.files[-1].path.name:
            # names sort chronologically and must be unique: follow the newest file
            newest = datetime.datetime.strptime(self.files[-1].path.name[:14], "%Y%m%d%H%M%S")
            ms = int(newest.timestamp()) * 1000 + int(self.files[-1].path.name[14:]) + 1
        while (self.directory / index_file_name(ms)).exists():
            ms += 1
        end_phy = last.end_phy_offset if last else 0
        end_ts = last.end_timestamp if last else 0
        f = IndexFile(self.directory / index_file_name(ms), self.hash_slot_num, self.index_num, create=True,
                      end_phy_offset=end_phy, end_timestamp=end_ts)
        self.files.append(f)
        if last is not None:
            last.flush()  # IndexService flushes a full file when it moves on
            self.last_full_end_timestamp = last.end_timestamp
        return f

    last_full_end_timestamp = 0

    def build_index(self, topic: str, phy_offset: int, store_timestamp: int, uniq_key: str | None,
                    key_text: str | None, now_ms: int) -> None:
        """`IndexService.buildIndex` for one dispatched record (caller excludes ROLLBACK)."""
        f = self.files[-1] if self.files else None
        if f is None or f.index_count >= f.index_num:
            f = self._last_writable(now_ms)
        if phy_offset < f.end_phy_offset:
            return  # already indexed (re-dispatch)
        keys = record_keys(uniq_key, key_text)  # the `topic#` prefix is hashed once for all
        hashes = index_key_hashes(keys, topic + "#")
        while keys:
            done = f.put_keys(keys, phy_offset, store_timestamp, hashes)
            if done == len(keys):
                return
            keys, hashes = keys[done:], hashes[done:]
            f = self._last_writable(now_ms)

    def build_index_batch(self, records: list[IndexRecord]) -> None:
        """`build_index` for each record in order, with every key hashed at once (indexbatch.py)."""
        build_batch(self, records)

    def build_index_usual(self, topic: str, store_timestamp: int, phys: list[int], uniq_keys: list[str],
                          keys: list[str]) -> None:
        """`build_index_batch` for records of one topic and store time with a UNIQ_KEY and one KEYS
        token each (indexbatch.py `build_usual`)."""
        build_usual(self, topic, store_timestamp, phys, uniq_keys, keys)

    def build_index_columns(self, topics: list[str], store_timestamp: int, phys: list[int],
                            uniq_keys: list[str | None], key_texts: list[str | None]) -> None:
        """The index keys of appended records of one store time, given column by column
        (`dispatch.build_index_columns`; indexclient.IndexProcess has its own, to the child).

        Records of one topic that each have a UNIQ_KEY and one KEYS token take `build_index_usual`;
        any other mix the per-record tuples of `build_index_batch`.
        """
        topic = topics[0]
        one_topic = topics.count(topic) == len(topics)
        if one_topic and not any(key_texts) and build_uniq_columns(self, topic, store_timestamp, phys, uniq_keys):
            return  # a batch without KEYS (a Java producer's usual batch)
        if one_topic and all(uniq_keys) and all(key_texts) and " " not in "\x00".join(key_texts):  # type: ignore[arg-type]
            build_usual(self, topic, store_timestamp, phys, uniq_keys, key_texts)  # type: ignore[arg-type]
        else:
            build_batch(self, [(t, phy, store_timestamp, u, k)
                               for t, phy, u, k in zip(topics, phys, uniq_keys, key_texts, strict=True)])

    def query_offsets(self, topic: str, key: str, max_num: int, begin: int, end: int) -> list[int]:
        """`IndexService.queryOffset`: newest file first, stop at a file older than `begin`."""
        out: list[int] = []
        full_key = f"{topic}#{key}"
        for f in reversed(self.files):
            if f.is_time_matched(begin, end):
                f.select_phy_offsets(out, full_key, max_num, begin, end)
            if f.begin_timestamp < begin or len(out) >= max_num:
                break
        return out

    def delete_expired(self, commitlog_min: int) -> int:
        """Files (never the last) whose endPhyOffset is below the CommitLog min offset."""
        deleted = 0
        while len(self.files) > 1 and self.files[0].end_phy_offset < commitlog_min:
            self.files.pop(0).destroy()
            deleted += 1
        return deleted

    def flush(self) -> None:
        for f in list(self.files):
            f.flush()

    def close(self) -> None:
        for f in self.files:
            f.close()

    def all_files(self) -> Iterable[IndexFile]:
        return list(self.files)
