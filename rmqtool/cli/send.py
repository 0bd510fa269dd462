"""`rmqtool send TOPIC [BODY]`: produce messages as a RocketMQ producer would (cli.md).

Embedded mode builds each message as `DefaultMQProducer` does (TAGS, KEYS, WAIT, user
properties, delay/timer keys, the client's UNIQ_KEY, properties in the client's HashMap order)
and hands it to `LocalBroker.send`, which does the broker's part. Everything that can be refused
is checked before the store is opened, so bad input writes nothing.

Lines from stdin are a stream (cli/sendstream.py): sent in batches as they come, each batch's
results printed as soon as it is stored, in bounded memory. The options and the first batch
are checked before the store is opened; a bad line later stops the stream with exit 2 after
what came before it was sent and printed.
"""

from __future__ import annotations

import random
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated, Any

import typer

from rmqtool.cli import common
from rmqtool.cli.sendresults import ResultPrinter, Stored, _json_result, _results  # noqa: F401 (_json_result: tests)
from rmqtool.cli.sendstream import batches
from rmqtool.errors import InvalidInput, InvalidMessage
from rmqtool.layouts import properties as P
from rmqtool.layouts.javahash import hashmap_order
from rmqtool.layouts.message import MessageExt
from rmqtool.layouts.msgid import UniqKeyFactory, host_hex
from rmqtool.validators import check_body, check_group, check_properties, check_send_topic

MAX_DELAY_LEVEL = 18
DEFAULT_TIMER_MAX_DELAY_SEC = 259200  # MessageStoreConfig.timerMaxDelaySec (3 days)
# Names a user property may not take (Message.putUserProperty refuses MessageConst's own keys).
RESERVED_PROPERTIES = frozenset({
    P.KEYS, P.TAGS, P.WAIT, P.DELAY, P.RETRY_TOPIC, P.REAL_TOPIC, P.REAL_QID, P.TRAN_MSG, P.PGROUP,
    P.ORIGIN_MESSAGE_ID, P.UNIQ_KEY, P.CLUSTER, P.MAX_RECONSUME_TIMES, P.RECONSUME_TIME, P.MIN_OFFSET,
    P.MAX_OFFSET, P.TIMER_DELAY_SEC, P.TIMER_DELAY_MS, P.TIMER_DELIVER_MS, P.TIMER_OUT_MS, P.TIMER_ENQUEUE_MS,
    P.TIMER_DEQUEUE_MS, P.TIMER_ROLL_TIMES, P.TIMER_DEL_UNIQKEY, P.TRANSACTION_ID, P.INNER_NUM, P.INNER_BASE,
    P.SHARDING_KEY,
})
STORE_CHUNK = 256  # messages per store call when sending stdin lines one by one
MAX_MESSAGE_SIZE = 4 * 1024 * 1024  # DefaultMQProducer.maxMessageSize
ASYNC_FLUSH_INTERVAL_S = 0.5  # MessageStoreConfig.flushIntervalCommitLog


def client_order(props: dict[str, str]) -> dict[str, str]:
    """The order of a Java client's `HashMap` (default capacity 16) in which it serialises them."""
    return {k: props[k] for k in hashmap_order(list(props), 16)}


def parse_property(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise InvalidInput(f"--property {text!r}: use KEY=VALUE")
    if key in RESERVED_PROPERTIES:
        raise InvalidInput(f"--property {key}: the name is used by RocketMQ itself; use the matching option")
    if not value:
        raise InvalidInput(f"--property {key}: an empty value is not stored by RocketMQ")
    return key, value


def delay_properties(delay_level: int | None, delay: str | None, deliver_at: str | None,
                     now_ms: int, max_delay_sec: int = DEFAULT_TIMER_MAX_DELAY_SEC) -> dict[str, str]:
    """DELAY / TIMER_DELAY_MS / TIMER_DELIVER_MS from the options, with their ranges checked."""
    given = [o for o, v in (("--delay-level", delay_level), ("--delay", delay), ("--deliver-at", deliver_at))
             if v is not None]
    if len(given) > 1:
        raise InvalidInput(f"{' and '.join(given)} exclude each other")
    if delay_level is not None:
        if not 1 <= delay_level <= MAX_DELAY_LEVEL:
            raise InvalidMessage(f"--delay-level {delay_level}: RocketMQ has levels 1..{MAX_DELAY_LEVEL}")
        return {P.DELAY: str(delay_level)}
    if delay is not None:
        ms = common.parse_duration_ms(delay)
        if ms <= 0:
            raise InvalidMessage(f"--delay {delay}: must be more than 0")
        if ms > max_delay_sec * 1000:
            raise InvalidMessage(f"--delay {delay}: over the broker's timerMaxDelaySec ({max_delay_sec} s)")
        return {P.TIMER_DELAY_MS: str(ms)}
    if deliver_at is not None:
        at = common.parse_time_ms(deliver_at)
        if at - now_ms > max_delay_sec * 1000:
            raise InvalidMessage(f"--deliver-at {deliver_at}: more than timerMaxDelaySec ({max_delay_sec} s) ahead")
        return {P.TIMER_DELIVER_MS: str(at)}
    return {}


def send(
    ctx: typer.Context,
    topic: Annotated[str, typer.Argument(help="Topic to send to.")],
    body: Annotated[str | None, typer.Argument(help="Message body; without it, one message per stdin line.")] = None,
    tag: Annotated[str | None, typer.Option("--tag", metavar="TAG", help="Message tag (TAGS).")] = None,
    key: Annotated[list[str] | None, typer.Option("--key", "-k", metavar="KEY",
                                                  help="Message key (KEYS), repeatable.")] = None,
    prop: Annotated[list[str] | None, typer.Option("--property", "-p", metavar="KEY=VALUE",
                                                   help="User property, repeatable.")] = None,
    queue: Annotated[int | None, typer.Option("--queue", "-q", metavar="N", help="Queue id to send to.")] = None,
    sharding_key: Annotated[str | None, typer.Option("--sharding-key", metavar="KEY",
                                                     help="Same key, same queue, in order.")] = None,
    delay_level: Annotated[int | None, typer.Option("--delay-level", metavar="1..18",
                                                    help="Delay level (1 s .. 2 h).")] = None,
    delay: Annotated[str | None, typer.Option("--delay", metavar="DURATION",
                                              help="Timer message: deliver after DURATION (90s, 5m).")] = None,
    deliver_at: Annotated[str | None, typer.Option("--deliver-at", metavar="TIME",
                                                   help="Timer message: deliver at TIME.")] = None,
    batch: Annotated[int, typer.Option("--batch", metavar="N",
                                       help="Send stdin lines N at a time as one batch.")] = 1,
    group: common.group_opt("rmqtool_producer", "Producer group.") = "rmqtool_producer",
    flush: common.FLUSH_OPT = None,
    quiet: Annotated[bool, typer.Option("--quiet", help="Print no result per message; a summary on stderr.")] = False,
    json_out: common.JSON_OPT = False,
    store: common.STORE_OPT = None,
    namesrv: common.NAMESRV_OPT = None,
) -> None:
    """Send one message, or one per stdin line.

    Prints one result per message: status, msgId, offsetMsgId, topic, queueId, queueOffset.
    Lines from stdin are sent as they come (a batch goes when full or 0.2 s after its first
    line) and each result is printed once its batch is stored. Exit status 1 when a message
    was not SEND_OK.
    """
    check_send_topic(topic)
    check_group(group)
    if batch < 1:
        raise InvalidInput("--batch must be 1 or more")
    if queue is not None and queue < 0:
        raise InvalidInput("--queue must be 0 or more")
    if queue is not None and sharding_key is not None:
        raise InvalidInput("--queue and --sharding-key exclude each other")
    if flush not in (None, "sync", "async"):
        raise InvalidInput("--flush takes sync or async")
    extra = delay_properties(delay_level, delay, deliver_at, int(time.time() * 1000))
    if batch > 1 and extra:
        raise InvalidInput("batch messages cannot be delayed (RocketMQ refuses DELAY in a batch)")
    user_props = dict(parse_property(p) for p in (prop or []))
    if sharding_key is not None and not sharding_key:
        raise InvalidInput("--sharding-key must not be empty")
    build = MessageBuilder(topic, tag, key, user_props, extra, sharding_key)
    if body is not None:
        source: Iterator[list[bytes]] = iter([[body.encode("utf-8")]])
    elif sys.stdin is None or common.is_tty(sys.stdin):
        raise InvalidInput("give a BODY, or pipe one message per line on stdin")
    else:
        # whole batches, or many single messages at a time (one store call, one flush wait)
        source = batches(sys.stdin.buffer, batch if batch > 1 else STORE_CHUNK, max_line=2 * MAX_MESSAGE_SIZE)
    if common.network_mode(ctx, namesrv):
        sender: Any = NetworkSender(namesrv, group=group, batch=batch, queue=queue, sharding_key=sharding_key)
    else:
        sender = EmbeddedSender(common.store_dir(store), batch=batch, queue=queue, sharding_key=sharding_key,
                                flush=flush)
    printer = ResultPrinter(json_out, quiet)
    sent = 0
    failed = False
    try:
        for bodies in source:
            stored = sender.send_bodies(build, bodies) if sender.takes_bodies() else None
            if stored is not None:  # the batches as records, no MessageExt per line
                printer.write_stored(stored)
                sent += sum(len(s.offsets) for s in stored)
                failed = failed or any(s.status != "SEND_OK" for s in stored)
                continue
            msgs = build.messages(bodies)
            check_messages(msgs, batch, each=sender.needs_checks())
            results = sender.send(msgs)
            printer.write(results)  # as they come: a `tail -f` pipe sees each line's result
            sent += len(results)
            failed = failed or any(r.get("status") != "SEND_OK" for r in results)
    finally:
        sender.close()
    printer.summary()
    if not sent:
        raise InvalidMessage("stdin held no message (empty lines are skipped)")
    if failed:
        raise typer.Exit(1)


class MessageBuilder:
    """Messages as `DefaultMQProducer` builds them from the command's options, one per body."""

    def __init__(self, topic: str, tag: str | None, keys: list[str] | None, user_props: dict[str, str],
                 extra: dict[str, str], sharding_key: str | None) -> None:
        self.topic = topic
        fixed: dict[str, str] = {}
        if tag:
            fixed[P.TAGS] = tag
        if keys:
            fixed[P.KEYS] = " ".join(keys)
        fixed[P.WAIT] = "true"
        fixed.update(user_props)
        fixed.update(extra)
        if sharding_key:
            fixed[P.SHARDING_KEY] = sharding_key
        self.uniq = UniqKeyFactory("127.0.0.1")
        # the same keys in every message: the client's HashMap order is worked out once
        self.order = list(client_order({**fixed, P.UNIQ_KEY: ""}))
        self.values = [fixed.get(k, "") for k in self.order]
        self.uniq_at = self.order.index(P.UNIQ_KEY)

    def messages(self, bodies: list[bytes], uniq_keys: list[str] | None = None,
                 now: int | None = None) -> list[MessageExt]:
        """One MessageExt per body; `uniq_keys` (one per body) instead of new ids when given."""
        now = int(time.time() * 1000) if now is None else now
        topic, order, values, at = self.topic, self.order, list(self.values), self.uniq_at
        keys = self.uniq.create_many(now, len(bodies)) if uniq_keys is None else uniq_keys
        out = []
        for b, u in zip(bodies, keys, strict=True):
            values[at] = u
            out.append(MessageExt(topic=topic, body=b, properties=dict(zip(order, values, strict=True)),
                                  born_timestamp=now))
        return out

    def properties(self) -> dict[str, str]:
        """Every message's map in the client's order, UNIQ_KEY empty (each message has its own)."""
        return dict(zip(self.order, self.values, strict=True))


def check_messages(msgs: list[MessageExt], batch: int, *, each: bool = True) -> None:
    """The client's checks (Validators.checkMessage, the batch's size) before anything is sent;
    `each=False` leaves the per-message part to the store's own check of each batch."""
    if each:
        for m in msgs:
            check_body(m.body, MAX_MESSAGE_SIZE)
            check_properties(m.properties)
    if batch > 1:
        for i in range(0, len(msgs), batch):
            size = sum(len(m.body) for m in msgs[i:i + batch])
            if size > MAX_MESSAGE_SIZE:
                raise InvalidMessage(f"a batch of {size} body bytes is over the max message size {MAX_MESSAGE_SIZE}")


class EmbeddedSender:
    """Sends into the store directory itself; opens it at the first send, so bad input creates nothing."""

    def __init__(self, root: Path, *, batch: int, queue: int | None, sharding_key: str | None,
                 flush: str | None) -> None:
        self.root, self.batch, self.queue, self.sharding_key = root, batch, queue, sharding_key
        common.check_store_path(root)
        self.config = common.store_config(root)
        if flush is not None:
            self.config.flush_disk_type = "SYNC_FLUSH" if flush == "sync" else "ASYNC_FLUSH"
        self.broker: Any = None
        self.next_queue = 0
        self.queue_nums = 0
        self.flushed_at = time.monotonic()

    def _check_queue(self, topic: str) -> None:
        """Refuse an out-of-range --queue before the store is opened (or created)."""
        from rmqtool.store.topics import TopicConfigManager

        topics = TopicConfigManager(self.root / "config", default_topic_queue_nums=self.config.default_topic_queue_nums)
        if self.root.is_dir():
            topics.load()
        tc = topics.select(topic)
        n = tc.write_queue_nums if tc is not None else self.config.default_topic_queue_nums
        if self.queue is not None and self.queue >= n:
            raise InvalidInput(f"--queue {self.queue}: topic {topic} has {n} queues (0..{n - 1})")

    def _open(self, topic: str) -> None:
        from rmqtool.store.local import LocalBroker

        if self.queue is not None:
            self._check_queue(topic)
        self.broker = LocalBroker.open(self.root, self.config)
        n = self.queue_nums = self.broker.write_queue_nums(topic)
        if self.queue is not None and self.queue >= n:
            raise InvalidInput(f"--queue {self.queue}: topic {topic} has {n} queues (0..{n - 1})")
        self.next_queue = random.randrange(n)  # MQFaultStrategy's ThreadLocalIndex starts at random

    def _queue_id(self) -> int:
        from rmqtool.store.local import select_queue_by_hash

        if self.sharding_key is not None:
            return select_queue_by_hash(self.sharding_key, self.queue_nums)
        if self.queue is not None:
            return self.queue
        qid = self.next_queue % self.queue_nums
        self.next_queue += 1
        return qid

    def send(self, msgs: list[MessageExt]) -> list[dict[str, Any]]:
        topic = msgs[0].topic
        if self.broker is None:
            self._open(topic)
        groups = [msgs[i:i + self.batch] for i in range(0, len(msgs), self.batch)]
        for chunk in groups:
            qid = self._queue_id()
            for m in chunk:
                m.queue_id = qid
        results: list[dict[str, Any]] = []
        # a round is one batch (or one store call of single messages), which send_batch checks
        # as a whole before it writes any of it
        for chunk in groups if self.batch > 1 else [msgs]:
            qids = [m.queue_id for m in chunk]
            puts = self.broker.send_batch(chunk)
            results += _results(puts, topic, qids)
        self._flush_due()
        return results

    def _flush_due(self) -> None:
        if time.monotonic() - self.flushed_at >= ASYNC_FLUSH_INTERVAL_S:
            # what a broker's FlushRealTimeService does with ASYNC_FLUSH; it also lets the store
            # drop written pages from this process's memory, which a long stream would grow
            self.broker.store.flush()
            self.flushed_at = time.monotonic()

    def needs_checks(self) -> bool:
        """Before the store is open, the command checks each message itself (so bad input creates
        nothing); once it is, the store's check of each batch does it."""
        return self.broker is None

    def takes_bodies(self) -> bool:
        """Batches go in as bodies once the store is open (the first one went through `send`)."""
        return self.batch > 1 and self.broker is not None

    def send_bodies(self, build: MessageBuilder, bodies: list[bytes]) -> list[Stored] | None:
        """`send` of these lines' messages without making them (`LocalBroker.send_bodies` per
        batch); None, with nothing sent, when the first batch needs the MessageExt path."""
        now = int(time.time() * 1000)
        props = build.properties()
        topic, size = build.topic, self.batch
        out: list[Stored] = []
        for i in range(0, len(bodies), size):
            chunk = bodies[i:i + size]
            total = sum(map(len, chunk))
            if total > MAX_MESSAGE_SIZE:
                raise InvalidMessage(f"a batch of {total} body bytes is over the max message size {MAX_MESSAGE_SIZE}")
            qid = self._queue_id()
            uniq_keys = build.uniq.create_many(now, len(chunk))
            put = self.broker.send_bodies(topic, qid, chunk, props, uniq_keys, now)
            if put is None:  # what put_bodies does not take: the same messages one object each
                msgs = build.messages(chunk, uniq_keys, now)
                for m in msgs:
                    m.queue_id = qid
                results = _results(self.broker.send_batch(msgs, checked=True), topic, [qid] * len(msgs))
                out.append(Stored.of_results(results))
                continue
            status = "SEND_OK" if put.status == "PUT_OK" else put.status
            out.append(Stored(status, topic, qid, uniq_keys, put.wrote_offsets, put.queue_offset,
                              host_hex(put.store_host)))
        self._flush_due()
        return out

    def close(self) -> None:
        if self.broker is not None:
            self.broker.close()
            self.broker = None


class NetworkSender:
    """Sends through a name server with one producer for the whole stream, started at the first send."""

    def __init__(self, namesrv: str | None, *, group: str, batch: int, queue: int | None,
                 sharding_key: str | None) -> None:
        self.namesrv, self.group, self.batch, self.queue, self.sharding_key = namesrv, group, batch, queue, sharding_key
        self.send_fn = common.bridge("send")
        self.producer: Any = None

    def needs_checks(self) -> bool:
        return True  # what a client checks before it sends (the broker checks again)

    def takes_bodies(self) -> bool:
        return False

    def send(self, msgs: list[MessageExt]) -> list[dict[str, Any]]:
        if self.producer is None:
            from rmqtool.client import Producer

            self.producer = Producer(self.group, self.namesrv, send_msg_timeout=3.0)
            self.producer.start()
        return self.send_fn(namesrv=self.namesrv, messages=msgs, batch=self.batch, queue=self.queue,
                            sharding_key=self.sharding_key, group=self.group, producer=self.producer)

    def close(self) -> None:
        if self.producer is not None:
            self.producer.shutdown()
            self.producer = None


def register(app: typer.Typer) -> None:
    app.command("send", context_settings={"help_option_names": ["-h", "--help"]})(send)

