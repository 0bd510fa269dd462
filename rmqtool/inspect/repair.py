"""`rmqtool repair`: what a broker's recovery would do, done once, with nothing thrown away.

1. Cut the CommitLog at the first record recovery would stop at (bad magic, CRC, size, torn
   tail, a gap between files) and set aside every later file, as `recoverAbnormally` +
   `truncateDirtyFiles` do.
2. Cut the TimerLog at the first bad unit.
3. Rebuild every ConsumeQueue, BatchConsumeQueue and index file from the CommitLog (the dispatch
   rules of `rmqtool.inspect.derive`), and the timer wheel from the TimerLog (`reviseSlot`).
4. Pull checkpoints that are ahead of the data back to it, and clamp delay and consumer offsets
   to their queues' ranges.

BatchCQ topics. A broker's dispatch gives a topic's records BatchConsumeQueue units
(`batchconsumequeue/<topic>/<queueId>/`, one unit per record with msgBaseOffset and batchSize)
instead of ConsumeQueue units when the topic's config says `queue.type=BatchCQ`
(`ConsumeQueueStore.findOrCreateConsumeQueue`, `QueueTypeUtils.getCQType`). Repair's rule: a topic
is BatchCQ when config/topics.json (or topics.json.bak, as a broker falls back to it) marks it so,
or when the store has a `batchconsumequeue/<topic>/<queueId>/` directory for it (a broker only
creates one for a BatchCQ topic, and refuses to load one whose topic config disagrees, so the
directory is the better witness when topics.json is missing or lost the attribute). The records of
BatchCQ topics get BatchConsumeQueue units only (`putBatchMessagePositionInfo`, from file 0 as a
broker rebuilding an empty queue does), never ConsumeQueue units; their consumer offsets are
checked against the BatchConsumeQueue range, [first msgBaseOffset, last msgBaseOffset + batchSize],
which counts messages, not records. Other topics are rebuilt as before.

ConsumeQueueExt files (`enableConsumeQueueExt`) are kept as they are, not rebuilt: an ext unit's
filter bit map is what the consumers' SQL92 filters registered at dispatch time made of the
message (`CommitLogDispatcherCalcBitMap`), which the CommitLog does not hold. A rebuilt
ConsumeQueue unit keeps its old ext address when the old unit at that queue offset pointed at the
same record and the ext unit there still holds the record's tagsCode and store time; any other
unit gets the plain tagsCode, which is what `ConsumeQueue.putMessagePositionInfoWrapper` stores
when the ext put fails and what a broker reads like any tag hash. So no rebuilt unit points at an
ext address that does not match its record. The rebuild-consumequeue action says how many units
kept their address and how many lost it.

Every cut byte range and every replaced file is moved or copied into `<store>/repair-<time>/`
under its original relative path (a cut range as `<name>.<offset>`), with `plan.json` listing
what was done. Repair is the one write path of inspect: it takes the store's `lock` (both
`flock` and a POSIX record lock, as a Java broker's `FileChannel.tryLock`) and refuses a store
someone holds.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from rmqtool.errors import InvalidInput
from rmqtool.inspect import derive
from rmqtool.inspect import repair_queues as rq
from rmqtool.inspect.bcq import BCQ_DIR
from rmqtool.inspect.commitlog import ScanResult, scan_commitlog
from rmqtool.inspect.cqext import CQ_EXT_DIR
from rmqtool.inspect.derive_queues import BatchConsumeQueueWriter, batch_unit_of
from rmqtool.inspect.files import INDEX_NAME, ReadOnlyFile, queue_files
from rmqtool.inspect.layoutconfig import LayoutConfig, load_layout_config
from rmqtool.inspect.timercheck import TimerLogEnd, iter_timerlog
from rmqtool.layouts.checkpoint import STORE_CHECKPOINT, TIMER_CHECKPOINT
from rmqtool.layouts.constants import TIMER_TOPIC
from rmqtool.layouts.message import Blank, RecordError, decode_record


@dataclass
class Action:
    # truncate | set-aside | rebuild-consumequeue | rebuild-batchconsumequeue | rebuild-index | rebuild-timerwheel
    # | rewrite-checkpoint | clamp-offsets | restore-config
    action: str
    path: str
    pos: int = 0
    detail: str = ""
    saved_to: str | None = None
    length: int = 0

    def to_json(self) -> dict[str, Any]:
        d = {"action": self.action, "path": self.path, "pos": self.pos, "detail": self.detail}
        if self.length:
            d["length"] = self.length
        if self.saved_to:
            d["savedTo"] = self.saved_to
        return d


@dataclass
class Plan:
    root: Path
    side_dir: Path
    actions: list[Action] = field(default_factory=list)
    commitlog_end: int = 0
    timerlog_end: int = 0
    bcq_topics: dict[str, str] = field(default_factory=dict)  # BatchCQ topic -> why (repair_queues.batchcq_topics)
    # [min, max] of every queue as the rebuilt (Batch)ConsumeQueues will have them
    ranges: dict[tuple[str, int], tuple[int, int]] = field(default_factory=dict, repr=False)
    # ConsumeQueue units that keep their ConsumeQueueExt address: (topic, qid) -> qoff -> (phys, size, addr)
    ext_keep: dict[tuple[str, int], dict[int, tuple[int, int, int]]] = field(default_factory=dict, repr=False)


@contextmanager
def store_lock(root: Path) -> Iterator[None]:
    """Hold the store's `lock` as the store engine does (flock + POSIX record lock), or raise StoreLocked."""
    from rmqtool.store.lockfile import StoreLock

    lock = StoreLock(root)
    lock.acquire()
    try:
        yield
    finally:
        lock.release()


def _saved_name(rel: str, offset: int | None = None) -> str:
    return rel if offset is None else f"{rel}.{offset}"


def plan_repair(root: Path, cfg: LayoutConfig | None = None, *, now_ms: int | None = None) -> Plan:
    """What repair will do, without writing anything."""
    root = Path(root)
    if not (root / "commitlog").is_dir():
        raise InvalidInput(f"{root}: not a store directory (no commitlog/)")
    cfg = cfg or load_layout_config(root)
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime((now_ms or int(time.time() * 1000)) / 1000))
    plan = Plan(root, root / f"repair-{stamp}")
    plan.bcq_topics = rq.batchcq_topics(root)
    files = queue_files(root / "commitlog")
    scan = ScanResult()
    bcq_records = rq.BatchCqRecords(set(plan.bcq_topics)) if plan.bcq_topics else None
    for _ in scan_commitlog(files, root, check_crc=True, result=scan, on_record=bcq_records):
        pass
    plan.commitlog_end = scan.end_offset
    plan.ranges = _queue_ranges(scan, plan.bcq_topics)
    if bcq_records is not None:
        plan.ranges.update(rq.batchcq_ranges(files, bcq_records))
    for qf in files:
        size = qf.path.stat().st_size
        rel = f"commitlog/{qf.name}"
        if qf.base >= scan.end_offset and not (qf.base == scan.end_offset and first_nonzero_file(qf.path) < 0):
            plan.actions.append(Action("set-aside", rel, 0, "a file after the end of the good data "
                                       "(recovery's truncateDirtyFiles deletes it)", _saved_name(rel), size))
        elif qf.base < scan.end_offset < qf.base + size:
            pos = scan.end_offset - qf.base
            nz = first_nonzero_file(qf.path, pos)
            if nz >= 0:
                why = scan.stop.kind if scan.stop else "data after the end"
                plan.actions.append(Action("truncate", rel, pos, f"cut from the first bad record ({why}) to the end "
                                           "of the file, as recovery does", _saved_name(rel, pos), size - pos))
    # TimerLog
    tfiles = queue_files(root / "timerlog")
    end = TimerLogEnd()
    lost = None
    for u in iter_timerlog(tfiles, root, end):
        if u.offset_py + u.size_py > scan.end_offset and lost is None:
            lost = u
    if tfiles and end.offset == 0:
        end.offset = tfiles[0].base
    if lost is not None:
        from rmqtool.inspect.problems import Problem

        end.offset = lost.offset
        end.bad = Problem(f"timerlog/{lost.file.name}", lost.pos, "timerlog-unit-bad",
                          f"offsetPy {lost.offset_py} is past the end of the good CommitLog data ({scan.end_offset})")
    plan.timerlog_end = end.offset
    if end.bad is not None:
        for qf in tfiles:
            size = qf.path.stat().st_size
            rel = f"timerlog/{qf.name}"
            if qf.base <= end.offset < qf.base + size:
                pos = end.offset - qf.base
                plan.actions.append(Action("truncate", rel, pos, f"cut from the first bad TimerLog unit "
                                           f"({end.bad.detail})", _saved_name(rel, pos), size - pos))
            elif qf.base > end.offset:
                plan.actions.append(Action("set-aside", rel, 0, "a TimerLog file after the first bad unit",
                                           _saved_name(rel), size))
    ext_note = ""
    if (root / CQ_EXT_DIR).is_dir():
        plan.ext_keep, dropped = rq.ext_addresses_to_keep(root, files, scan.end_offset, cfg, set(plan.bcq_topics))
        kept = sum(len(m) for m in plan.ext_keep.values())
        ext_note = (f"; {CQ_EXT_DIR}/ is kept as it is (its filter bit maps cannot be derived from the CommitLog): "
                    f"{kept} unit(s) keep their ext address; {dropped} whose ext unit or record no longer matches, "
                    "and any without an old unit, get the plain tagsCode (what the broker stores when the ext "
                    "put fails)")
    if plan.bcq_topics:
        ext_note += (f"; the BatchCQ topic(s) {', '.join(sorted(plan.bcq_topics))} get BatchConsumeQueue units "
                     "instead")
    if (root / "consumequeue").exists():
        plan.actions.append(Action("rebuild-consumequeue", "consumequeue", 0,
                                   "set the old ConsumeQueues aside and rebuild them from the CommitLog" + ext_note,
                                   "consumequeue"))
    else:
        plan.actions.append(Action("rebuild-consumequeue", "consumequeue", 0, "build from the CommitLog" + ext_note))
    if plan.bcq_topics or (root / BCQ_DIR).exists():
        why = "; ".join(f"{t} ({w})" for t, w in sorted(plan.bcq_topics.items())) or "none"
        old = (root / BCQ_DIR).exists()
        plan.actions.append(Action("rebuild-batchconsumequeue", BCQ_DIR, 0,
                                   ("set the old BatchConsumeQueues aside and rebuild them" if old else "build them")
                                   + f" from the CommitLog, one unit per record, for the BatchCQ topics: {why}",
                                   BCQ_DIR if old else None))
    plan.actions.append(Action("rebuild-index", "index", 0, "set the old index files aside and rebuild them "
                               "from the CommitLog", "index" if (root / "index").exists() else None))
    if tfiles or (root / "timerwheel").exists():
        plan.actions.append(Action("rebuild-timerwheel", "timerwheel", 0, "rebuild the wheel from the TimerLog "
                                   "(recovery's reviseSlot)", "timerwheel" if (root / "timerwheel").exists()
                                   else None))
    cp = root / "checkpoint"
    if cp.is_file() and cp.stat().st_size >= STORE_CHECKPOINT.size:
        physic, logics, index_ts, _m, confirm = STORE_CHECKPOINT.unpack_from(cp.read_bytes(), 0)
        last = scan.last_store_timestamp if scan.stop is None else _last_good_ts(root, files, scan)
        if physic > last or logics > last or index_ts > last or confirm > scan.end_offset:
            plan.actions.append(Action("rewrite-checkpoint", "checkpoint", 0,
                                       f"pull timestamps back to {last} and confirmPhyOffset to {scan.end_offset}",
                                       "checkpoint"))
    tc = root / "config" / "timercheck"
    if tc.is_file() and tc.stat().st_size >= TIMER_CHECKPOINT.size:
        _r, flush, q, mq, *_ = TIMER_CHECKPOINT.unpack_from(tc.read_bytes(), 0)
        timer_max = _timer_queue_max(scan)
        if (flush > end.offset and not any(flush == f.base for f in tfiles)) or max(q, mq) > timer_max:
            plan.actions.append(Action("rewrite-checkpoint", "config/timercheck", 8,
                                       f"lastTimerLogFlushPos {flush} -> {min(flush, end.offset)}, queue offsets "
                                       f"{q}/{mq} -> at most {timer_max}", "config/timercheck"))
    plan.actions.extend(_config_clamps(root, plan.ranges))
    return plan


def _timer_queue_max(scan: ScanResult) -> int:
    st = scan.queues.get((TIMER_TOPIC, 0))
    return st.max_queue_offset + 1 if st else 0


def _queue_ranges(scan: ScanResult, bcq_topics=()) -> dict[tuple[str, int], tuple[int, int]]:
    """[min, max] per queue as the rebuilt ConsumeQueues will have them (BatchCQ queues left out:
    theirs count messages, `repair_queues.batchcq_ranges`)."""
    return {k: (st.min_queue_offset, st.max_queue_offset + 1) for k, st in scan.queues.items()
            if k[0] not in bcq_topics}


def _config_clamps(root: Path, ranges: dict[tuple[str, int], tuple[int, int]]) -> list[Action]:
    """Delay and consumer offsets outside their queues, clamped as `correctDelayOffset` does."""
    from rmqtool.inspect.configs import ConfigError, int_keyed, load_config
    from rmqtool.layouts.constants import SCHEDULE_TOPIC

    out = []
    for name in ("delayOffset.json", "consumerOffset.json"):
        path = root / "config" / name
        if not path.is_file():
            continue
        try:
            doc = load_config(path)
        except ConfigError:
            bak = path.with_name(name + ".bak")
            try:
                load_config(bak)
                out.append(Action("restore-config", f"config/{name}", 0, f"unparsable: restore {bak.name}, as a "
                                  "broker loads it instead", f"config/{name}"))
            except ConfigError:
                pass
            continue
        table = doc.get("offsetTable") if isinstance(doc, dict) else None
        if not isinstance(table, dict):
            continue
        changes = []
        if name == "delayOffset.json":
            for level, off in int_keyed(table).items():
                lo, hi = ranges.get((SCHEDULE_TOPIC, level - 1), (0, 0))
                if not lo <= off <= hi:
                    changes.append(f"level {level}: {off} -> {min(max(off, lo), hi)}")
        else:
            for key, qmap in table.items():
                topic = str(key).partition("@")[0]
                for qid, off in int_keyed(qmap).items():
                    lo, hi = ranges.get((topic, qid), (0, 0))
                    if not lo <= off <= hi:
                        changes.append(f"{key} queue {qid}: {off} -> {min(max(off, lo), hi)}")
        if changes:
            out.append(Action("clamp-offsets", f"config/{name}", 0, "; ".join(changes), f"config/{name}"))
    return out


def first_nonzero_file(path: Path, start: int = 0) -> int:
    with ReadOnlyFile(path) as rof:
        return rof.first_nonzero(start)


def _last_good_ts(root: Path, files, scan: ScanResult) -> int:
    last = 0
    for msg in iter_messages(files, scan.end_offset):
        last = max(last, msg.store_timestamp)
    return last


def iter_messages(files, end_offset: int) -> Iterator:
    """Good records up to `end_offset`, in order (the dispatch feed)."""
    for qf in files:
        if qf.base >= end_offset:
            return
        with ReadOnlyFile(qf.path) as rof:
            pos = 0
            limit = min(rof.size, end_offset - qf.base)
            while pos + 8 <= limit:
                try:
                    msg = decode_record(rof.buf, pos, rof.size, check_crc=False)
                except (Blank, RecordError):
                    break
                # where the record really is, even if its physicalOffset field says otherwise
                msg.commit_log_offset = qf.base + pos
                yield msg
                pos += msg.total_size


def apply_repair(plan: Plan, cfg: LayoutConfig | None = None) -> None:
    """Carry out `plan` (the caller holds the store lock)."""
    root = plan.root
    cfg = cfg or load_layout_config(root)
    side = plan.side_dir
    side.mkdir(parents=True, exist_ok=False)
    (side / "plan.json").write_text(json.dumps([a.to_json() for a in plan.actions], indent=2) + "\n")
    for a in plan.actions:
        if a.action == "truncate":
            _cut(root / a.path, a.pos, side / a.saved_to)  # type: ignore[operator]
        elif a.action == "set-aside":
            _move(root / a.path, side / a.path)
    for a in plan.actions:
        if a.action == "rebuild-consumequeue":
            if (root / "consumequeue").exists():
                _move(root / "consumequeue", side / "consumequeue")
        elif a.action == "rebuild-batchconsumequeue":
            if (root / BCQ_DIR).exists():
                _move(root / BCQ_DIR, side / BCQ_DIR)
        elif a.action == "rebuild-index":
            if (root / "index").exists():
                _move(root / "index", side / "index")
        elif a.action == "rebuild-timerwheel":
            if (root / "timerwheel").exists():
                _move(root / "timerwheel", side / "timerwheel")
    _rebuild_from_commitlog(root, cfg, plan)
    if any(a.action == "rebuild-timerwheel" for a in plan.actions):
        units = [(u.offset, u.curr_write_time, u.delay_time, u.magic)
                 for u in iter_timerlog(queue_files(root / "timerlog"), root)]
        derive.write_wheel(root / "timerwheel", derive.rebuild_wheel_slots(units, cfg.timer_precision_ms))
    for a in plan.actions:
        if a.action == "rewrite-checkpoint":
            _rewrite_checkpoint(root, a, plan, side)
        elif a.action in ("clamp-offsets", "restore-config"):
            _fix_config(root, a, side, plan.ranges)


def _fix_config(root: Path, a: Action, side: Path, ranges: dict[tuple[str, int], tuple[int, int]]) -> None:
    from rmqtool.inspect.configs import int_keyed, load_config
    from rmqtool.inspect.fastjson import to_fastjson
    from rmqtool.layouts.constants import SCHEDULE_TOPIC

    path = root / a.path
    (side / a.path).parent.mkdir(parents=True, exist_ok=True)
    shutil.copy2(path, side / a.path)
    if a.action == "restore-config":
        shutil.copy2(path.with_name(path.name + ".bak"), path)
        return
    doc = load_config(path)
    table = doc["offsetTable"]
    if path.name == "delayOffset.json":
        new = {}
        for level, off in int_keyed(table).items():
            lo, hi = ranges.get((SCHEDULE_TOPIC, level - 1), (0, 0))
            new[level] = min(max(off, lo), hi)
        doc["offsetTable"] = new
    else:
        for key, qmap in list(table.items()):
            topic = str(key).partition("@")[0]
            new = {}
            for qid, off in int_keyed(qmap).items():
                lo, hi = ranges.get((topic, qid), (0, 0))
                new[qid] = min(max(off, lo), hi)
            table[key] = new
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(to_fastjson(doc), encoding="utf-8")
    os.replace(tmp, path)


def _cut(path: Path, pos: int, saved: Path) -> None:
    """Save [pos, end) of `path` (trailing zeros trimmed) beside, then zero it in place."""
    saved.parent.mkdir(parents=True, exist_ok=True)
    size = path.stat().st_size
    with open(path, "r+b") as fh:
        fh.seek(pos)
        with open(saved, "wb") as out:
            left = size - pos
            while left > 0:
                chunk = fh.read(min(left, 1 << 20))
                if not chunk:
                    break
                out.write(chunk)
                left -= len(chunk)
        # keep the file full-size (a broker refuses other lengths): zero the cut range
        zero = bytes(1 << 20)
        p = pos
        while p < size:
            n = min(size - p, len(zero))
            os.pwrite(fh.fileno(), zero[:n], p)
            p += n
        fh.flush()
        os.fsync(fh.fileno())
    data = saved.read_bytes() if saved.stat().st_size <= (64 << 20) else None
    if data is not None:
        saved.write_bytes(data.rstrip(b"\0"))


def _move(src: Path, dst: Path) -> None:
    dst.parent.mkdir(parents=True, exist_ok=True)
    shutil.move(str(src), str(dst))


def _rebuild_from_commitlog(root: Path, cfg: LayoutConfig, plan: Plan) -> None:
    files = queue_files(root / "commitlog")
    rebuild_cq = any(a.action == "rebuild-consumequeue" for a in plan.actions)
    rebuild_bcq = any(a.action == "rebuild-batchconsumequeue" for a in plan.actions)
    rebuild_index = any(a.action == "rebuild-index" for a in plan.actions)
    cqs: dict[tuple[str, int], derive.ConsumeQueueWriter] = {}
    bcqs: dict[tuple[str, int], BatchConsumeQueueWriter] = {}
    index: derive.IndexFileWriter | None = None
    try:
        for msg in iter_messages(files, plan.commitlog_end):
            if derive.gets_cq_unit(msg.sys_flag):
                key = (msg.topic, msg.queue_id)
                if msg.topic in plan.bcq_topics:  # BatchConsumeQueue.putMessagePositionInfoWrapper
                    base, num = batch_unit_of(msg)
                    if rebuild_bcq and base >= 0 and num >= 0:
                        bw = bcqs.get(key)
                        if bw is None:
                            bw = bcqs[key] = BatchConsumeQueueWriter(root / BCQ_DIR / msg.topic / str(msg.queue_id),
                                                                     cfg.bcq_file_size)
                        bw.put(msg.commit_log_offset, msg.total_size, derive.tags_code(msg, cfg),
                               msg.store_timestamp, base, num)
                elif rebuild_cq:
                    w = cqs.get(key)
                    if w is None:
                        w = cqs[key] = derive.ConsumeQueueWriter(root / "consumequeue" / msg.topic /
                                                                 str(msg.queue_id), cfg.cq_file_size)
                    tags = derive.tags_code(msg, cfg)
                    kept = plan.ext_keep.get(key, {}).get(msg.queue_offset)
                    if kept is not None and kept[:2] == (msg.commit_log_offset, msg.total_size):
                        tags = kept[2]  # the old unit's ConsumeQueueExt address, still right for this record
                    w.put(msg.queue_offset, msg.commit_log_offset, msg.total_size, tags)
            if rebuild_index:
                for key in derive.index_keys(msg):
                    if index is None or index.full:
                        if index is not None:
                            index.close()
                        index = derive.IndexFileWriter(root / "index" / _index_name(root, msg.store_timestamp),
                                                       cfg.hash_slot_num, cfg.index_num)
                    index.put_key(key, msg.commit_log_offset, msg.store_timestamp)
    finally:
        for w in cqs.values():
            w.close()
        if index is not None:
            index.close()
    if rebuild_cq:
        (root / "consumequeue").mkdir(exist_ok=True)
    if rebuild_bcq:
        (root / BCQ_DIR).mkdir(exist_ok=True)


def _index_name(root: Path, ms: int) -> str:
    """`UtilAll.timeMillisToHumanString` (UTC here), unique within index/."""
    while True:
        tm = time.gmtime(ms / 1000)
        name = time.strftime("%Y%m%d%H%M%S", tm) + f"{ms % 1000:03d}"
        if not (root / "index" / name).exists():
            assert INDEX_NAME.match(name)
            return name
        ms += 1


def _rewrite_checkpoint(root: Path, a: Action, plan: Plan, side: Path) -> None:
    path = root / a.path
    (side / a.path).parent.mkdir(parents=True, exist_ok=True)
    shutil.copy2(path, side / a.path)
    raw = bytearray(path.read_bytes())
    if a.path == "checkpoint":
        physic, logics, index_ts, master, confirm = STORE_CHECKPOINT.unpack_from(raw, 0)
        files = queue_files(root / "commitlog")
        last = 0
        for msg in iter_messages(files, plan.commitlog_end):
            last = max(last, msg.store_timestamp)
        STORE_CHECKPOINT.pack_into(raw, 0, min(physic, last), min(logics, last), min(index_ts, last), master,
                                   min(confirm, plan.commitlog_end))
    else:
        r, flush, q, mq, sv, ts, counter = TIMER_CHECKPOINT.unpack_from(raw, 0)
        scan = ScanResult()
        for _ in scan_commitlog(queue_files(root / "commitlog"), root, check_crc=False, result=scan):
            pass
        qmax = _timer_queue_max(scan)
        TIMER_CHECKPOINT.pack_into(raw, 0, r, min(flush, plan.timerlog_end), min(q, qmax), min(mq, qmax), sv, ts,
                                   counter)
    with open(path, "r+b") as fh:
        fh.write(raw)
        fh.flush()
        os.fsync(fh.fileno())


def repair(root: Path, *, dry_run: bool = False) -> Plan:
    root = Path(root)
    if not root.is_dir():
        raise InvalidInput(f"{root}: not a directory")
    with store_lock(root) if not dry_run or (root / "lock").exists() else _nolock():
        plan = plan_repair(root)
        if not dry_run:
            apply_repair(plan)
    return plan


@contextmanager
def _nolock() -> Iterator[None]:
    yield


__all__ = ["Action", "Plan", "apply_repair", "plan_repair", "repair", "store_lock", "asdict"]
