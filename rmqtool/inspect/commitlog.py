"""CommitLog reading for inspect and verify: a fast checking scan and a random-access reader.

The scan is the hot path of `verify` (1 GiB files): `struct.unpack_from` on the mapping and
`zlib.crc32` on memoryview slices, no construct and no per-record objects. It applies the checks
of `CommitLog.checkMessageAndReturnSize` (formats.md §2.10); where a record fails, the exact
reason comes from `rmqtool.layouts.message.decode_record`, so both agree by construction.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from rmqtool.errors import StoreError
from rmqtool.inspect.files import QueueFile, ReadOnlyFile, relpath
from rmqtool.inspect.problems import Problem
from rmqtool.layouts.constants import (
    BLANK_MAGIC_CODE,
    END_FILE_MIN_BLANK_LENGTH,
    MESSAGE_MAGIC_CODE,
    MESSAGE_MAGIC_CODE_V2,
    TRANSACTION_COMMIT_TYPE,
    TRANSACTION_NOT_TYPE,
    TRANSACTION_TYPE_MASK,
)
from rmqtool.layouts.message import Blank, MessageExt, RecordError, decode_record
from rmqtool.store.diskspace import map_read_only
from rmqtool.store.scanparallel import PARALLEL_SCAN_MIN, SYNC_WINDOW, sync_point

_HEAD = struct.Struct(">iiiiiqqiq")  # totalSize .. bornTimestamp, 48 bytes
# totalSize, magicCode, bodyCRC, queueId, queueOffset, physicalOffset, sysFlag, storeTimestamp and
# bodyLength of a record with IPv4 hosts (88 bytes; pad bytes skip the fields no check reads, so no
# int objects are made for them). tests/layouts checks it against CommitLogRecord.
V4_SCAN_FIELDS = ("totalSize", "magicCode", "bodyCRC", "queueId", "queueOffset", "physicalOffset", "sysFlag",
                  "storeTimestamp", "bodyLength")
V4_SCAN = struct.Struct(">iiii4xqqi16xq20xi")
_I32 = struct.Struct(">i")
_I16 = struct.Struct(">h")
_I64 = struct.Struct(">q")
_MIN_RECORD = 91


@dataclass
class QueueStat:
    """What the CommitLog says about one topic queue (NOT/COMMIT records only)."""

    count: int = 0
    min_queue_offset: int = -1
    max_queue_offset: int = -1


@dataclass
class ScanResult:
    """Summary of a CommitLog scan; `end_offset` is where recovery would set the write position."""

    min_offset: int = 0
    end_offset: int = 0
    records: int = 0
    bytes_checked: int = 0
    last_store_timestamp: int = 0
    first_store_timestamp: int = 0
    stop: Problem | None = None  # the first record recovery would stop at
    queues: dict[tuple[str, int], QueueStat] = field(default_factory=dict)


def _record_failure(buf, pos: int, end: int, *, check_crc: bool = True) -> RecordError | None:
    try:
        decode_record(buf, pos, end, check_crc=check_crc, read_body=False)
    except RecordError as e:
        return e
    except Blank:
        return None
    return None


def _topic_codec(topic_len: int) -> Callable:
    """`unpack_from` of topic bytes + propertiesLength for one topic length: one call, one tuple."""
    return struct.Struct(f">{topic_len}sh").unpack_from


def _good_run(mapping, buf, pos: int, stop: int, end: int, base: int, check_crc: bool,
              queues: dict[tuple[bytes, int], list[int]], topic_codecs: dict[int, Callable],
              ) -> tuple[int, int, int, int]:
    """Check the run of plain records from `pos`: (position after it, records, first and last storeTimestamp).

    The hot loop of `verify`: it accepts only what the general loop of `scan_commitlog` accepts
    with no problem (a V1 record with IPv4 hosts, sound lengths, CRC, physicalOffset equal to its
    position) and stops at anything else, which the general loop then handles. Per record: one
    unpack for the fixed part, one for topic + propertiesLength (its codec is looked up again
    only when the topic length changes), the CRC and a queue counter; no objects besides those.
    The CRC reads a copy sliced from the mmap (`mapping`), cheaper than a memoryview slice for
    the usual small bodies; large bodies go through the memoryview `buf`.
    """
    unpack = V4_SCAN.unpack_from
    crc32 = zlib.crc32
    get_codec = topic_codecs.get
    get_queue = queues.get
    v1 = MESSAGE_MAGIC_CODE
    last = end - _MIN_RECORD  # a record needs 91 bytes
    delta = base  # physicalOffset - position of a record in place
    first_ts = last_ts = 0
    n = 0
    limit = min(stop - 1, last)
    tl = -1  # the topic length of the previous record: the next one most likely has the same
    codec = None
    while pos <= limit:
        total, magic, crc, qid, qoff, phys, sysflag, store_ts, body_len = unpack(buf, pos)
        if magic != v1 or sysflag & 0x30 or phys - pos != delta or not 91 <= total <= end - pos or body_len < 0:
            break
        rec_end = pos + total
        tpos = pos + 88 + body_len  # the 1-byte topic length, then the topic and propertiesLength
        if tpos + tl + 3 > rec_end or buf[tpos] != tl:
            tl = buf[tpos] if tpos < rec_end else 128
            if tl > 127 or tpos + tl + 3 > rec_end:
                break
            codec = get_codec(tl)
            if codec is None:
                codec = topic_codecs[tl] = _topic_codec(tl)
        topic, pl = codec(buf, tpos + 1)
        if tpos + tl + 3 + pl != rec_end:
            break
        if check_crc and (crc32(mapping[pos + 88 : tpos] if body_len < 4096 else buf[pos + 88 : tpos])
                          & 0x7FFFFFFF) != crc:
            break
        if not sysflag & 0x4:  # TRANSACTION_NOT_TYPE or TRANSACTION_COMMIT_TYPE
            st = get_queue((topic, qid))
            if st is None:
                queues[(topic, qid)] = [1, qoff, qoff]
            else:
                st[0] += 1
                if qoff > st[2]:
                    st[2] = qoff
                elif qoff < st[1]:
                    st[1] = qoff
        if not first_ts:
            first_ts = store_ts
        if store_ts > last_ts:
            last_ts = store_ts
        n += 1
        pos = rec_end
    return pos, n, first_ts, last_ts


def scan_commitlog(files: list[QueueFile], root: Path | None, *, check_crc: bool = True,
                   file_size: int | None = None, result: ScanResult | None = None,
                   progress: Callable[[int], None] | None = None,
                   on_record: Callable[[int, int, bytes, int, int, int], None] | None = None,
                   byte_range: tuple[int, int | None] | None = None,
                   ) -> Iterator[Problem]:
    """Check every record of a CommitLog, yielding problems; fills `result` as it goes.

    `on_record(phys, size, topic, queue_id, queue_offset, sys_flag)` is called for each good
    record when given (index and timer checks use it). `byte_range=(start, stop)` scans only
    that part of a single file (start must be a record boundary), for `scan_commitlog_parallel`.
    """
    res = result if result is not None else ScanResult()
    if not files:
        return
    res.min_offset = files[0].base
    res.end_offset = files[0].base
    size0 = file_size
    prev_end: int | None = None
    stopped = False
    magics = (MESSAGE_MAGIC_CODE, MESSAGE_MAGIC_CODE_V2)
    unpack_head = _HEAD.unpack_from
    unpack_i32 = _I32.unpack_from
    unpack_i16 = _I16.unpack_from
    unpack_i64 = _I64.unpack_from
    crc32 = zlib.crc32
    # (topic, queueId) -> [count, min, max]: plain lists are cheaper to update than QueueStat
    queues: dict[tuple[bytes, int], list[int]] = {}
    topic_codecs: dict[int, Callable] = {}
    for idx, qf in enumerate(files):
        rel = relpath(qf.path, root)
        last_file = idx == len(files) - 1
        try:
            rof = ReadOnlyFile(qf.path)
        except StoreError as e:
            yield Problem(rel, 0, "unreadable-file", str(e))
            continue
        with rof:
            buf, end = rof.buf, rof.size
            if size0 is None:
                size0 = end
            if end != size0 and not (last_file and end == 0):
                yield Problem(rel, 0, "file-size-mismatch",
                              f"file is {end} bytes, the other CommitLog files are {size0}; a broker refuses to load it")
            if prev_end is not None and qf.base != prev_end:
                yield Problem(rel, 0, "gap-between-files",
                              f"file starts at offset {qf.base}, the previous file ends at {prev_end}")
                stopped = True
            prev_end = qf.base + end
            base = qf.base
            pos = 0
            stop = end
            if byte_range is not None:
                pos = byte_range[0]
                stop = end if byte_range[1] is None else min(end, byte_range[1])
            last_shift = 0
            first_ts, last_ts = res.first_store_timestamp, res.last_store_timestamp
            while pos < stop:
                if not stopped and on_record is None and pos <= end - _MIN_RECORD:
                    run = _good_run(rof.mapping, buf, pos, stop, end, base, check_crc, queues, topic_codecs)
                    if run[0] != pos:
                        pos, n_good, run_first, run_last = run
                        res.records += n_good
                        if not first_ts:
                            first_ts = run_first
                        if run_last > last_ts:
                            last_ts = run_last
                        res.end_offset = base + pos
                        if pos >= stop:
                            break
                if end - pos < 8:
                    if pos < end and rof.first_nonzero(pos, end) >= 0:
                        yield Problem(rel, pos, "torn-tail", f"{end - pos} trailing bytes hold no record")
                    if not last_file and pos < end:
                        yield Problem(rel, pos, "missing-blank", "file ends without a blank marker")
                    break
                if end - pos >= 48:
                    total, magic, crc, qid, _flag, qoff, phys, sysflag, _born = unpack_head(buf, pos)
                else:
                    total, magic = struct.unpack_from(">ii", buf, pos)
                    qid = qoff = phys = sysflag = crc = 0
                if magic == BLANK_MAGIC_CODE:
                    if total != end - pos:
                        yield Problem(rel, pos, "blank-size-mismatch",
                                      f"blank says {total} bytes to the end of the file, there are {end - pos}")
                    nz = rof.first_nonzero(pos + END_FILE_MIN_BLANK_LENGTH, end)
                    if nz >= 0:
                        yield Problem(rel, nz, "nonzero-after-blank",
                                      "non-zero bytes after the end-of-file blank")
                    if not stopped:
                        res.end_offset = base + end
                    break
                if total == 0 and magic == 0:
                    # the zero tail: end of the data in this file (a live broker's moving tail)
                    if not stopped:
                        res.end_offset = base + pos
                    nz = rof.first_nonzero(pos, end)
                    if nz >= 0:
                        yield Problem(rel, nz, "nonzero-after-blank",
                                      f"non-zero bytes after the end of the data at {pos}; recovery drops them")
                    if not last_file:
                        yield Problem(rel, pos, "missing-blank",
                                      "data ends inside a file that is not the last; recovery stops here "
                                      "and deletes the later files")
                        stopped = True
                    break
                ok = magic in magics and _MIN_RECORD <= total <= end - pos and end - pos >= 48
                body_len = tl = 0
                if ok:
                    hl = 20 if sysflag & 0x10 else 8
                    sl = 20 if sysflag & 0x20 else 8
                    r = pos + 56 + hl + sl
                    (body_len,) = unpack_i32(buf, r + 12)
                    bstart = r + 16
                    rec_end = pos + total
                    if body_len < 0 or bstart + body_len + 3 > rec_end:
                        ok = False
                    else:
                        tpos = bstart + body_len
                        if magic == MESSAGE_MAGIC_CODE:
                            tl = buf[tpos]
                            if tl > 127:
                                tl -= 256
                            tpos += 1
                        else:
                            (tl,) = unpack_i16(buf, tpos)
                            tpos += 2
                        if tl < 0 or tpos + tl + 2 > rec_end:
                            ok = False
                        else:
                            (pl,) = unpack_i16(buf, tpos + tl)
                            if pl < 0 or tpos + tl + 2 + pl != rec_end:
                                ok = False
                            elif check_crc and (crc32(buf[bstart : bstart + body_len]) & 0x7FFFFFFF) != crc:
                                ok = False
                if not ok:
                    err = _record_failure(buf, pos, end, check_crc=check_crc)
                    kind, detail = (err.kind, err.detail) if err else ("size-mismatch", "record does not add up")
                    claimed = total if _MIN_RECORD <= total <= end - pos else end - pos
                    torn = kind == "truncated" or (
                        last_file and rof.first_nonzero(pos + max(claimed - 4, 8), end) < 0)
                    if kind == "truncated" or kind == "bad-size":
                        kind = "torn-tail" if torn else "size-mismatch"
                    elif torn and kind != "bad-magic":
                        kind = "torn-tail"
                    p = Problem(rel, pos, kind, f"{detail} (record at CommitLog offset {base + pos})")
                    if not stopped:
                        res.end_offset = base + pos
                    yield p
                    if res.stop is None:
                        res.stop = p
                    stopped = True
                    if kind in ("crc-mismatch",) and _MIN_RECORD <= total <= end - pos:
                        pos += total  # the size is sound: keep checking the records after it
                        continue
                    break
                if phys != base + pos:
                    shift = phys - (base + pos)
                    if shift != last_shift:  # a renamed/moved file shifts every record alike: report once
                        yield Problem(rel, pos, "phys-offset-mismatch",
                                      f"physicalOffset is {phys}, the record sits at {base + pos}")
                    last_shift = shift
                (store_ts,) = unpack_i64(buf, pos + 48 + hl)
                if stopped:  # after the point recovery stops at: checked, but not part of the store
                    pos += total
                    continue
                if not first_ts:
                    first_ts = store_ts
                if store_ts > last_ts:
                    last_ts = store_ts
                tx = sysflag & TRANSACTION_TYPE_MASK
                topic = bytes(buf[tpos : tpos + tl])
                if tx == TRANSACTION_NOT_TYPE or tx == TRANSACTION_COMMIT_TYPE:
                    key = (topic, qid)
                    st = queues.get(key)
                    if st is None:
                        queues[key] = [1, qoff, qoff]
                    else:
                        st[0] += 1
                        if qoff > st[2]:
                            st[2] = qoff
                        elif qoff < st[1]:
                            st[1] = qoff
                if on_record is not None:
                    on_record(base + pos, total, topic, qid, qoff, sysflag)
                res.records += 1
                pos += total
                res.end_offset = base + pos
            res.first_store_timestamp, res.last_store_timestamp = first_ts, last_ts
            res.bytes_checked += pos
            if progress is not None:
                progress(end)
    # queue keys to text and counters to QueueStat once, at the end (the scan keeps raw bytes and lists)
    for (t, q), (count, lo, hi) in queues.items():
        res.queues[(t.decode("utf-8", "replace"), q)] = QueueStat(count, lo, hi)


class CommitLogReader:
    """Random access to records by CommitLog offset (CQ units, index entries, TimerLog units)."""

    def __init__(self, files: list[QueueFile], file_size: int | None = None) -> None:
        self.files = files
        self._open: dict[int, ReadOnlyFile] = {}
        self.file_size = file_size
        if file_size is None and files:
            self.file_size = files[0].path.stat().st_size or None

    def locate(self, offset: int) -> tuple[QueueFile, int] | None:
        for qf in reversed(self.files):
            if qf.base <= offset:
                return qf, offset - qf.base
        return None

    def _file(self, qf: QueueFile) -> ReadOnlyFile:
        rof = self._open.get(qf.base)
        if rof is None:
            rof = self._open[qf.base] = ReadOnlyFile(qf.path)
        return rof

    def read(self, offset: int, *, check_crc: bool = False, read_body: bool = True) -> MessageExt:
        """The record at `offset`; raises RecordError (or Blank) as decode_record does."""
        loc = self.locate(offset)
        if loc is None:
            raise RecordError("out-of-range", f"no CommitLog file holds offset {offset}")
        qf, pos = loc
        rof = self._file(qf)
        if pos >= rof.size:
            raise RecordError("out-of-range", f"offset {offset} is past the end of {qf.name}")
        return decode_record(rof.buf, pos, rof.size, check_crc=check_crc, read_body=read_body)

    def raw(self, offset: int, size: int) -> bytes:
        loc = self.locate(offset)
        if loc is None:
            return b""
        qf, pos = loc
        rof = self._file(qf)
        return bytes(rof.buf[pos : pos + max(0, size)])

    def close(self) -> None:
        for rof in self._open.values():
            rof.close()
        self._open.clear()

    def __enter__(self) -> CommitLogReader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


PARALLEL_MIN_BYTES = PARALLEL_SCAN_MIN  # below this, a fork costs more than it saves (as in recovery)


def _sync_point(qf: QueueFile, size: int) -> int | None:
    """A record boundary near the middle of a file (`scanparallel.sync_point`)."""
    with open(qf.path, "rb") as fh, map_read_only(fh.fileno(), size) as mm:
        return sync_point(mm, qf.base, size // 2, size // 2 + SYNC_WINDOW)


def _child_scan(conn, files, root, check_crc, file_size, byte_range) -> None:
    try:
        r = ScanResult()
        problems = list(scan_commitlog(files, root, check_crc=check_crc, file_size=file_size, result=r,
                                       byte_range=byte_range))
        conn.send(("ok", problems, r))
    except BaseException as e:  # noqa: BLE001 - reported to the parent, which falls back
        conn.send(("error", repr(e), None))
    finally:
        conn.close()


def scan_commitlog_parallel(files: list[QueueFile], root: Path | None, *, check_crc: bool = True,
                            file_size: int | None = None, result: ScanResult | None = None,
                            progress: Callable[[int], None] | None = None, jobs: int | None = None,
                            ) -> Iterator[Problem]:
    """`scan_commitlog` on two cores: the second half (of the files, or of a single large file from
    a sync point) is checked in a forked process while this one checks the first.

    The halves are joined only when the first ends exactly where the second starts with no
    problem; otherwise (damage, a false sync point) the whole log is scanned again sequentially,
    so the result is always the sequential one.
    """
    import multiprocessing
    import os

    res = result if result is not None else ScanResult()
    jobs = jobs if jobs is not None else (os.cpu_count() or 1)
    sizes = [qf.path.stat().st_size for qf in files] if files else []
    if jobs < 2 or sum(sizes) < PARALLEL_MIN_BYTES or "fork" not in multiprocessing.get_all_start_methods():
        yield from scan_commitlog(files, root, check_crc=check_crc, file_size=file_size, result=res,
                                  progress=progress)
        return
    fsize = file_size if file_size is not None else sizes[0]
    if len(files) == 1:
        s = _sync_point(files[0], sizes[0])
        if s is None:
            yield from scan_commitlog(files, root, check_crc=check_crc, file_size=file_size, result=res,
                                      progress=progress)
            return
        first, second, r1_range, r2_range, boundary = files, files, (0, s), (s, None), files[0].base + s
    else:
        k = len(files) // 2
        first, second, r1_range, r2_range, boundary = files[:k], files[k:], None, None, files[k].base
    ctx = multiprocessing.get_context("fork")
    parent_conn, child_conn = ctx.Pipe(duplex=False)
    child = ctx.Process(target=_child_scan, args=(child_conn, second, root, check_crc, fsize, r2_range), daemon=True)
    child.start()
    child_conn.close()
    r1 = ScanResult()
    problems1 = list(scan_commitlog(first, root, check_crc=check_crc, file_size=fsize, result=r1, progress=progress,
                                    byte_range=r1_range))
    try:
        status, problems2, r2 = parent_conn.recv()
    except EOFError:
        status, problems2, r2 = "error", [], None
    child.join()
    if status != "ok" or problems1 or r1.stop is not None or r1.end_offset != boundary or r2 is None:
        yield from scan_commitlog(files, root, check_crc=check_crc, file_size=file_size, result=res,
                                  progress=progress)
        return
    res.min_offset = files[0].base
    res.end_offset = r2.end_offset
    res.records = r1.records + r2.records
    res.bytes_checked = r2.bytes_checked if len(files) == 1 else r1.bytes_checked + r2.bytes_checked
    res.first_store_timestamp = r1.first_store_timestamp or r2.first_store_timestamp
    res.last_store_timestamp = max(r1.last_store_timestamp, r2.last_store_timestamp)
    res.stop = r2.stop
    res.queues = dict(r1.queues)
    for key, st in r2.queues.items():
        mine = res.queues.get(key)
        if mine is None:
            res.queues[key] = st
        else:
            res.queues[key] = QueueStat(mine.count + st.count, min(mine.min_queue_offset, st.min_queue_offset),
                                        max(mine.max_queue_offset, st.max_queue_offset))
    yield from problems2
