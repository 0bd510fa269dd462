"""POP state of a store: revive-log records, who holds which message until when, and its checks.

A broker's in-flight POP state is messages on `rmq_sys_REVIVE_LOG_<cluster>` (layouts/pop.py):
checkpoints (`ck`) and acks (`ack`, `bAck`), parked on rmq_sys_wheel_timer (REAL_TOPIC names
the revive topic) until due, then copied onto their revive queue, plus the revive offsets
(CID_RMQ_SYS_REVIVE_GROUP in consumerOffset.json: every checkpoint up to it was revived or fully
acked) and, for orderly pops, config/consumerOrderInfo.json. `inspect revive` lists the records,
`inspect inflight` derives what each group holds; verify checks every record parses and points
at a message the store has.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rmqtool.inspect.commitlog import CommitLogReader
from rmqtool.inspect.configs import ConfigError, load_config
from rmqtool.inspect.cq import iter_units, queue_dirs
from rmqtool.inspect.dissect_common import iso
from rmqtool.inspect.files import as_queue_files, queue_files, relpath
from rmqtool.inspect.model import Filters, Item
from rmqtool.inspect.problems import Problem
from rmqtool.layouts import properties as P
from rmqtool.layouts.constants import TIMER_TOPIC
from rmqtool.layouts.message import Blank, MessageExt, RecordError
from rmqtool.layouts.pop import (
    ACK_TAG,
    BATCH_ACK_TAG,
    CK_TAG,
    POP_ORDER_REVIVE_QUEUE,
    REVIVE_GROUP,
    REVIVE_TOPIC_PREFIX,
    AckMsg,
    PopCheckPoint,
    build_extra_info,
    parse_normal_topic,
)

_TAGS = (CK_TAG, ACK_TAG, BATCH_ACK_TAG)


def _iso(ms: int | None) -> str | None:
    return iso(ms) if ms else None


@dataclass
class ReviveRecord:
    """One revive-log record where it is stored: parked on the timer topic or on its revive queue."""

    path: str
    pos: int
    commit_log_offset: int
    msg: MessageExt
    parsed: PopCheckPoint | AckMsg | None
    error: str | None

    @property
    def parked(self) -> bool:
        return self.msg.topic == TIMER_TOPIC

    @property
    def revive_topic(self) -> str:
        return self.msg.properties.get(P.REAL_TOPIC, self.msg.topic) if self.parked else self.msg.topic

    @property
    def revive_queue(self) -> int:
        if self.parked:
            try:
                return int(self.msg.properties.get(P.REAL_QID, "0"))
            except ValueError:
                return -1
        return self.msg.queue_id

    @property
    def tag(self) -> str | None:
        return self.msg.properties.get(P.TAGS)

    @property
    def deliver_time(self) -> int:
        try:
            return int(self.msg.properties.get(P.TIMER_DELIVER_MS, "0"))
        except ValueError:
            return 0

    def identity(self) -> tuple[str | None, bytes]:
        """The same record before and after the timer delivered it."""
        return self.tag, self.msg.body


def _is_revive(msg: MessageExt) -> bool:
    if msg.topic.startswith(REVIVE_TOPIC_PREFIX):
        return True
    return msg.topic == TIMER_TOPIC and msg.properties.get(P.REAL_TOPIC, "").startswith(REVIVE_TOPIC_PREFIX)


def _revive_offsets_in_cqs(root: Path) -> list[int]:
    """CommitLog offsets of every record on a revive topic or parked on the timer topic, from the
    ConsumeQueues (reading the CQs is much cheaper than decoding the whole CommitLog)."""
    out: list[int] = []
    cq_root = root / "consumequeue"
    if not cq_root.is_dir():
        return out
    for topic, _qid, directory in queue_dirs(cq_root):
        if topic.startswith(REVIVE_TOPIC_PREFIX) or topic == TIMER_TOPIC:
            out.extend(u.commit_log_offset for u in iter_units(queue_files(directory)) if not u.is_blank)
    return sorted(set(out))


def iter_revive_records(root: Path) -> Iterator[ReviveRecord]:
    """Every revive-log record of the store, in CommitLog order (found through the ConsumeQueues)."""
    cl = root / "commitlog"
    if not cl.is_dir():
        return
    files = as_queue_files(cl)
    with CommitLogReader(files) as reader:
        for offset in _revive_offsets_in_cqs(root):
            try:
                msg = reader.read(offset)
            except (Blank, RecordError):
                continue  # the ConsumeQueue checks report a unit that points at no record
            if not _is_revive(msg):
                continue
            loc = reader.locate(offset)
            rel = relpath(loc[0].path, root) if loc else "commitlog"
            parsed, error = None, None
            tag = msg.properties.get(P.TAGS)
            try:
                if tag == CK_TAG:
                    parsed = PopCheckPoint.from_json(msg.body)
                elif tag in (ACK_TAG, BATCH_ACK_TAG):
                    parsed = AckMsg.from_json(msg.body, batch=tag == BATCH_ACK_TAG)
                else:
                    error = f"tag {tag!r} is none of ck, ack, bAck"
                if parsed is not None and getattr(parsed, "topic", None) is None:
                    error = "no topic (t) in the record"
            except ValueError as e:
                error = str(e)
            yield ReviveRecord(rel, offset - (loc[0].base if loc else 0), offset, msg, parsed, error)


def record_fields(r: ReviveRecord) -> dict[str, Any]:
    d: dict[str, Any] = {"type": "revive", "tag": r.tag, "stored": "timer" if r.parked else "revive-queue",
                         "reviveTopic": r.revive_topic, "reviveQueue": r.revive_queue,
                         "reviveQueueOffset": None if r.parked else r.msg.queue_offset,
                         "commitLogOffset": r.commit_log_offset, "deliverTime": r.deliver_time,
                         "deliverTimeIso": _iso(r.deliver_time), "uniqKey": r.msg.properties.get(P.UNIQ_KEY)}
    p = r.parsed
    if isinstance(p, PopCheckPoint):
        d.update(topic=p.topic, group=p.cid, queueId=p.queue_id, startOffset=p.start_offset,
                 offsets=p.offsets() if p.num <= 64 else None, num=p.num, bitMap=p.bit_map, popTime=p.pop_time,
                 popTimeIso=_iso(p.pop_time), invisibleTime=p.invisible_time, reviveTime=p.revive_time,
                 reviveTimeIso=_iso(p.revive_time), brokerName=p.broker_name, rePutTimes=p.re_put_times)
    elif isinstance(p, AckMsg):
        d.update(topic=p.topic, group=p.consumer_group, queueId=p.queue_id, startOffset=p.start_offset,
                 ackOffsets=p.acked_offsets(), popTime=p.pop_time, popTimeIso=_iso(p.pop_time),
                 brokerName=p.broker_name)
    if r.error:
        d.update(problem="revive-record-unparsable", detail=r.error)
    return d


def _matches(d: dict[str, Any], f: Filters) -> bool:
    if f.topic is not None and f.topic not in (d.get("topic"), parse_normal_topic(d.get("topic") or "",
                                                                                  d.get("group") or "")):
        return False
    if f.queue is not None and d.get("queueId") != f.queue:
        return False
    if f.tag is not None and d.get("tag") != f.tag and d.get("group") != f.tag:
        return False
    return True


def dissect_revive(path: Path, f: Filters, progress: Any = None) -> Iterator[Item]:
    """`inspect revive STORE`: one row per revive-log record (--tag ck|ack|bAck, --topic, --queue)."""
    for r in iter_revive_records(Path(path)):
        d = record_fields(r)
        if f.offset is not None and r.commit_log_offset < f.offset:
            continue
        if _matches(d, f):
            yield Item("revive", r.path, r.pos, d)


def _revive_offsets(root: Path) -> dict[tuple[str, int], int]:
    try:
        table = load_config(root / "config" / "consumerOffset.json")["offsetTable"]
    except (ConfigError, KeyError, TypeError):
        return {}
    out = {}
    for key, queues in table.items():
        topic, _, group = key.partition("@")
        if group == REVIVE_GROUP and isinstance(queues, dict):
            for q, off in queues.items():
                try:
                    out[(topic, int(q))] = int(off)
                except (TypeError, ValueError):
                    pass
    return out


def in_flight(root: Path) -> list[dict[str, Any]]:
    """What each group holds: every message of a checkpoint not yet revived, minus the acked ones,
    and the unacked messages of orderly pops (consumerOrderInfo.json)."""
    cks: dict[str, tuple[ReviveRecord, PopCheckPoint]] = {}
    acks: list[AckMsg] = []
    seen: set[tuple[str | None, bytes]] = set()
    done = _revive_offsets(root)
    for r in iter_revive_records(root):
        ident = r.identity()
        p = r.parsed
        if isinstance(p, PopCheckPoint):
            if not r.parked and r.msg.queue_offset <= done.get((r.revive_topic, r.revive_queue), -1):
                cks.pop(p.merge_key(), None)  # revived (or all acked) by the revive service
                seen.add(ident)
                continue
            if ident not in seen:
                cks[p.merge_key()] = (r, p)
        elif isinstance(p, AckMsg) and ident not in seen:
            acks.append(p)
        seen.add(ident)
    for a in acks:
        hit = cks.get(a.merge_key(next((p.broker_name for _, p in cks.values() if p.broker_name), "")))
        if hit is not None:
            for off in a.acked_offsets():
                i = hit[1].index_of_ack(off)
                if i > -1:
                    hit[1].bit_map |= 1 << i
    rows = []
    for r, ck in cks.values():
        for i in range(ck.num):
            if ck.acked(i):
                continue
            off = ck.ack_offset_by_index(i)
            rows.append({"type": "inflight", "group": ck.cid, "topic": parse_normal_topic(ck.topic, ck.cid),
                         "readFrom": ck.topic, "queueId": ck.queue_id, "queueOffset": off, "popTime": ck.pop_time,
                         "popTimeIso": _iso(ck.pop_time), "invisibleUntil": ck.revive_time,
                         "invisibleUntilIso": _iso(ck.revive_time), "reviveQueue": r.revive_queue,
                         "receiptHandle": build_extra_info(ck.start_offset, ck.pop_time, ck.invisible_time,
                                                           r.revive_queue, ck.topic, ck.broker_name or "",
                                                           ck.queue_id, off),
                         "checkpointAt": r.commit_log_offset})
    rows += _orderly_rows(root)
    rows.sort(key=lambda d: (d["group"], d["topic"], d["readFrom"], d["queueId"], d["queueOffset"]))
    return rows


def _orderly_rows(root: Path) -> list[dict[str, Any]]:
    from rmqtool.store.orderinfo import OrderInfo  # the file's one decoder

    try:
        table = load_config(root / "config" / "consumerOrderInfo.json")["table"]
    except (ConfigError, KeyError, TypeError):
        return []
    rows = []
    for key, queues in (table or {}).items():
        topic, _, group = key.rpartition("@")
        for q, d in (queues or {}).items():
            try:
                oi = OrderInfo.from_json_obj(d)
                qid = int(q)
            except (TypeError, ValueError, AttributeError):
                continue
            for i, off in enumerate(oi.queue_offsets()):
                if not oi.is_not_ack(i):
                    continue
                until = (oi.offset_next_visible_time or {}).get(off, oi.pop_time + (oi.invisible_time or 0))
                rows.append({"type": "inflight", "group": group, "topic": parse_normal_topic(topic, group),
                             "readFrom": topic, "queueId": qid, "queueOffset": off, "popTime": oi.pop_time,
                             "popTimeIso": _iso(oi.pop_time), "invisibleUntil": until,
                             "invisibleUntilIso": _iso(until), "reviveQueue": POP_ORDER_REVIVE_QUEUE,
                             "receiptHandle": None, "checkpointAt": None})
    return rows


def dissect_inflight(path: Path, f: Filters, progress: Any = None) -> Iterator[Item]:
    """`inspect inflight STORE`: one row per message a group holds (--topic, --queue, --tag GROUP)."""
    for d in in_flight(Path(path)):
        if _matches(d, f):
            yield Item("inflight", "config/consumerOffset.json", 0, d)


def check_revive_records(root: Path, ranges: dict[tuple[str, int], Any]) -> Iterator[Problem]:
    """verify: every revive record parses (`revive-record-unparsable`), and every checkpoint names
    messages its queue has (`revive-ck-bad-offset`; offsets below the queue's start are expired, not
    wrong). `ranges` are the ConsumeQueue ranges verify worked out (QueueRange by (topic, queueId))."""
    for r in iter_revive_records(root):
        if r.error:
            yield Problem(r.path, r.pos, "revive-record-unparsable",
                          f"{r.tag} record at CommitLog offset {r.commit_log_offset}: {r.error}")
            continue
        ck = r.parsed
        if not isinstance(ck, PopCheckPoint):
            continue
        where = f"checkpoint at CommitLog offset {r.commit_log_offset} for {ck.topic} queue {ck.queue_id}"
        rng = ranges.get((ck.topic, ck.queue_id))
        if rng is None:
            yield Problem(r.path, r.pos, "revive-ck-bad-offset", f"{where}: the store has no such queue")
            continue
        if ck.num < 0 or (ck.queue_offset_diff is not None and len(ck.queue_offset_diff) != ck.num):
            yield Problem(r.path, r.pos, "revive-ck-bad-offset",
                          f"{where}: num {ck.num} but {len(ck.queue_offset_diff or [])} offset diffs")
            continue
        bad = [o for o in ck.offsets() if o >= rng.max_offset]
        if bad:
            yield Problem(r.path, r.pos, "revive-ck-bad-offset",
                          f"{where} names offsets {bad}; the queue holds {rng.min_offset}..{rng.max_offset - 1}")


DISSECTORS = {"revive": dissect_revive, "inflight": dissect_inflight}
