"""`inspect store`: one screen about a whole store directory.

Topics and queues with their offset ranges (ConsumeQueues, BatchConsumeQueues in messages, and
the byte ranges of ConsumeQueueExt streams), the CommitLog range, checkpoint times in ISO form,
delay-level progress beside the SCHEDULE_TOPIC_XXXX queues and consumer lag per group, with a
`consumer-offset-below-min` row for each group whose committed offset fell below its queue's
minimum (cleanup deleted messages it never consumed: `missed` of them).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from rmqtool.errors import InvalidInput
from rmqtool.inspect.bcq import BCQ_DIR, bcq_range
from rmqtool.inspect.commitlog import ScanResult, scan_commitlog
from rmqtool.inspect.configs import ConfigError, int_keyed, load_config
from rmqtool.inspect.cq import queue_dirs, queue_range
from rmqtool.inspect.cqext import CQ_EXT_DIR, ext_range
from rmqtool.inspect.dissect_common import iso
from rmqtool.inspect.dissect_config import dissect_checkpoint
from rmqtool.inspect.dissect_timer import dissect_timercheck
from rmqtool.inspect.files import queue_files
from rmqtool.inspect.layoutconfig import load_layout_config
from rmqtool.inspect.model import Filters, Item
from rmqtool.layouts.constants import SCHEDULE_TOPIC


def _duration(ms: int) -> str:
    for unit, n in (("d", 86_400_000), ("h", 3_600_000), ("m", 60_000), ("s", 1000)):
        if ms % n == 0:
            return f"{ms // n}{unit}"
    return f"{ms}ms"


def summarize_store(root: Path, f: Filters, progress=None) -> Iterator[Item]:
    if not (root / "commitlog").is_dir():
        raise InvalidInput(f"{root}: not a store directory (no commitlog/)")
    cfg = load_layout_config(root)
    files = queue_files(root / "commitlog")
    scan = ScanResult()
    problems = list(scan_commitlog(files, root, check_crc=False, result=scan, progress=progress))
    yield Item("store", "commitlog", 0, {
        "section": "commitlog", "files": len(files), "fileSize": cfg.commitlog_file_size,
        "minOffset": scan.min_offset, "maxOffset": scan.end_offset, "records": scan.records,
        "firstStoreTimestamp": scan.first_store_timestamp, "firstStoreTime": iso(scan.first_store_timestamp),
        "lastStoreTimestamp": scan.last_store_timestamp, "lastStoreTime": iso(scan.last_store_timestamp),
        "problems": len(problems), "abortFile": (root / "abort").exists()})
    for name, fn in (("checkpoint", dissect_checkpoint), ("config/timercheck", dissect_timercheck)):
        if (root / name).is_file():
            for it in fn(root / name, Filters()):
                it.fields = {"section": it.kind, **it.fields}
                yield it
    ranges = {}
    for topic, qid, qdir in queue_dirs(root / "consumequeue"):
        rng = ranges[(topic, qid)] = queue_range(qdir, scan.min_offset)
        if (f.topic is None or topic == f.topic) and (f.queue is None or qid == f.queue):
            yield Item("store", f"consumequeue/{topic}/{qid}", 0, {
                "section": "queue", "topic": topic, "queueId": qid, "minOffset": rng.min_offset,
                "maxOffset": rng.max_offset, "messages": rng.max_offset - rng.min_offset})
    for topic, qid, qdir in queue_dirs(root / BCQ_DIR):  # BatchCQ topics (queue.type=BatchCQ)
        brng = bcq_range(qdir, scan.min_offset)
        ranges[(topic, qid)] = brng  # as verify: consumer offsets count messages, not units
        if (f.topic is None or topic == f.topic) and (f.queue is None or qid == f.queue):
            yield Item("store", f"{BCQ_DIR}/{topic}/{qid}", 0, {
                "section": "batchqueue", "topic": topic, "queueId": qid, "minOffset": brng.min_offset,
                "maxOffset": brng.max_offset, "messages": brng.max_offset - brng.min_offset, "units": brng.units,
                "files": brng.files})
    for topic, qid, qdir in queue_dirs(root / CQ_EXT_DIR):  # enableConsumeQueueExt
        if (f.topic is None or topic == f.topic) and (f.queue is None or qid == f.queue):
            erng = ext_range(qdir)
            yield Item("store", f"{CQ_EXT_DIR}/{topic}/{qid}", 0, {
                "section": "queueext", "topic": topic, "queueId": qid, "minOffset": erng.min_offset,
                "maxOffset": erng.max_offset, "units": erng.units, "problems": erng.damaged, "files": erng.files})
    delay_path = root / "config" / "delayOffset.json"
    if delay_path.is_file():
        try:
            table = int_keyed((load_config(delay_path) or {}).get("offsetTable"))
        except (ConfigError, AttributeError):
            table = {}
        for level in range(1, len(cfg.delay_levels_ms) + 1):
            rng = ranges.get((SCHEDULE_TOPIC, level - 1))
            if rng is None and level not in table:
                continue
            off = table.get(level, 0)
            mx = rng.max_offset if rng else 0
            yield Item("store", "config/delayOffset.json", 0, {
                "section": "delay", "delayLevel": level, "delay": _duration(cfg.delay_ms(level)),
                "queueId": level - 1, "offset": off, "minOffset": rng.min_offset if rng else 0, "maxOffset": mx,
                "pending": max(0, mx - off)})
    co_path = root / "config" / "consumerOffset.json"
    if co_path.is_file():
        try:
            table = (load_config(co_path) or {}).get("offsetTable") or {}
        except (ConfigError, AttributeError):
            table = {}
        for key in sorted(table) if isinstance(table, dict) else []:
            topic, _, group = str(key).partition("@")
            if f.topic is not None and topic != f.topic:
                continue
            for qid, off in sorted(int_keyed(table[key]).items()):
                rng = ranges.get((topic, qid))
                mx = rng.max_offset if rng else 0
                yield Item("store", "config/consumerOffset.json", 0, {
                    "section": "consumer", "group": group, "topic": topic, "queueId": qid, "offset": off,
                    "maxOffset": mx, "lag": max(0, mx - off)})
                mn = rng.min_offset if rng else 0
                if 0 <= off < mn <= mx:  # verify's consumer-offset-below-min: messages it never got
                    yield Item("store", "config/consumerOffset.json", 0, {
                        "section": "consumer-offset-below-min", "group": group, "topic": topic, "queueId": qid,
                        "offset": off, "minOffset": mn, "missed": mn - off})
