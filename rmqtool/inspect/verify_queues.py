"""verify for the optional ConsumeQueue relatives: BatchConsumeQueues and ConsumeQueueExt files.

A BatchConsumeQueue unit is checked against its record as a ConsumeQueue unit is (size, topic,
queue, tagsCode) plus what only it has: msgBaseOffset and batchSize against the record's queue
offset and INNER_BASE / INNER_NUM (`CommitLog.setBatchSizeIfNeeded`), its storeTimestamp, and
continuity (each unit starts where the previous one's batch ends). Ext files are checked for
readable units; the CQ units that point into them are checked by verify.check_consume_queues.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from rmqtool.inspect import derive
from rmqtool.inspect.bcq import BCQ_DIR, BcqEntry, iter_bcq_units
from rmqtool.inspect.commitlog import CommitLogReader
from rmqtool.inspect.cq import CqEnd, QueueRange, queue_dirs
from rmqtool.inspect.cqext import CQ_EXT_DIR, ExtEntry, ExtReader, iter_ext_units
from rmqtool.inspect.derive_queues import batch_unit_of
from rmqtool.inspect.files import QueueFile, queue_files, relpath
from rmqtool.inspect.problems import Problem
from rmqtool.inspect.strays import check_queue_names, queue_file_size
from rmqtool.layouts.cqext import undecorate
from rmqtool.layouts.message import Blank, MessageExt, RecordError


def check_file_sequence(files: list[QueueFile], root: Path, file_size: int, what: str) -> Iterator[Problem]:
    """A queue's files follow each other (each starts where the previous ends) and all but the
    last have the configured size, as MappedFileQueue.load requires."""
    prev_end = None
    for qf in files:
        size = qf.path.stat().st_size
        if prev_end is not None and qf.base != prev_end:
            yield Problem(relpath(qf.path, root), 0, "cq-gap",
                          f"file starts at byte {qf.base}, the previous file ends at {prev_end}")
        if size != file_size and qf is not files[-1]:
            yield Problem(relpath(qf.path, root), 0, "file-size-mismatch",
                          f"{what} file is {size} bytes, expected {file_size}")
        prev_end = qf.base + size


def past_end_problem(rel: str, pos: int, count: int, queue_offset: int, commit_log_offset: int,
                     good_end: int) -> Problem:
    """Units from `queue_offset` on point past the good CommitLog data: recovery drops them."""
    return Problem(rel, pos, "cq-unit-mismatch",
                   f"{count} unit(s) from queue offset {queue_offset} point at CommitLog {commit_log_offset} and "
                   f"later, past the end of the good data at {good_end}; recovery truncates them")


def trailing_data_problem(end: CqEnd, root: Path) -> Iterator[Problem]:
    """Non-zero bytes after a queue's last unit, which recovery truncates."""
    if end.file is not None and end.trailing_nonzero >= 0:
        yield Problem(relpath(end.file.path, root), end.pos, "cq-gap",
                      f"units end at byte {end.pos}, but non-zero data follows at {end.trailing_nonzero}; "
                      "recovery truncates it")


def check_batch_consume_queues(root: Path, reader: CommitLogReader, st) -> Iterator[Problem]:
    """Every BatchConsumeQueue under batchconsumequeue/ (st: verify.VerifyState; fills st.ranges)."""
    scan, cfg = st.scan, st.cfg
    for topic, qid, qdir in queue_dirs(root / BCQ_DIR):
        files = queue_files(qdir)
        st.files_checked += len(files)
        rng = st.ranges[(topic, qid)] = QueueRange()
        yield from check_queue_names(qdir, root, queue_file_size(files, cfg.bcq_file_size, "bcq_file_size" in cfg.from_conf),
                                     what="BatchConsumeQueue", engine=False)
        yield from check_file_sequence(files, root, cfg.bcq_file_size, "BatchConsumeQueue")
        end = CqEnd()
        last: BcqEntry | None = None
        found_min = False
        past: tuple[str, BcqEntry] | None = None
        past_count = 0
        for u in iter_bcq_units(files, end):
            rel = relpath(u.file.path, root)
            if last is not None and u.msg_base_offset != last.end_offset:
                yield Problem(rel, u.pos, "cq-gap", f"unit starts at queue offset {u.msg_base_offset}, the previous "
                              f"unit's batch ends at {last.end_offset}")
            last = u
            if u.commit_log_offset < scan.min_offset:
                continue  # expired: its CommitLog file was deleted
            if not found_min:
                found_min, rng.min_offset = True, u.msg_base_offset
            if u.commit_log_offset + u.size > scan.end_offset:
                past = past or (rel, u)
                past_count += 1
                continue
            yield from _check_bcq_unit(u, rel, topic, qid, reader, st)
        if past is not None:
            rel, u = past
            yield past_end_problem(rel, u.pos, past_count, u.msg_base_offset, u.commit_log_offset, scan.end_offset)
        if last is not None:
            rng.max_offset = last.end_offset  # BatchConsumeQueue.reviseMaxOffsetInQueue
            rng.max_phys_end = last.commit_log_offset + last.size
        rng.min_offset = rng.min_offset if found_min else rng.max_offset
        yield from trailing_data_problem(end, root)
        stat = scan.queues.get((topic, qid))
        if stat is not None and (last is None or stat.max_queue_offset > last.msg_base_offset):
            yield Problem(relpath(files[-1].path, root) if files else f"{BCQ_DIR}/{topic}/{qid}",
                          end.pos if end.file is not None else 0, "cq-missing-units",
                          f"the CommitLog holds records up to queue offset {stat.max_queue_offset}, the "
                          f"BatchConsumeQueue's last unit starts at {last.msg_base_offset if last else 'none'}")


def unit_record(reader: CommitLogReader, rel: str, pos: int, unit: str, commit_log_offset: int, size: int,
                topic: str, qid: int) -> Problem | tuple[MessageExt, list[str]]:
    """The record a queue unit points at and how its size and queue differ from the unit's, or the
    problem when there is no record there (shared by ConsumeQueue and BatchConsumeQueue units)."""
    try:
        msg = reader.read(commit_log_offset, check_crc=False, read_body=False)
    except (RecordError, Blank) as e:
        return Problem(rel, pos, "cq-unit-mismatch",
                       f"{unit} points at CommitLog {commit_log_offset}, which is not a record: {e}")
    diffs = []
    if msg.total_size != size:
        diffs.append(f"size {size} vs totalSize {msg.total_size}")
    if msg.topic != topic or msg.queue_id != qid:
        diffs.append(f"record is on {msg.topic}/{msg.queue_id}")
    return msg, diffs


def _check_bcq_unit(u: BcqEntry, rel: str, topic: str, qid: int, reader: CommitLogReader, st) -> Iterator[Problem]:
    got = unit_record(reader, rel, u.pos, f"unit of queue offset {u.msg_base_offset}", u.commit_log_offset, u.size,
                      topic, qid)
    if isinstance(got, Problem):
        yield got
        return
    msg, diffs = got
    base, num = batch_unit_of(msg)
    if (base, num) != (u.msg_base_offset, u.batch_size):
        diffs.append(f"msgBaseOffset/batchSize {u.msg_base_offset}/{u.batch_size}, the record gives {base}/{num}")
    if msg.queue_offset != u.msg_base_offset:
        diffs.append(f"record's queueOffset is {msg.queue_offset}")
    if msg.store_timestamp != u.store_timestamp:
        diffs.append(f"storeTimestamp {u.store_timestamp}, the record's is {msg.store_timestamp}")
    want = derive.tags_code(msg, st.cfg)
    if not diffs and want != u.tags_code:
        diffs.append(f"tagsCode {u.tags_code}, the record's tags give {want}")
    if diffs:
        yield Problem(rel, u.pos, "cq-unit-mismatch",
                      f"unit {u.msg_base_offset} -> CommitLog {u.commit_log_offset}: " + "; ".join(diffs))


def check_ext_files(root: Path, st) -> Iterator[Problem]:
    """Each ext queue's units can be read back to back, as `ConsumeQueueExt.recover` skips them."""
    for _topic, _qid, qdir in queue_dirs(root / CQ_EXT_DIR):
        files = queue_files(qdir)
        st.files_checked += len(files)
        yield from check_queue_names(qdir, root, queue_file_size(files, st.cfg.cq_ext_file_size,
                                                                 "cq_ext_file_size" in st.cfg.from_conf),
                                     what="ConsumeQueueExt", when="with enableConsumeQueueExt=true ", engine=False)
        for e in iter_ext_units(files):
            if e.problem is not None:
                yield Problem(relpath(e.file.path, root), e.pos, "cq-ext-unit-bad", e.problem)


def ext_unit_diffs(ext: ExtReader | None, address: int, msg: MessageExt, want_tags: int) -> list[str]:
    """What is wrong with the ext unit a CQ unit's tagsCode address points at (empty when right)."""
    e: ExtEntry | None = ext.get(address) if ext is not None else None
    if e is None:
        return [f"tagsCode is a ConsumeQueueExt address (ext offset {undecorate(address)}) with no readable unit there"]
    diffs = []
    if e.tags_code != want_tags:
        diffs.append(f"ext unit tagsCode {e.tags_code}, the record's tags give {want_tags}")
    if e.msg_store_time != msg.store_timestamp:
        diffs.append(f"ext unit msgStoreTime {e.msg_store_time}, the record's storeTimestamp is {msg.store_timestamp}")
    return diffs
