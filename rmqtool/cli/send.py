"""`rmqtool send TOPIC [BODY]`: produce messages as a RocketMQ producer would (cli.md).

Embedded mode builds each message as `DefaultMQProducer` does (TAGS, KEYS, WAIT, user
properties, delay/timer keys, the client's UNIQ_KEY, properties in the client's HashMap order)
and hands it to `LocalBroker.send`, which does the broker's part. Everything that can be refused
is checked before the store is opened, so bad input writes nothing.
"""

from __future__ import annotations

import random
import sys
import time
from typing import Annotated, Any

import typer

from rmqtool.cli import common
from rmqtool.errors import InvalidInput, InvalidMessage
from rmqtool.layouts import properties as P
from rmqtool.layouts.javahash import hashmap_order
from rmqtool.layouts.message import MessageExt
from rmqtool.layouts.msgid import UniqKeyFactory
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
RESULT_COLUMNS = ["status", "msgId", "offsetMsgId", "topic", "queueId", "queueOffset"]


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


def read_bodies(body: str | None) -> list[bytes]:
    """BODY, or one body per stdin line when BODY is absent and stdin is not a terminal."""
    if body is not None:
        return [body.encode("utf-8")]
    if sys.stdin is None or common.is_tty(sys.stdin):
        raise InvalidInput("give a BODY, or pipe one message per line on stdin")
    data = sys.stdin.buffer.read()
    lines = data.split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()
    bodies = [ln[:-1] if ln.endswith(b"\r") else ln for ln in lines]
    bodies = [b for b in bodies if b]
    if not bodies:
        raise InvalidMessage("stdin held no message (empty lines are skipped)")
    return bodies


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
    json_out: common.JSON_OPT = False,
    store: common.STORE_OPT = None,
    namesrv: common.NAMESRV_OPT = None,
) -> None:
    """Send one message, or one per stdin line.

    Prints one result per message: status, msgId, offsetMsgId, topic, queueId, queueOffset.
    Exit status 1 when a message was not SEND_OK.
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
    now = int(time.time() * 1000)
    extra = delay_properties(delay_level, delay, deliver_at, now)
    if batch > 1 and extra:
        raise InvalidInput("batch messages cannot be delayed (RocketMQ refuses DELAY in a batch)")
    user_props = dict(parse_property(p) for p in (prop or []))
    if sharding_key is not None and not sharding_key:
        raise InvalidInput("--sharding-key must not be empty")
    bodies = read_bodies(body)
    uniq = UniqKeyFactory("127.0.0.1")
    msgs = []
    for b in bodies:
        props: dict[str, str] = {}
        if tag:
            props[P.TAGS] = tag
        if key:
            props[P.KEYS] = " ".join(key)
        props[P.WAIT] = "true"
        props.update(user_props)
        props.update(extra)
        if sharding_key:
            props[P.SHARDING_KEY] = sharding_key
        props[P.UNIQ_KEY] = uniq.create(now)
        props = client_order(props)
        msgs.append(MessageExt(topic=topic, body=b, properties=props, born_timestamp=now))
    max_size = 4 * 1024 * 1024
    for m in msgs:
        check_body(m.body, max_size)
        check_properties(m.properties)
    if batch > 1:
        for i in range(0, len(msgs), batch):
            size = sum(len(m.body) for m in msgs[i:i + batch])
            if size > max_size:
                raise InvalidMessage(f"a batch of {size} body bytes is over the max message size {max_size}")

    if common.network_mode(ctx, namesrv):
        results = common.bridge("send")(namesrv=namesrv, messages=msgs, batch=batch, queue=queue,
                                        sharding_key=sharding_key, group=group)
    else:
        results = _send_embedded(common.store_dir(store), msgs, batch=batch, queue=queue,
                                 sharding_key=sharding_key, flush=flush)
    _print_results(results, json_out)
    if any(r.get("status") != "SEND_OK" for r in results):
        raise typer.Exit(1)


def _send_embedded(root: Any, msgs: list[MessageExt], *, batch: int, queue: int | None,
                   sharding_key: str | None, flush: str | None) -> list[dict[str, Any]]:
    from rmqtool.store.local import LocalBroker, select_queue_by_hash
    from rmqtool.store.topics import TopicConfigManager

    common.check_store_path(root)
    config = common.store_config(root)
    if queue is not None:
        # refuse an out-of-range queue before the store is opened (or created)
        topics = TopicConfigManager(root / "config", default_topic_queue_nums=config.default_topic_queue_nums)
        if root.is_dir():
            topics.load()
        tc = topics.select(msgs[0].topic)
        n = tc.write_queue_nums if tc is not None else config.default_topic_queue_nums
        if queue >= n:
            raise InvalidInput(f"--queue {queue}: topic {msgs[0].topic} has {n} queues (0..{n - 1})")
    results: list[dict[str, Any]] = []
    with LocalBroker.open(root, config) as broker:
        topic = msgs[0].topic
        n = broker.write_queue_nums(topic)
        if queue is not None and queue >= n:
            raise InvalidInput(f"--queue {queue}: topic {topic} has {n} queues (0..{n - 1})")
        if sharding_key is not None:
            qid_of = lambda i: select_queue_by_hash(sharding_key, n)  # noqa: E731
        elif queue is not None:
            qid_of = lambda i: queue  # noqa: E731
        else:
            start = random.randrange(n)  # MQFaultStrategy's ThreadLocalIndex starts at random
            qid_of = lambda i: (start + i) % n  # noqa: E731
        groups = [msgs[i:i + batch] for i in range(0, len(msgs), batch)]
        for gi, chunk in enumerate(groups):
            qid = qid_of(gi)
            for m in chunk:
                m.queue_id = qid
        for chunk in groups:  # everything is checked before the first write
            for m in chunk:
                broker.check(m)
        if batch > 1:
            for chunk in groups:
                qid = chunk[0].queue_id
                for r in broker.send_batch(chunk, checked=True):
                    results.append(_result(r, topic, qid))
        else:
            # separate messages, but handed to the store many at a time (one lock, one flush wait)
            for i in range(0, len(msgs), STORE_CHUNK):
                chunk = msgs[i:i + STORE_CHUNK]
                qids = [m.queue_id for m in chunk]
                puts = broker.send_batch(chunk, checked=True)
                for r, qid in zip(puts, qids, strict=True):
                    results.append(_result(r, topic, qid))
    return results


def _result(put: Any, topic: str, queue_id: int) -> dict[str, Any]:
    """Java's SendResult: the queue the producer chose, the store's queue offset and ids."""
    status = str(getattr(put.status, "value", put.status))
    return {
        "status": "SEND_OK" if status == "PUT_OK" else status,
        "msgId": put.msg.properties.get(P.UNIQ_KEY) or put.offset_msg_id,
        "offsetMsgId": put.offset_msg_id,
        "topic": topic,
        "queueId": queue_id,
        "queueOffset": put.queue_offset,
    }


def _print_results(results: list[dict[str, Any]], json_out: bool) -> None:
    if common.choose_format(None, json_out) == "json":
        w = common.JsonLinesWriter()
        for r in results:
            w.write_obj(r)
        w.flush()
    else:
        common.print_table(results, RESULT_COLUMNS)


def register(app: typer.Typer) -> None:
    app.command("send", context_settings={"help_option_names": ["-h", "--help"]})(send)

