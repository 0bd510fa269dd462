"""The network mode of `rmqtool send` and `rmqtool consume` (`--namesrv` / NAMESRV_ADDR).

`rmqtool.cli.send` / `rmqtool.cli.consume` parse and check the options, build the messages, and
call these functions; we talk to the name server and brokers and hand back results / messages.
A name server that cannot be reached is a `ClientError` (exit 3 in the CLI).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

from rmqtool.client.consumer import (
    BROADCASTING,
    CLUSTERING,
    CONSUME_FROM_FIRST_OFFSET,
    ConsumeContext,
    PushConsumer,
    StopConsuming,
)
from rmqtool.client.instance import ClientConfig
from rmqtool.client.message import ConsumeStatus, Message, MessageQueue, SendResult
from rmqtool.client.producer import Producer
from rmqtool.client.subscription import SQL92, TAG
from rmqtool.errors import InvalidInput
from rmqtool.layouts.message import MessageExt
from rmqtool.timeparse import parse_time_ms

SEND_WINDOW = 64  # sends in flight when neither --queue nor --sharding-key asks for order


def _to_message(m: MessageExt | Message) -> Message:
    if isinstance(m, Message):
        return m
    return Message(m.topic, m.decompressed_body(), properties=dict(m.properties), flag=m.flag)


def _result_dicts(r: SendResult) -> list[dict[str, Any]]:
    """One row per message: a batch's comma-joined ids become consecutive rows."""
    ids = r.msg_id.split(",")
    offs = r.offset_msg_id.split(",") if r.offset_msg_id else [""] * len(ids)
    return [{"status": r.status.value, "msgId": mid, "offsetMsgId": offs[i] if i < len(offs) else "",
             "topic": r.message_queue.topic, "queueId": r.message_queue.queue_id,
             "queueOffset": r.queue_offset + i} for i, mid in enumerate(ids)]


def send(*, namesrv: str | None, messages: Sequence[MessageExt | Message], batch: int = 1,
         queue: int | None = None, sharding_key: str | None = None, group: str = "rmqtool_producer",
         timeout: float = 3.0, producer: Producer | None = None) -> list[dict[str, Any]]:
    """Send `messages` (all to one topic) and return one result row per message, in order."""
    msgs = [_to_message(m) for m in messages]
    if not msgs:
        return []
    own = producer is None
    p = producer or Producer(group, namesrv, send_msg_timeout=timeout)
    if own:
        p.start()
    try:
        target: MessageQueue | None = None
        if queue is not None:
            qs = p.fetch_publish_message_queues(msgs[0].topic)
            broker = qs[0].broker_name
            n = sum(1 for q in qs if q.broker_name == broker)
            if queue >= n:
                raise InvalidInput(f"--queue {queue}: topic {msgs[0].topic} has {n} write queues on {broker} "
                                   f"(0..{n - 1})")
            target = MessageQueue(msgs[0].topic, broker, queue)
        chunks = [msgs[i:i + batch] for i in range(0, len(msgs), batch)] if batch > 1 else [[m] for m in msgs]
        if target is not None or sharding_key is not None:
            results = []
            for chunk in chunks:
                if len(chunk) > 1:
                    results.append(p.send_batch(chunk, queue=target))
                else:
                    results.append(p.send(chunk[0], queue=target, sharding_key=sharding_key))
        else:
            results = p.instance.run(_send_windowed(p, chunks))
        return [row for r in results for row in _result_dicts(r)]
    finally:
        if own:
            p.shutdown()


async def _send_windowed(p: Producer, chunks: list[list[Message]]) -> list[SendResult]:
    sem = asyncio.Semaphore(SEND_WINDOW)

    async def one(chunk: list[Message]) -> SendResult:
        async with sem:
            if len(chunk) > 1:
                return await p.asend_batch(chunk)
            return await p.asend(chunk[0])

    first = await one(chunks[0])  # one send first: routes and connections are set up once
    rest = await asyncio.gather(*(one(c) for c in chunks[1:]))
    return [first, *rest]


# ---- consume ----------------------------------------------------------------------------------------
def exec_env(m: MessageExt) -> dict[str, str]:
    """The message's fields for `--exec`: RMQ_TOPIC, RMQ_MSG_ID, ..., RMQ_PROP_<NAME> per property."""
    env = {"RMQ_TOPIC": m.topic, "RMQ_MSG_ID": m.msg_id, "RMQ_OFFSET_MSG_ID": m.offset_msg_id,
           "RMQ_TAGS": m.tags or "", "RMQ_KEYS": m.keys or "", "RMQ_QUEUE_ID": str(m.queue_id),
           "RMQ_QUEUE_OFFSET": str(m.queue_offset), "RMQ_RECONSUME_TIMES": str(m.reconsume_times),
           "RMQ_BORN_TIMESTAMP": str(m.born_timestamp), "RMQ_STORE_TIMESTAMP": str(m.store_timestamp),
           "RMQ_COMMIT_LOG_OFFSET": str(m.commit_log_offset)}
    for k, v in m.properties.items():
        env["RMQ_PROP_" + re.sub(r"[^A-Za-z0-9_]", "_", k)] = v
    return env


def run_exec(cmd: str, m: MessageExt) -> bool:
    """Run CMD with the body on stdin; exit 0 = consumed. Its stdout goes to our stderr (stdout is data)."""
    proc = subprocess.run(cmd, shell=True, input=m.decompressed_body(), stdout=sys.stderr.buffer
                          if hasattr(sys.stderr, "buffer") else None, env={**os.environ, **exec_env(m)})
    return proc.returncode == 0


def consume(*, namesrv: str | None, topic: str, group: str = "rmqtool", expr: str = "*", sql: str | None = None,
            start: str = "committed", count: int | None = None, timeout: float | None = None,
            follow: bool = False, commit: bool = True, broadcast: bool = False, exec_cmd: str | None = None,
            max_reconsume_times: int = 16, on_message: Callable[[MessageExt], None] | None = None,
            concurrency: int = 1, config: ClientConfig | None = None) -> int:
    """Consume as a push consumer of `group`; returns how many messages were handled.

    Without `follow` it stops once every queue is read to its end (like `kcat -e`); with a
    `timeout` it waits up to that long for the first (or `count`) messages.
    """
    start_from: str | int | None = None
    if start in ("first", "last"):
        start_from = start
    elif start != "committed":
        start_from = parse_time_ms(start)
    consumer = PushConsumer(
        group, namesrv, message_model=BROADCASTING if broadcast else CLUSTERING,
        consume_from_where=CONSUME_FROM_FIRST_OFFSET, consume_thread_nums=max(1, concurrency),
        max_reconsume_times=max_reconsume_times, long_polling=follow, start_from=start_from, config=config,
        pull_batch_size=32 if count is None else max(1, min(32, count)))
    if sql is not None:
        consumer.subscribe(topic, sql, expression_type=SQL92)
    else:
        consumer.subscribe(topic, expr, expression_type=TAG)
    lock = threading.Lock()
    handled = 0
    done = threading.Event()

    def listener(msgs: list[MessageExt], ctx: ConsumeContext) -> ConsumeStatus:
        nonlocal handled
        for m in msgs:
            with lock:
                if count is not None and handled >= count:
                    raise StopConsuming
                handled += 1
                if count is not None and handled >= count:
                    done.set()
                if on_message is not None:
                    on_message(m)
            if exec_cmd is not None and not run_exec(exec_cmd, m):
                return ConsumeStatus.RECONSUME_LATER
        return ConsumeStatus.CONSUME_SUCCESS

    consumer.register_listener(listener)
    consumer.impl.offset_store.enabled = commit
    deadline = None if timeout is None else time.monotonic() + timeout
    consumer.start()
    try:
        while not done.is_set():
            if deadline is not None and time.monotonic() >= deadline:
                break
            if not follow and consumer.instance.run(_caught_up(consumer)):
                if deadline is None or (count is None and handled > 0):
                    break
            done.wait(0.05)
    except KeyboardInterrupt:
        pass
    finally:
        with contextlib.suppress(KeyboardInterrupt):
            consumer.shutdown()
    return handled


def consume_pop(*, namesrv: str | None, topic: str, group: str = "rmqtool", expr: str = "*", sql: str | None = None,
                count: int | None = None, timeout: float | None = None, follow: bool = False, ack: bool = True,
                exec_cmd: str | None = None, invisible: float = 30.0, max_attempts: int = 16,
                on_message: Callable[[MessageExt], None] | None = None, config: ClientConfig | None = None) -> int:
    """Consume by POP as a SimpleConsumer of `group`; returns how many messages were handled.

    Each message is acked once printed (and its --exec command succeeded); one not acked comes back
    after `invisible` seconds. Without `follow` it stops when a receive finds nothing.
    """
    from rmqtool.client.simple import SimpleConsumer

    consumer = SimpleConsumer(group, namesrv, max_attempts=max_attempts, config=config)
    if sql is not None:
        consumer.subscribe(topic, sql, SQL92)
    else:
        consumer.subscribe(topic, expr, TAG)
    deadline = None if timeout is None else time.monotonic() + timeout
    handled = 0
    consumer.start()
    try:
        while count is None or handled < count:
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                break
            wait = min(left, 20.0) if left is not None else (20.0 if follow else 1.0)
            n = 32 if count is None else max(1, min(32, count - handled))
            got = consumer.receive(n, invisible_duration=invisible, await_duration=wait)
            if not got and not follow and (deadline is None or count is None and handled > 0):
                break
            for r in got:
                if on_message is not None:
                    on_message(r.message)
                handled += 1
                if ack and (exec_cmd is None or run_exec(exec_cmd, r.message)):
                    consumer.ack(r)
    except KeyboardInterrupt:
        pass
    finally:
        with contextlib.suppress(KeyboardInterrupt):
            consumer.shutdown()
    return handled


async def _caught_up(consumer: PushConsumer) -> bool:
    impl = consumer.impl
    if impl.rebalance_count == 0:
        return False
    return all(pq.caught_up and pq.msg_count == 0 for pq in impl.process_queues.values())
