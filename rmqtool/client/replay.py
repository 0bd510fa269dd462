"""`rmqtool replay`: send stored messages again (dead letters, a window of a topic, exported JSON Lines).

Sources are read-only: a store directory's CommitLog is walked record by record with
`decode_record` (no recovery, no lock, no ConsumeQueue needed: a stopped broker's store or a copy
of a crashed one's, stopping at the first torn record of each file); a group's dead letters can
also be pulled over the network; JSON Lines are what `consume` and `inspect` print.
Every replayed message keeps its body, flag, keys, tags and user properties, gets a new UNIQ_KEY
and carries ORIGIN_MESSAGE_ID (the first msgId it had), like a retry does.
"""

from __future__ import annotations

import base64
import binascii
import json
import mmap
import os
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import orjson

from rmqtool.client.message import Message
from rmqtool.errors import InvalidInput, StoreError
from rmqtool.layouts import properties as P
from rmqtool.layouts.constants import DLQ_GROUP_TOPIC_PREFIX, RETRY_GROUP_TOPIC_PREFIX
from rmqtool.layouts.message import Blank, MessageExt, RecordError, body_fields, decode_record
from rmqtool.layouts.net import Host

# Properties the broker or a previous delivery added: a replayed message starts clean of them.
DROPPED_PROPERTIES = frozenset({
    P.UNIQ_KEY, P.CLUSTER, P.MIN_OFFSET, P.MAX_OFFSET, P.REAL_TOPIC, P.REAL_QID, P.DELAY, P.RETRY_TOPIC,
    P.RECONSUME_TIME, P.MAX_RECONSUME_TIMES, P.TRAN_MSG, P.PGROUP, P.TRAN_PREPARED_QUEUE_OFFSET,
    P.TRANSACTION_CHECK_TIMES, P.CHECK_IMMUNITY_TIME_IN_SECONDS, P.TRANSACTION_ID, P.TIMER_DELAY_SEC,
    P.TIMER_DELAY_MS, P.TIMER_DELIVER_MS, P.TIMER_OUT_MS, P.TIMER_ENQUEUE_MS, P.TIMER_DEQUEUE_MS,
    P.TIMER_ROLL_TIMES, P.TIMER_DEL_UNIQKEY, P.DLQ_ORIGIN_TOPIC, P.DLQ_ORIGIN_MESSAGE_ID, P.INNER_NUM,
    P.INNER_BASE, P.WAIT, "CONSUME_START_TIME", "TRACE_ON", "MSG_REGION",
})


@dataclass(slots=True)
class ReplayItem:
    source: MessageExt
    topic: str  # where it goes


@dataclass
class Window:
    """Which records of a topic: queue, queue-offset range [begin, end), store-time range [since, until)."""

    queue_id: int | None = None
    begin_offset: int | None = None
    end_offset: int | None = None
    since_ms: int | None = None
    until_ms: int | None = None

    def everything(self) -> bool:
        """No bound at all: every record is accepted."""
        return (self.queue_id is None and self.begin_offset is None and self.end_offset is None
                and self.since_ms is None and self.until_ms is None)

    def accepts(self, m: MessageExt) -> bool:
        return ((self.queue_id is None or m.queue_id == self.queue_id)
                and (self.begin_offset is None or m.queue_offset >= self.begin_offset)
                and (self.end_offset is None or m.queue_offset < self.end_offset)
                and (self.since_ms is None or m.store_timestamp >= self.since_ms)
                and (self.until_ms is None or m.store_timestamp < self.until_ms))


# ---- sources -----------------------------------------------------------------------------------------
def commitlog_dir(path: Path) -> Path:
    path = Path(path)
    if (path / "commitlog").is_dir():
        return path / "commitlog"
    if path.is_dir() and any(p.name.isdigit() for p in path.iterdir()):
        return path
    raise StoreError(f"{path} is neither a store directory nor a commitlog directory")


def iter_commitlog(path: Path, warn: Callable[[str], None] | None = None) -> Iterator[MessageExt]:
    """Every record of every CommitLog file, in offset order; a torn record ends its file."""
    files = sorted((p for p in commitlog_dir(path).iterdir() if p.name.isdigit() and p.is_file()),
                   key=lambda p: int(p.name))
    for f in files:
        size = f.stat().st_size
        if size == 0:
            continue
        with open(f, "rb") as fh, mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as mm:
            pos = 0
            while pos + 8 <= size:
                try:
                    m = decode_record(mm, pos, size, check_crc=True)
                except Blank:
                    break
                except RecordError as e:
                    if not (e.kind == "bad-magic" and mm[pos:pos + 8] == b"\0" * 8) and warn is not None:
                        warn(f"{f.name}: stopped at byte {pos}: {e.detail}")
                    break
                yield m
                pos += m.total_size


def original_topic(m: MessageExt) -> str | None:
    """Where a dead letter came from: RETRY_TOPIC (set by send-back), else DLQ_ORIGIN_TOPIC."""
    t = m.properties.get(P.RETRY_TOPIC) or m.properties.get(P.DLQ_ORIGIN_TOPIC)
    if t and not t.startswith(RETRY_GROUP_TOPIC_PREFIX):
        return t
    return None


def from_store(path: Path, *, topic: str | None = None, dlq_group: str | None = None,
               window: Window | None = None, to_topic: str | None = None,
               warn: Callable[[str], None] | None = None) -> Iterator[ReplayItem]:
    window = window or Window()
    want = DLQ_GROUP_TOPIC_PREFIX + dlq_group if dlq_group else topic
    if not want:
        raise InvalidInput("say which messages: a topic or --dlq GROUP")
    for m in iter_commitlog(path, warn):
        if m.topic != want or not window.accepts(m) or m.transaction_type in (0x4, 0xC):
            continue
        target = to_topic or (original_topic(m) if dlq_group else m.topic)
        if target is None:
            if warn:
                warn(f"{m.msg_id}: dead letter without RETRY_TOPIC, skipped (use --to-topic)")
            continue
        yield ReplayItem(m, target)


def from_network_dlq(namesrv: str, group: str, *, to_topic: str | None = None, window: Window | None = None,
                     warn: Callable[[str], None] | None = None, topic: str | None = None) -> Iterator[ReplayItem]:
    """A group's dead letters (or any topic) pulled over the network, from min to max offset of each queue."""
    from rmqtool.client.consumer import PullConsumer
    from rmqtool.client.message import PullStatus

    window = window or Window()
    source = topic or DLQ_GROUP_TOPIC_PREFIX + group
    with PullConsumer("rmqtool_replay", namesrv) as pc:
        for mq in pc.fetch_subscribe_message_queues(source):
            if window.queue_id is not None and mq.queue_id != window.queue_id:
                continue
            off = max(pc.min_offset(mq), window.begin_offset or 0)
            end = pc.max_offset(mq) if window.end_offset is None else min(pc.max_offset(mq), window.end_offset)
            while off < end:
                r = pc.pull(mq, "*", off, 32)
                if r.status != PullStatus.FOUND:
                    if r.next_begin_offset <= off:
                        break
                    off = r.next_begin_offset
                    continue
                for m in r.messages:
                    if m.queue_offset >= end:
                        break
                    if not window.accepts(m):
                        continue
                    target = to_topic or (original_topic(m) if topic is None else m.topic)
                    if target is None:
                        if warn:
                            warn(f"{m.msg_id}: dead letter without RETRY_TOPIC, skipped (use --to-topic)")
                        continue
                    yield ReplayItem(m, target)
                off = r.next_begin_offset


def from_json_lines(lines: Iterable[str] | Iterable[bytes], *, to_topic: str | None = None,
                    warn: Callable[[str], None] | None = None, first_line: int = 1) -> Iterator[ReplayItem]:
    """Objects as `consume` / `inspect` print them: topic, body or bodyBase64, properties, flag, msgId.

    orjson parses each line (its surrounding white space included); json takes what orjson
    refuses (NaN, huge integers). Base64 bodies are decoded by binascii; a property map of
    string values (what `consume` prints) is copied as it is. Lines may be str or bytes;
    errors name the line by its number counted from `first_line`.
    """
    loads, decode_error, a2b = orjson.loads, orjson.JSONDecodeError, binascii.a2b_base64
    tags_key, keys_key, uniq_key, origin_key = P.TAGS, P.KEYS, P.UNIQ_KEY, P.ORIGIN_MESSAGE_ID
    for n, line in enumerate(lines, first_line):
        try:
            try:
                o = loads(line)
            except decode_error:
                line = line.strip()
                if not line:
                    continue
                try:
                    o = loads(line)
                except decode_error:  # what orjson refuses (NaN, huge integers) json may take
                    o = json.loads(line)
            get = o.get
            b64 = get("bodyBase64")
            if b64 is not None or "bodyBase64" in o:
                body = a2b(b64) if type(b64) is str else base64.b64decode(b64)  # the same, without its checks
            else:
                text = get("body")
                if text is None:
                    raise ValueError("no body or bodyBase64")
                body = text.encode("utf-8") if type(text) is str else str(text).encode("utf-8")
            raw = get("properties") or {}
            props = dict(raw) if type(raw) is dict else {str(k): str(v) for k, v in raw.items() if v is not None}
            for v in props.values():
                if type(v) is not str:  # not as consume prints them: made strings, None left out
                    props = {str(k): str(v) for k, v in raw.items() if v is not None}
                    break
            for key, prop in (("tags", tags_key), ("keys", keys_key)):
                value = get(key)
                if value and prop not in props:
                    props[prop] = str(value)
            topic = to_topic or get("topic")
            if not topic:
                raise ValueError("no topic (give --to-topic)")
            m = MessageExt(str(topic), body, properties=props, flag=int(get("flag") or 0),
                           queue_id=int(get("queueId") or 0), queue_offset=int(get("queueOffset") or 0),
                           store_timestamp=int(get("storeTimestamp") or 0),
                           born_timestamp=int(get("bornTimestamp") or 0))
            msg_id = get("msgId")
            if msg_id and uniq_key not in props and origin_key not in props:
                props[origin_key] = str(msg_id)
            if get("storeHost") and get("commitLogOffset") is not None:
                try:
                    m.store_host = Host.parse(str(o["storeHost"]))
                    m.commit_log_offset = int(o["commitLogOffset"])
                except ValueError:
                    pass
        except (ValueError, TypeError, AttributeError, binascii.Error) as e:
            raise InvalidInput(f"JSON Lines input, line {n}: {e}") from None
        yield ReplayItem(m, str(topic))


def replay_message(item: ReplayItem) -> Message:
    """The message to send: same body/flag/keys/tags/user properties, ORIGIN_MESSAGE_ID added."""
    src = item.source
    props = {k: v for k, v in src.properties.items() if k not in DROPPED_PROPERTIES}
    origin = src.properties.get(P.ORIGIN_MESSAGE_ID) or src.properties.get(P.DLQ_ORIGIN_MESSAGE_ID)
    if not origin:
        origin = src.uniq_key or (src.offset_msg_id if src.commit_log_offset or src.store_timestamp else None)
    if origin:
        props[P.ORIGIN_MESSAGE_ID] = origin
    return Message(item.topic, src.decompressed_body(), properties=props, flag=src.flag)


# ---- targets -----------------------------------------------------------------------------------------
class Target(Protocol):
    def send(self, msg: Message) -> dict[str, Any]: ...

    def close(self) -> None: ...


class NetworkTarget:
    def __init__(self, namesrv: str | None, group: str = "rmqtool_replay") -> None:
        from rmqtool.client.producer import Producer

        self.producer = Producer(group, namesrv).start()

    def send(self, msg: Message) -> dict[str, Any]:
        return self.producer.send(msg).to_json()

    def close(self) -> None:
        self.producer.shutdown()


class StoreTarget:
    """An embedded store (LocalBroker): round robin over the topic's write queues, as a producer would."""

    def __init__(self, root: Path, config: Any = None) -> None:
        """`config`: the StoreConfig to open `root` with (the CLI passes the store's own sizes)."""
        from rmqtool.layouts.msgid import UniqKeyFactory
        from rmqtool.store.config import StoreConfig
        from rmqtool.store.local import LocalBroker

        self.broker = LocalBroker.open(root, config or StoreConfig(store_path_root_dir=Path(root)))
        self.uniq = UniqKeyFactory("127.0.0.1")
        self._next: dict[str, int] = {}
        self.checked_topics: set[str] = set()  # topics check_send_topic passed (replaystore.py)
        # no flush of its own: the store's FlushService (FlushRealTimeService) flushes every
        # flushIntervalCommitLog on its own thread, which also drops the written pages

    def send(self, msg: Message) -> dict[str, Any]:
        now = int(time.time() * 1000)
        props = dict(msg.properties)
        props.setdefault(P.WAIT, "true")
        props[P.UNIQ_KEY] = self.uniq.create(now)
        n = self.broker.write_queue_nums(msg.topic)
        qid = self._next.get(msg.topic)
        if qid is None:  # a producer's queue index starts at random
            qid = int.from_bytes(os.urandom(2), "big")
        qid %= max(n, 1)
        self._next[msg.topic] = qid + 1
        m = MessageExt(msg.topic, msg.body, queue_id=qid, flag=msg.flag, properties=props, born_timestamp=now)
        put = self.broker.send(m)
        status = str(getattr(put.status, "value", put.status))
        return {"status": "SEND_OK" if status == "PUT_OK" else status, "msgId": props[P.UNIQ_KEY],
                "offsetMsgId": put.offset_msg_id, "topic": msg.topic, "queueId": qid,
                "queueOffset": put.queue_offset}

    def send_many(self, msgs: list[Message]) -> list[dict[str, Any]]:
        """`send` of each message, stored with one `send_batch` (one put lock, one dispatch run):
        the same queues, records and results as one `send` after the other. Raises, storing
        nothing, when any message is refused (the caller then sends them one by one)."""
        now = int(time.time() * 1000)
        broker = self.broker
        saved, nexts = self._next, dict(self._next)
        self._next = nexts
        ms, qids = [], []
        nums: dict[str, int] = {}  # a topic's write queues, asked once per batch
        for msg in msgs:
            props = dict(msg.properties)
            props.setdefault(P.WAIT, "true")
            n = nums.get(msg.topic)
            if n is None:
                n = nums[msg.topic] = broker.write_queue_nums(msg.topic)
            qid = nexts.get(msg.topic)
            if qid is None:
                qid = int.from_bytes(os.urandom(2), "big")
            qid %= max(n, 1)
            nexts[msg.topic] = qid + 1
            ms.append(MessageExt(msg.topic, msg.body, queue_id=qid, flag=msg.flag, properties=props,
                                 born_timestamp=now))
            qids.append(qid)
        try:
            broker.check_batch(ms)  # before any UNIQ_KEY is made: a refused batch uses none up
            for m, uniq in zip(ms, self.uniq.create_many(now, len(ms)), strict=True):
                m.properties[P.UNIQ_KEY] = uniq
            stored = broker.send_records(ms)  # one topic's batch packed from its fields
            if stored is None:
                puts = broker.send_batch(ms, checked=True)
        except Exception:
            self._next = saved  # as if these were never chosen: the one-by-one retry picks the same queues
            raise
        if stored is not None:
            return _rows(stored, ms, qids)
        rows = []
        for m, qid, put in zip(ms, qids, puts, strict=True):
            status = str(getattr(put.status, "value", put.status))
            rows.append({"status": "SEND_OK" if status == "PUT_OK" else status, "msgId": m.properties[P.UNIQ_KEY],
                         "offsetMsgId": put.offset_msg_id, "topic": m.topic, "queueId": qid,
                         "queueOffset": put.queue_offset})
        return rows

    def send_lines(self, batch: Any) -> Any:
        """`send_many` of a `replaylines.Lines` batch from its fields, or None when it needs
        `send_many` (replaystore.py `store_lines`)."""
        from rmqtool.client.replaystore import store_lines

        return store_lines(self, batch)

    def close(self) -> None:
        self.broker.close()


def _rows(stored: Any, ms: list[MessageExt], qids: list[int]) -> list[dict[str, Any]]:
    """`send`'s result of each message of a batch stored by `LocalBroker.send_records`."""
    from rmqtool.layouts.msgid import host_hex

    status = "SEND_OK" if stored.status == "PUT_OK" else stored.status
    prefix, uniq, topic = host_hex(stored.store_host), P.UNIQ_KEY, ms[0].topic
    return [{"status": status, "msgId": m.properties[uniq], "offsetMsgId": prefix + format(offset, "016X"),
             "topic": topic, "queueId": qid, "queueOffset": queue_offset}
            for m, qid, offset, queue_offset in zip(ms, qids, stored.wrote_offsets, stored.queue_offsets,
                                                    strict=True)]


REPLAY_BATCH = 256  # messages per store call when the target takes batches (StoreTarget.send_many)


@dataclass
class ReplaySummary:
    selected: int = 0
    sent: int = 0
    failed: int = 0
    by_topic: dict[str, int] = field(default_factory=dict)
    seconds: float = 0.0

    def record(self, msg: Message, row: dict[str, Any]) -> None:
        """Count one message's send result (SEND_OK or not) and name its original id in the row."""
        row["originMsgId"] = msg.properties.get(P.ORIGIN_MESSAGE_ID)
        if row.get("status") == "SEND_OK":
            self.sent += 1
        else:
            self.failed += 1


def replay(items: Iterable[ReplayItem], target: Target | None, *, dry_run: bool = False,
           rate: float | None = None, on_result: Callable[[dict[str, Any]], None] | None = None,
           on_progress: Callable[[int], None] | None = None,
           on_error: Callable[[Message, Exception], None] | None = None) -> ReplaySummary:
    """Send each item (or only describe it with `dry_run`), at most `rate` messages per second.

    A target with `send_many` (the embedded store) gets REPLAY_BATCH messages per call when no
    rate is set; a batch it refuses is sent again one message at a time, so each message gets
    its own result or error as before."""
    r = Replayer(target, dry_run=dry_run, rate=rate, on_result=on_result, on_progress=on_progress,
                 on_error=on_error)
    if not r.batched:
        for item in items:
            r.send_one(replay_message(item))
        return r.finish()
    chunk: list[Message] = []
    for item in items:
        chunk.append(replay_message(item))
        if len(chunk) >= REPLAY_BATCH:
            r.send_messages(chunk)
            chunk = []
    if chunk:
        r.send_messages(chunk)
    return r.finish()


class Replayer:
    """`replay` a batch at a time, so that a stream (`replay --jsonl`) is sent and its results
    given as it comes: `send_messages` / `send_one` take Messages, `send_lines` a batch parsed
    by `replaylines.parse_lines`, which the embedded store takes from its fields. The summary
    and the rate are those of the whole stream; `finish` gives the summary."""

    def __init__(self, target: Target | None, *, dry_run: bool = False, rate: float | None = None,
                 on_result: Callable[[dict[str, Any]], None] | None = None,
                 on_lines: Callable[[str], None] | None = None,
                 on_progress: Callable[[int], None] | None = None,
                 on_error: Callable[[Message, Exception], None] | None = None) -> None:
        """`on_lines`: given, a batch stored from its fields hands over its results as JSON
        Lines text instead of one `on_result` dict per message."""
        self.target, self.dry_run, self.rate = target, dry_run, rate
        self.on_result, self.on_lines, self.on_progress, self.on_error = on_result, on_lines, on_progress, on_error
        self.batched = not dry_run and not rate and target is not None and hasattr(target, "send_many")
        self.summary = ReplaySummary()
        self.t0 = time.monotonic()

    def finish(self) -> ReplaySummary:
        self.summary.seconds = time.monotonic() - self.t0
        return self.summary

    def send_one(self, msg: Message) -> None:
        """One message (or its description with dry_run), after the wait `rate` asks for."""
        summary, on_progress = self.summary, self.on_progress
        summary.selected += 1
        if self.rate:
            delay = self.t0 + (summary.selected - 1) / self.rate - time.monotonic()
            if delay > 0:
                time.sleep(delay)
        if self.dry_run or self.target is None:
            row: dict[str, Any] = {"status": "DRY_RUN", "topic": msg.topic, "tags": msg.properties.get(P.TAGS),
                                   "keys": msg.properties.get(P.KEYS), "properties": msg.properties}
            row.update(body_fields(msg.body))
        else:
            try:
                row = self.target.send(msg)
            except Exception as e:
                summary.failed += 1
                if self.on_error is not None:
                    self.on_error(msg, e)
                    if on_progress:
                        on_progress(summary.selected)
                    return
                raise
            summary.record(msg, row)
        summary.by_topic[msg.topic] = summary.by_topic.get(msg.topic, 0) + 1
        if self.on_result:
            self.on_result(row)
        if on_progress:
            on_progress(summary.selected)

    def send_messages(self, msgs: list[Message]) -> None:
        if not self.batched:
            for msg in msgs:
                self.send_one(msg)
            return
        for i in range(0, len(msgs), REPLAY_BATCH):
            self._flush(msgs[i:i + REPLAY_BATCH])

    def send_lines(self, batch: Any) -> None:
        """A `replaylines.Lines` batch; its error (a bad line) is raised once the lines before
        it are sent."""
        target: Any = self.target
        if not batch.topics:
            pass
        elif self.batched and hasattr(target, "send_lines"):
            try:
                stored = target.send_lines(batch)
            except Exception:  # the store failed it: each on its own, as `send_many` failing is
                self._one_by_one(batch.messages())
            else:
                if stored is not None:
                    self._stored(stored)
                else:  # not a batch it takes from fields
                    self.send_messages(batch.messages())
        else:
            self.send_messages(batch.messages())
        if batch.error is not None:
            raise batch.error

    def _stored(self, stored: Any) -> None:
        summary = self.summary
        n = len(stored.uniq_keys) if hasattr(stored, "uniq_keys") else len(stored.rows())
        status = getattr(stored, "status", None)
        if status is None:  # one status per message
            for row in stored.rows():
                if row["status"] == "SEND_OK":
                    summary.sent += 1
                else:
                    summary.failed += 1
        elif status == "SEND_OK":
            summary.sent += n
        else:
            summary.failed += n
        summary.selected += n
        summary.by_topic[stored.topic] = summary.by_topic.get(stored.topic, 0) + n
        if self.on_lines is not None:
            self.on_lines(stored.json_lines())
        elif self.on_result is not None:
            for row in stored.rows():
                self.on_result(row)
        if self.on_progress:
            self.on_progress(summary.selected)

    def _handle(self, msg: Message, row: dict[str, Any] | None) -> None:
        summary = self.summary
        summary.selected += 1
        if row is None:
            summary.failed += 1
        else:
            summary.record(msg, row)
            summary.by_topic[msg.topic] = summary.by_topic.get(msg.topic, 0) + 1
            if self.on_result:
                self.on_result(row)
        if self.on_progress:
            self.on_progress(summary.selected)

    def _flush(self, chunk: list[Message]) -> None:
        target: Any = self.target
        try:
            rows = target.send_many(chunk)
        except Exception:  # a message refused: each on its own, as the one-by-one loop does
            self._one_by_one(chunk)
        else:
            for msg, row in zip(chunk, rows, strict=True):
                self._handle(msg, row)

    def _one_by_one(self, chunk: list[Message]) -> None:
        target: Any = self.target
        for msg in chunk:
            try:
                row = target.send(msg)
            except Exception as e:
                if self.on_error is None:
                    raise
                self.on_error(msg, e)
                row = None
            self._handle(msg, row)
