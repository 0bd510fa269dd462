"""What repair needs to know about BatchCQ topics and ConsumeQueueExt files before it rebuilds.

* Which topics are BatchCQ (`batchcq_topics`): a broker asks the topic's config
  (`ConsumeQueueStore.findOrCreateConsumeQueue` -> `QueueTypeUtils.getCQType`: attribute
  `queue.type` of `config/topics.json`, default `SimpleCQ`), and refuses to load a
  `batchconsumequeue/<topic>/` directory of a topic whose config says otherwise
  (`queueTypeShouldBe`). A store repair is given may have lost or never had its topics.json, so a
  topic with a batchconsumequeue directory counts as BatchCQ too: only a BatchCQ topic's dispatch
  ever creates one.
* The queue range of a BatchCQ queue as its rebuilt BatchConsumeQueue will have it
  (`batchcq_ranges`): from the first record's msgBaseOffset to the last record's
  msgBaseOffset + batchSize (`reviseMaxOffsetInQueue`), in messages, not records.
* Which ConsumeQueue units may keep their ConsumeQueueExt address (`ext_addresses_to_keep`).
"""

from __future__ import annotations

from pathlib import Path

from rmqtool.inspect import derive
from rmqtool.inspect.bcq import BCQ_DIR
from rmqtool.inspect.commitlog import CommitLogReader
from rmqtool.inspect.configs import ConfigError, load_config
from rmqtool.inspect.cq import iter_units, queue_dirs
from rmqtool.inspect.cqext import CQ_EXT_DIR, ExtReader
from rmqtool.inspect.derive_queues import batch_unit_of
from rmqtool.inspect.files import QueueFile, queue_files
from rmqtool.inspect.layoutconfig import LayoutConfig
from rmqtool.inspect.verify_queues import ext_unit_diffs
from rmqtool.layouts.cqext import is_ext_addr
from rmqtool.layouts.message import Blank, RecordError

QUEUE_TYPE_ATTRIBUTE = "queue.type"  # TopicAttributes.QUEUE_TYPE_ATTRIBUTE
BATCH_CQ = "BatchCQ"  # CQType.BatchCQ


def batchcq_topics(root: Path) -> dict[str, str]:
    """topic -> why it is BatchCQ: `queue.type=BatchCQ` in topics.json (or topics.json.bak, which a
    broker loads when topics.json is missing or unreadable), or a batchconsumequeue/ directory."""
    out: dict[str, str] = {}
    for name in ("topics.json", "topics.json.bak"):
        try:
            doc = load_config(root / "config" / name)
        except ConfigError:
            continue
        table = doc.get("topicConfigTable") if isinstance(doc, dict) else None
        for topic, tc in (table.items() if isinstance(table, dict) else ()):
            attrs = tc.get("attributes") if isinstance(tc, dict) else None
            if isinstance(attrs, dict) and attrs.get(QUEUE_TYPE_ATTRIBUTE) == BATCH_CQ:
                out[str(topic)] = f"{QUEUE_TYPE_ATTRIBUTE}={BATCH_CQ} in config/{name}"
        break
    for topic, _qid, _qdir in queue_dirs(root / BCQ_DIR):
        out.setdefault(topic, f"has a {BCQ_DIR}/ directory")
    return out


class BatchCqRecords:
    """`on_record` for scan_commitlog: the first and last dispatched record of each BatchCQ queue."""

    def __init__(self, topics: set[str]) -> None:
        self.topics = {t.encode("utf-8") for t in topics}
        self.first: dict[tuple[bytes, int], int] = {}
        self.last: dict[tuple[bytes, int], int] = {}

    def __call__(self, phys: int, size: int, topic: bytes, qid: int, qoff: int, sys_flag: int) -> None:
        if topic in self.topics and derive.gets_cq_unit(sys_flag):
            key = (bytes(topic), qid)
            self.first.setdefault(key, phys)
            self.last[key] = phys


def batchcq_ranges(files: list[QueueFile], recs: BatchCqRecords) -> dict[tuple[str, int], tuple[int, int]]:
    """[min, max] in messages of each BatchCQ queue, as its rebuilt BatchConsumeQueue will have it."""
    out = {}
    with CommitLogReader(files) as reader:
        for key, last in recs.last.items():
            try:
                lo, _ = batch_unit_of(reader.read(recs.first[key], read_body=False))
                base, num = batch_unit_of(reader.read(last, read_body=False))
            except (RecordError, Blank):  # the scan found them good: not expected
                continue
            out[(key[0].decode("utf-8", "replace"), key[1])] = (lo, base + num)
    return out


def ext_addresses_to_keep(root: Path, files: list[QueueFile], end_offset: int, cfg: LayoutConfig,
                          skip_topics: set[str]) -> tuple[dict[tuple[str, int], dict[int, tuple[int, int, int]]], int]:
    """ConsumeQueue units whose tagsCode is a ConsumeQueueExt address that still holds their record's
    tags and store time: {(topic, queueId): {queueOffset: (commitLogOffset, size, address)}}, and
    how many ext-address units do not qualify (their record is gone or differs, or the ext unit
    does not match it)."""
    keep: dict[tuple[str, int], dict[int, tuple[int, int, int]]] = {}
    dropped = 0
    with CommitLogReader(files) as reader:
        for topic, qid, qdir in queue_dirs(root / "consumequeue"):
            ext_dir = root / CQ_EXT_DIR / topic / str(qid)
            if topic in skip_topics or not ext_dir.is_dir():
                continue
            mine: dict[int, tuple[int, int, int]] = {}
            with ExtReader(ext_dir) as ext:
                for u in iter_units(queue_files(qdir)):
                    if u.is_blank or not is_ext_addr(u.tags_code):
                        continue
                    ok = False
                    if u.commit_log_offset >= 0 and u.commit_log_offset + u.size <= end_offset:
                        try:
                            msg = reader.read(u.commit_log_offset, read_body=False)
                        except (RecordError, Blank):
                            msg = None
                        ok = (msg is not None and (msg.topic, msg.queue_id, msg.queue_offset, msg.total_size)
                              == (topic, qid, u.queue_offset, u.size) and derive.gets_cq_unit(msg.sys_flag)
                              and not ext_unit_diffs(ext, u.tags_code, msg, derive.tags_code(msg, cfg)))
                    if ok:
                        mine[u.queue_offset] = (u.commit_log_offset, u.size, u.tags_code)
                    else:
                        dropped += 1
            if mine:
                keep[(topic, qid)] = mine
    return keep, dropped
