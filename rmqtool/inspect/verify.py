"""`rmqtool verify`: every check RocketMQ's recovery makes, and the cross-checks it does not.

`check_store(root)` yields `Problem`s in a stable order: CommitLog, ConsumeQueues,
BatchConsumeQueues, index files, ConsumeQueueExt files, TimerLog, timer wheel, checkpoints, configs. Everything is read-only.
"""

from __future__ import annotations

import array
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from rmqtool.errors import InvalidInput
from rmqtool.inspect import derive
from rmqtool.inspect.bcq import BCQ_DIR
from rmqtool.inspect.commitlog import CommitLogReader, ScanResult, scan_commitlog_parallel
from rmqtool.inspect.configs import ConfigError, int_keyed, is_config_file, load_config
from rmqtool.inspect.cq import CqEnd, QueueRange, iter_units, queue_dirs
from rmqtool.inspect.cqext import CQ_EXT_DIR, ExtReader
from rmqtool.inspect.files import INDEX_NAME, ReadOnlyFile, queue_files, relpath
from rmqtool.inspect.layoutconfig import LayoutConfig, load_layout_config
from rmqtool.inspect.problems import Problem
from rmqtool.inspect.strays import check_index_names, check_queue_names, queue_file_size
from rmqtool.inspect.timercheck import TimerLogEnd, check_timerlog_units, check_wheel_slots, iter_timerlog
from rmqtool.inspect.verify_queues import (
    check_batch_consume_queues,
    check_ext_files,
    check_file_sequence,
    ext_unit_diffs,
    past_end_problem,
    trailing_data_problem,
    unit_record,
)
from rmqtool.layouts.checkpoint import STORE_CHECKPOINT, TIMER_CHECKPOINT
from rmqtool.layouts.constants import (
    CQ_STORE_UNIT_SIZE,
    INDEX_ENTRY_SIZE,
    INDEX_HEADER_SIZE,
    INDEX_SLOT_SIZE,
    SCHEDULE_TOPIC,
    TIMER_TOPIC,
)
from rmqtool.layouts.cqext import is_ext_addr
from rmqtool.layouts.index import INDEX_ENTRY, INDEX_HEADER
from rmqtool.layouts.message import Blank, RecordError


@dataclass
class VerifyState:
    """What the checks learn along the way (`inspect store` shows some of it)."""

    cfg: LayoutConfig
    scan: ScanResult = field(default_factory=ScanResult)
    ranges: dict[tuple[str, int], QueueRange] = field(default_factory=dict)
    timerlog_end: int = 0
    files_checked: int = 0
    # a slave's store (or a replicate copy): its consumer and delay offsets and the timer
    # checkpoint's masterTimerQueueOffset are the master's (SlaveSynchronize), judged against the
    # master's queues, not this store's (which start at the file the slave began with, and may lag)
    replica: bool = False
    replica_skipped: int = 0


def _unless_copied(st: VerifyState, problem: Problem) -> Iterator[Problem]:
    """`problem`, unless it is about a value a replica copied from its master."""
    if st.replica:
        st.replica_skipped += 1
        return
    yield problem


def check_store(root: Path, *, check_crc: bool = True, state: VerifyState | None = None,
                progress: Callable[[int], None] | None = None, jobs: int | None = None) -> Iterator[Problem]:
    root = Path(root)
    if not root.is_dir():
        raise InvalidInput(f"{root}: not a directory")
    if not (root / "commitlog").is_dir():
        raise InvalidInput(f"{root}: not a store directory (no commitlog/)")
    st = state or VerifyState(load_layout_config(root))
    st.cfg = st.cfg or load_layout_config(root)
    files = queue_files(root / "commitlog")
    yield from check_queue_names(root / "commitlog", root,
                                 queue_file_size(files, st.cfg.commitlog_file_size,
                                                 "commitlog_file_size" in st.cfg.from_conf), what="CommitLog")
    yield from scan_commitlog_parallel(files, root, check_crc=check_crc, result=st.scan, progress=progress, jobs=jobs,
                              file_size=st.cfg.commitlog_file_size if "commitlog_file_size" in st.cfg.from_conf
                              else None)
    st.files_checked += len(files)
    with CommitLogReader(files) as reader:
        yield from check_consume_queues(root, reader, st)
        yield from check_batch_consume_queues(root, reader, st)
        yield from check_index_files(root, reader, st)
    yield from check_ext_files(root, st)
    yield from check_queue_names(root / "timerlog", root,
                                 queue_file_size(queue_files(root / "timerlog"), st.cfg.timerlog_file_size,
                                                 "timerlog_file_size" in st.cfg.from_conf),
                                 what="TimerLog", when="with timerWheelEnable=true (the default) ")
    yield from check_timerlog_units(root, st.cfg)
    yield from check_wheel_slots(root, st.cfg)
    yield from check_checkpoints(root, st)
    yield from check_configs(root, st)
    from rmqtool.inspect.pop import check_revive_records

    yield from check_revive_records(root, st.ranges)


def check_consume_queues(root: Path, reader: CommitLogReader, st: VerifyState) -> Iterator[Problem]:
    """Each unit against its record; continuity; the CommitLog's queues against the CQ's."""
    scan, cfg = st.scan, st.cfg
    seen: set[tuple[str, int]] = set()
    for topic, qid, qdir in queue_dirs(root / "consumequeue"):
        seen.add((topic, qid))
        files = queue_files(qdir)
        st.files_checked += len(files)
        rng = st.ranges[(topic, qid)] = QueueRange()
        yield from check_queue_names(qdir, root, queue_file_size(files, cfg.cq_file_size, "cq_file_size" in cfg.from_conf),
                                     what="ConsumeQueue")
        if not files:
            continue
        yield from check_file_sequence(files, root, cfg.cq_file_size, "ConsumeQueue")
        end = CqEnd()
        ext = ExtReader(root / CQ_EXT_DIR / topic / str(qid))
        rng.min_offset = files[0].base // CQ_STORE_UNIT_SIZE
        found_min = False
        last = None
        past_end: tuple[str, object] | None = None
        past_count = 0
        for u in iter_units(files, end):
            last = u
            rel = relpath(u.file.path, root)
            if u.is_blank:
                if found_min:
                    yield Problem(rel, u.pos, "cq-unit-mismatch", "a pre-fill blank unit after real units")
                rng.min_offset = u.queue_offset + 1
                continue
            if u.commit_log_offset < scan.min_offset:
                rng.min_offset = u.queue_offset + 1  # expired: the CommitLog file was deleted
                continue
            if not found_min:
                found_min = True
                rng.min_offset = u.queue_offset
            if u.commit_log_offset + u.size > scan.end_offset:
                if past_end is None:
                    past_end = (rel, u)
                past_count += 1
                continue
            yield from _check_unit(u, rel, topic, qid, reader, st, ext)
        ext.close()
        if past_end is not None:
            rel, u = past_end
            yield past_end_problem(rel, u.pos, past_count, u.queue_offset, u.commit_log_offset, scan.end_offset)
        if last is not None:
            rng.max_offset = last.queue_offset + 1
            rng.max_phys_end = -1 if last.is_blank else last.commit_log_offset + last.size
        else:
            rng.max_offset = rng.min_offset
        if not found_min:
            rng.min_offset = rng.max_offset
        yield from trailing_data_problem(end, root)
        stat = scan.queues.get((topic, qid))
        if stat is not None and stat.max_queue_offset + 1 > rng.max_offset:
            yield Problem(relpath(files[-1].path, root), (rng.max_offset * CQ_STORE_UNIT_SIZE) - files[-1].base
                          if rng.max_offset * CQ_STORE_UNIT_SIZE >= files[-1].base else 0, "cq-missing-units",
                          f"the CommitLog holds queue offsets up to {stat.max_queue_offset}, the ConsumeQueue "
                          f"ends at {rng.max_offset}; `rmqtool repair` rebuilds it")
    for (topic, qid), stat in sorted(scan.queues.items()):
        if (topic, qid) not in seen and not (root / BCQ_DIR / topic / str(qid)).is_dir():  # a BatchCQ topic
            yield Problem(f"consumequeue/{topic}/{qid}", 0, "cq-missing-units",
                          f"{stat.count} CommitLog records of this queue have no ConsumeQueue; "
                          "`rmqtool repair` rebuilds it")


def _check_unit(u, rel: str, topic: str, qid: int, reader: CommitLogReader, st: VerifyState,
                ext: ExtReader | None = None) -> Iterator[Problem]:
    got = unit_record(reader, rel, u.pos, f"unit {u.queue_offset}", u.commit_log_offset, u.size, topic, qid)
    if isinstance(got, Problem):
        yield got
        return
    msg, diffs = got
    if msg.queue_offset != u.queue_offset:
        diffs.append(f"record's queueOffset is {msg.queue_offset}")
    if not diffs:
        want = derive.tags_code(msg, st.cfg)
        if is_ext_addr(u.tags_code):  # enableConsumeQueueExt: the tags and store time are in the ext unit
            diffs.extend(ext_unit_diffs(ext, u.tags_code, msg, want))
        elif want != u.tags_code and not (topic == SCHEDULE_TOPIC and u.tags_code > 0):
            diffs.append(f"tagsCode {u.tags_code}, the record's tags give {want}")
    if diffs:
        yield Problem(rel, u.pos, "cq-unit-mismatch",
                      f"unit {u.queue_offset} -> CommitLog {u.commit_log_offset}: " + "; ".join(diffs))


def check_index_files(root: Path, reader: CommitLogReader, st: VerifyState) -> Iterator[Problem]:
    """Header sanity, slot values, and each entry against its record's keys."""
    idir = root / "index"
    if not idir.is_dir():
        return
    cfg = st.cfg
    yield from check_index_names(idir, root, cfg.index_file_size)
    for path in sorted(idir.iterdir()):
        if not path.is_file() or not INDEX_NAME.match(path.name):
            continue
        rel = relpath(path, root)
        st.files_checked += 1
        yield from check_index_file(path, rel, reader, st.scan, cfg)


def check_index_file(path: Path, rel: str, reader: CommitLogReader | None, scan: ScanResult | None,
                     cfg: LayoutConfig) -> Iterator[Problem]:
    from rmqtool.inspect.derive import index_keys, key_hash, tag_index_keys

    with ReadOnlyFile(path) as rof:
        buf, size = rof.buf, rof.size
        if size != cfg.index_file_size:
            yield Problem(rel, 0, "index-header-bad",
                          f"file is {size} bytes; hashSlotNum {cfg.hash_slot_num} and indexNum {cfg.index_num} "
                          f"give {cfg.index_file_size}")
            if size < INDEX_HEADER_SIZE:
                return
        b_ts, e_ts, b_phy, e_phy, slot_count, count = INDEX_HEADER.unpack_from(buf, 0)
        if count <= 0:
            count = 1
        entries_at = INDEX_HEADER_SIZE + cfg.hash_slot_num * INDEX_SLOT_SIZE
        max_entries = max(0, (size - entries_at) // INDEX_ENTRY_SIZE)
        if count > max_entries or count > cfg.index_num:
            yield Problem(rel, 36, "index-header-bad", f"indexCount {count} exceeds the file's {max_entries} entries")
            count = min(count, max_entries)
        if b_ts > e_ts or b_phy > e_phy:
            yield Problem(rel, 0, "index-header-bad",
                          f"begin after end (timestamps {b_ts}..{e_ts}, offsets {b_phy}..{e_phy})")
        nslots = min(cfg.hash_slot_num, (size - INDEX_HEADER_SIZE) // INDEX_SLOT_SIZE)
        slots = array.array("i", bytes(buf[INDEX_HEADER_SIZE : INDEX_HEADER_SIZE + nslots * INDEX_SLOT_SIZE]))
        if sys.byteorder == "little":
            slots.byteswap()
        # min/max run in C over the 5M default slots; the Python loop only runs on damage
        if slots and (min(slots) < 0 or max(slots) >= count):
            for slot, v in enumerate(slots):
                if (v < 0 or v >= count) and v != 0:
                    yield Problem(rel, INDEX_HEADER_SIZE + slot * INDEX_SLOT_SIZE, "index-entry-bad",
                                  f"slot {slot} points at entry {v}, outside 1..{count - 1}")
        del slots
        key_cache: dict[int, set[int] | None] = {}
        past_end: tuple[int, int, int] | None = None
        past_count = 0
        for n in range(1, count):
            epos = entries_at + n * INDEX_ENTRY_SIZE
            h, phy, diff, prev = INDEX_ENTRY.unpack_from(buf, epos)
            why = None
            if prev < 0 or prev >= n:
                why = f"prevIndex {prev} is not an earlier entry"
            elif diff < 0:
                why = f"timeDiff {diff} is negative"
            elif scan is not None and phy < scan.min_offset:
                continue  # its CommitLog file has expired
            elif scan is not None and phy >= scan.end_offset:
                if past_end is None:
                    past_end = (n, epos, phy)
                past_count += 1
                continue
            elif reader is not None:
                if phy in key_cache:
                    hashes = key_cache[phy]
                    if hashes is None:
                        continue  # already reported
                else:
                    try:
                        msg = reader.read(phy, check_crc=False, read_body=False)
                        hashes = {key_hash(k) for k in (*index_keys(msg), *tag_index_keys(msg))}
                    except (RecordError, Blank) as e:
                        why = f"phyOffset {phy} is not a CommitLog record: {e}"
                        hashes = None
                    if len(key_cache) > 4096:
                        key_cache.clear()
                    key_cache[phy] = hashes
                if why is None and hashes is not None and h not in hashes:
                    why = f"keyHash {h} is not a key of the record at {phy}"
            if why:
                yield Problem(rel, epos, "index-entry-bad", f"entry {n}: {why}")
        if past_end is not None:
            n, epos, phy = past_end
            yield Problem(rel, epos, "index-entry-bad",
                          f"{past_count} entr(ies) from entry {n} point at CommitLog {phy} and later, past the "
                          f"end of the good data at {scan.end_offset if scan else '?'}")


def check_checkpoints(root: Path, st: VerifyState) -> Iterator[Problem]:
    scan = st.scan
    cp = root / "checkpoint"
    if cp.is_file():
        raw = cp.read_bytes()[:64]
        if len(raw) < STORE_CHECKPOINT.size:
            yield Problem("checkpoint", 0, "file-size-mismatch", f"checkpoint is {len(raw)} bytes, not 4096")
        else:
            physic, logics, index_ts, _master, confirm = STORE_CHECKPOINT.unpack_from(raw, 0)
            last = scan.last_store_timestamp
            for pos, name, v in ((0, "physicMsgTimestamp", physic), (8, "logicsMsgTimestamp", logics),
                                 (16, "indexMsgTimestamp", index_ts)):
                if last and v > last:
                    yield Problem("checkpoint", pos, "checkpoint-ahead",
                                  f"{name} {v} is after the newest stored message ({last})")
            if confirm > scan.end_offset:
                yield Problem("checkpoint", 32, "checkpoint-ahead",
                              f"confirmPhyOffset {confirm} is past the end of the CommitLog data ({scan.end_offset})")
    tc = root / "config" / "timercheck"
    if tc.is_file():
        raw = tc.read_bytes()[:64]
        if len(raw) < TIMER_CHECKPOINT.size:
            yield Problem("config/timercheck", 0, "file-size-mismatch", f"timercheck is {len(raw)} bytes, not 4096")
            return
        _read, flush_pos, q_off, master_q, *_ = TIMER_CHECKPOINT.unpack_from(raw, 0)
        end = TimerLogEnd()
        for _u in iter_timerlog(queue_files(root / "timerlog"), root, end):
            pass
        files = queue_files(root / "timerlog")
        if files and end.offset == 0:
            end.offset = files[0].base
        st.timerlog_end = end.offset
        if flush_pos > end.offset and not (files and flush_pos <= files[-1].base + files[-1].path.stat().st_size
                                           and end.bad is None and _blank_end(files, flush_pos)):
            yield Problem("config/timercheck", 8, "timercheck-ahead",
                          f"lastTimerLogFlushPos {flush_pos} is past the end of the TimerLog units ({end.offset})")
        rng = st.ranges.get((TIMER_TOPIC, 0))
        max_q = rng.max_offset if rng else 0
        for pos, name, v in ((16, "lastTimerQueueOffset", q_off), (24, "masterTimerQueueOffset", master_q)):
            if v > max_q:
                problem = Problem("config/timercheck", pos, "timercheck-ahead",
                                  f"{name} {v} is past the end of {TIMER_TOPIC}/0 ({max_q})")
                yield from (_unless_copied(st, problem) if name == "masterTimerQueueOffset" else (problem,))


def _blank_end(files, flush_pos: int) -> bool:
    """A flush position at a file boundary after a TimerLog blank is fine."""
    return any(flush_pos == f.base for f in files)


def check_configs(root: Path, st: VerifyState) -> Iterator[Problem]:
    cdir = root / "config"
    if not cdir.is_dir():
        return
    parsed = {}
    for path in sorted(cdir.iterdir()):
        if is_config_file(path):
            st.files_checked += 1
            try:
                parsed[path.name] = load_config(path)
            except ConfigError as e:
                yield Problem(relpath(path, root), e.pos, "config-unparsable", e.detail)
    delay = parsed.get("delayOffset.json")
    if isinstance(delay, dict):
        nlevels = len(st.cfg.delay_levels_ms)
        for level, off in sorted(int_keyed(delay.get("offsetTable")).items()):
            rng = st.ranges.get((SCHEDULE_TOPIC, level - 1), QueueRange())
            if level < 1 or level > nlevels:
                yield Problem("config/delayOffset.json", 0, "delay-offset-out-of-range",
                              f"delay level {level} does not exist (1..{nlevels})")
            elif off < rng.min_offset or off > rng.max_offset:
                yield from _unless_copied(st, Problem(
                    "config/delayOffset.json", 0, "delay-offset-out-of-range",
                    f"level {level}: offset {off} outside {SCHEDULE_TOPIC}/{level - 1} [{rng.min_offset}, {rng.max_offset}]"))
    co = parsed.get("consumerOffset.json")
    if isinstance(co, dict):
        table = co.get("offsetTable")
        for key, qmap in sorted((table or {}).items()) if isinstance(table, dict) else []:
            topic, _, group = key.partition("@")
            for qid, off in sorted(int_keyed(qmap).items()):
                rng = st.ranges.get((topic, qid), QueueRange())
                if 0 <= off < rng.min_offset <= rng.max_offset:
                    # cleanup deleted messages this group never consumed (an expired or a full disk)
                    yield from _unless_copied(st, Problem(
                        "config/consumerOffset.json", 0, "consumer-offset-below-min",
                        f"group {group} on {topic}/{qid}: committed offset {off} is below the queue's minimum offset "
                        f"{rng.min_offset}: {rng.min_offset - off} message(s) were deleted before the group consumed them"))
                elif off < rng.min_offset or off > rng.max_offset:
                    yield from _unless_copied(st, Problem(
                        "config/consumerOffset.json", 0, "consumer-offset-out-of-range",
                        f"group {group} on {topic}/{qid}: offset {off} outside [{rng.min_offset}, {rng.max_offset}]"))


