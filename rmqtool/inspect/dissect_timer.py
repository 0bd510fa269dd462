"""Dissectors of the timer store's files: timerlog units, timerwheel slots and the timercheck
checkpoint (`TimerLog`, `TimerWheel`, `TimerCheckpoint`).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from rmqtool.errors import InvalidInput
from rmqtool.inspect.commitlog import CommitLogReader
from rmqtool.inspect.dissect_common import Progress, iso, link_message, read_fixed, root_and_rel
from rmqtool.inspect.files import ReadOnlyFile, as_queue_files, queue_files, relpath
from rmqtool.inspect.layoutconfig import LayoutConfig, load_layout_config
from rmqtool.inspect.model import Filters, Item
from rmqtool.inspect.timercheck import iter_timerlog, iter_wheel_slots
from rmqtool.layouts.checkpoint import TIMER_CHECKPOINT, TimerCheckpoint
from rmqtool.layouts.constants import BLANK_MAGIC_CODE, TIMER_SLOT_SIZE, TIMERLOG_UNIT_SIZE
from rmqtool.layouts.timer import TimerLogBlank, TimerLogUnit, TimerSlot


def _timer_fields(u) -> dict[str, Any]:
    return {"size": u.size, "prevPos": u.prev_pos, "magic": u.magic, "currWriteTime": u.curr_write_time,
            "delayTime": u.delay_time, "delayedTime": u.delayed_time, "offsetPy": u.offset_py, "sizePy": u.size_py,
            "hashCodeOfRealTopic": u.hash_code_of_real_topic, "timerLogOffset": u.offset}


def dissect_timerlog(path: Path, f: Filters, progress: Progress = None) -> Iterator[Item]:
    path = Path(path)
    if (path / "timerlog").is_dir():
        path = path / "timerlog"
    root, relroot = root_and_rel(path)
    files = as_queue_files(path)
    reader = CommitLogReader(queue_files(root / "commitlog")) if root is not None and f.follow else None
    problems: list = []
    try:
        for u in iter_timerlog(files, relroot, problems=problems):
            if f.offset is not None and u.offset < f.offset:
                continue
            if not f.in_window(u.delayed_time):
                continue
            item = Item("timerlog-unit", relpath(u.file.path, relroot), u.pos, _timer_fields(u))
            if f.raw:
                with ReadOnlyFile(u.file.path) as rof:
                    item.raw = bytes(rof.buf[u.pos : u.pos + TIMERLOG_UNIT_SIZE])
                item.layout = TimerLogUnit
            if reader is not None:
                link_message(item, reader, u.offset_py, relroot, f)
            yield item
        for p in problems:
            yield Item("problem", p.path, p.pos, {"type": "problem", "problem": p.kind, "detail": p.detail})
        for qf in files:  # the blanks, for completeness of the hex view
            with ReadOnlyFile(qf.path) as rof:
                pos = (rof.size - 16) - (rof.size - 16) % TIMERLOG_UNIT_SIZE if rof.size >= 16 else -1
                for cand in {pos, rof.size - 16} - {-1}:
                    if 0 <= cand and cand + 16 <= rof.size and int.from_bytes(
                            rof.buf[cand + 12 : cand + 16], "big", signed=True) == BLANK_MAGIC_CODE:
                        if f.offset is None and f.since is None and f.until is None:
                            item = Item("timerlog-blank", relpath(qf.path, relroot), cand,
                                        {"type": "blank", "size": int.from_bytes(rof.buf[cand : cand + 4], "big",
                                                                                 signed=True),
                                         "magicCode": BLANK_MAGIC_CODE})
                            if f.raw:
                                item.raw, item.layout = bytes(rof.buf[cand : cand + 16]), TimerLogBlank
                            yield item
                        break
    finally:
        if reader is not None:
            reader.close()


def dissect_timerwheel(path: Path, f: Filters, progress: Progress = None,
                       cfg: LayoutConfig | None = None) -> Iterator[Item]:
    path = Path(path)
    if path.is_dir():
        path = path / "timerwheel"
    if not path.is_file():
        raise InvalidInput(f"{path}: no such file")
    root, relroot = root_and_rel(path)
    cfg = cfg or load_layout_config(root)
    rel = relpath(path, relroot)
    units = None
    reader = None
    if f.follow and root is not None:
        units = {u.offset: u for u in iter_timerlog(queue_files(root / "timerlog"), relroot)}
        reader = CommitLogReader(queue_files(root / "commitlog"))
    try:
        for idx, (tsecs, first, last, num, magic) in iter_wheel_slots(path):
            if f.offset is not None and idx < f.offset:
                continue
            t_ms = tsecs * cfg.timer_precision_ms
            if not -(1 << 63) <= t_ms < (1 << 63):  # a damaged slot time: keep JSON within int64
                t_ms = -1
            if not f.in_window(t_ms):
                continue
            fields = {"slot": idx, "timeSecs": tsecs, "timeMs": t_ms, "time": iso(t_ms), "firstPos": first,
                      "lastPos": last, "num": num, "magic": magic}
            item = Item("wheel-slot", rel, idx * TIMER_SLOT_SIZE, fields)
            if f.raw:
                with ReadOnlyFile(path) as rof:
                    item.raw = bytes(rof.buf[idx * TIMER_SLOT_SIZE : (idx + 1) * TIMER_SLOT_SIZE])
                item.layout = TimerSlot
            if units is not None and reader is not None:
                chain: list[Any] = []
                pos, seen = last, 0
                while pos != -1 and seen < 100_000:
                    u = units.get(pos)
                    if u is None:
                        chain.append({"problem": "wheel-slot-mismatch", "detail": f"no TimerLog unit at {pos}"})
                        break
                    unit = Item("timerlog-unit", relpath(u.file.path, relroot), u.pos, _timer_fields(u))
                    link_message(unit, reader, u.offset_py, relroot, f)
                    chain.append(unit)
                    seen += 1
                    if u.prev_pos >= pos:
                        break
                    pos = u.prev_pos
                item.links["chain"] = chain
            yield item
    finally:
        if reader is not None:
            reader.close()


def dissect_timercheck(path: Path, f: Filters, progress: Progress = None) -> Iterator[Item]:
    rel, raw, short = read_fixed(path, "timercheck", TIMER_CHECKPOINT.size)
    if short is not None:
        yield short
        return
    read, flush, q, mq, sv, ts, counter = TIMER_CHECKPOINT.unpack_from(raw, 0)
    item = Item("timercheck", rel, 0, {
        "lastReadTimeMs": read, "lastReadTime": iso(read), "lastTimerLogFlushPos": flush,
        "lastTimerQueueOffset": q, "masterTimerQueueOffset": mq,
        "dataVersion": {"counter": counter, "stateVersion": sv, "timestamp": ts}})
    if f.raw:
        item.raw, item.layout = raw[: TIMER_CHECKPOINT.size], TimerCheckpoint
    yield item
