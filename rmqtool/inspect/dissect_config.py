"""Dissectors of the store checkpoint and the config/ JSON files (offset tables, topics,
subscription groups, timer metrics), one row per entry where the file is a table.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from rmqtool.errors import InvalidInput
from rmqtool.inspect.configs import ConfigError, int_keyed, is_config_file, load_config
from rmqtool.inspect.dissect_common import Progress, iso, read_fixed, root_and_rel
from rmqtool.inspect.files import relpath
from rmqtool.inspect.model import Filters, Item
from rmqtool.layouts.checkpoint import STORE_CHECKPOINT, StoreCheckpoint


def dissect_checkpoint(path: Path, f: Filters, progress: Progress = None) -> Iterator[Item]:
    rel, raw, short = read_fixed(path, "checkpoint", STORE_CHECKPOINT.size)
    if short is not None:
        yield short
        return
    physic, logics, index_ts, master, confirm = STORE_CHECKPOINT.unpack_from(raw, 0)
    item = Item("checkpoint", rel, 0, {
        "physicMsgTimestamp": physic, "physicMsgTime": iso(physic), "logicsMsgTimestamp": logics,
        "logicsMsgTime": iso(logics), "indexMsgTimestamp": index_ts, "indexMsgTime": iso(index_ts),
        "masterFlushedOffset": master, "confirmPhyOffset": confirm,
        "minTimestamp": max(0, min(physic, logics) - 3000)})
    if f.raw:
        item.raw, item.layout = raw[: STORE_CHECKPOINT.size], StoreCheckpoint
    yield item


def dissect_config(path: Path, f: Filters, progress: Progress = None) -> Iterator[Item]:
    path = Path(path)
    if path.is_dir() and (path / "config").is_dir():
        path = path / "config"
    files = sorted(p for p in path.iterdir() if is_config_file(p)) if path.is_dir() else [path]
    if not path.exists():
        raise InvalidInput(f"{path}: no such file or directory")
    _, relroot = root_and_rel(path)
    for p in files:
        rel = relpath(p, relroot)
        try:
            doc = load_config(p)
        except ConfigError as e:
            yield Item("problem", rel, e.pos, {"type": "problem", "problem": "config-unparsable", "detail": e.detail})
            continue
        yield from _config_rows(rel, doc, f)


def _config_rows(name: str, doc: Any, f: Filters) -> Iterator[Item]:
    rel, name = name, name.rsplit("/", 1)[-1]
    table = doc.get("offsetTable") if isinstance(doc, dict) else None
    if name.startswith("consumerOffset") and isinstance(table, dict):
        for key, qmap in table.items():
            topic, _, group = str(key).partition("@")
            if f.topic is not None and topic != f.topic:
                continue
            for qid, off in sorted(int_keyed(qmap).items()):
                if f.queue is None or qid == f.queue:
                    yield Item("config-row", rel, 0, {"group": group, "topic": topic, "queueId": qid, "offset": off})
    elif name.startswith("delayOffset") and isinstance(table, dict):
        for level, off in sorted(int_keyed(table).items()):
            yield Item("config-row", rel, 0, {"delayLevel": level, "queueId": level - 1, "offset": off})
    elif name.startswith("topics") and isinstance(doc, dict) and isinstance(doc.get("topicConfigTable"), dict):
        for topic, tc in doc["topicConfigTable"].items():
            if f.topic is None or topic == f.topic:
                yield Item("config-row", rel, 0, {"topicName": topic, **(tc if isinstance(tc, dict) else {})})
    elif name.startswith("subscriptionGroup") and isinstance(doc, dict) and isinstance(
            doc.get("subscriptionGroupTable"), dict):
        for group, gc in doc["subscriptionGroupTable"].items():
            yield Item("config-row", rel, 0, {"groupName": group, **(gc if isinstance(gc, dict) else {})})
    elif name.startswith("timermetrics") and isinstance(doc, dict) and isinstance(doc.get("timingCount"), dict):
        for topic, metric in doc["timingCount"].items():
            if (f.topic is None or topic == f.topic) and isinstance(metric, dict):
                yield Item("config-row", rel, 0, {"topic": topic, "count": metric.get("count"),
                                                  "timeStamp": metric.get("timeStamp")})
    else:
        yield Item("config", rel, 0, {"content": doc})
