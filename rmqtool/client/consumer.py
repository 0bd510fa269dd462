"""`PushConsumer` and `PullConsumer` (protocol.md §4.4-§4.11, §7.3-§7.8).

`ConsumerImpl` lives on the client loop: rebalance (`RebalanceImpl`), one pull loop per assigned
queue with long polling and flow control (`DefaultMQPushConsumerImpl#pullMessage`), listener calls
on a thread pool (`ConsumeMessageConcurrentlyService` / `ConsumeMessageOrderlyService`), retries
sent back to the broker, offsets committed every 5 s and on shutdown.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import logging
import os
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rmqtool.client import namespace as ns
from rmqtool.client.allocate import AllocateMessageQueueAveragely, AllocateMessageQueueStrategy
from rmqtool.client.exceptions import BrokerError, ClientError
from rmqtool.client.instance import ClientConfig, ClientInstance, resolve_instance
from rmqtool.client.message import ConsumeStatus, Message, MessageQueue, PullResult, PullStatus
from rmqtool.client.offsets import (
    LocalFileOffsetStore,
    OffsetStore,
    RemoteBrokerOffsetStore,
    default_local_offset_dir,
)
from rmqtool.client.process_queue import ProcessQueue
from rmqtool.client.pull import build_sys_flag, pull_kernel, query_offset
from rmqtool.client.route import TopicRouteData, subscribe_queues
from rmqtool.client.subscription import SQL92, TAG, SubscriptionData, build
from rmqtool.errors import RemotingError
from rmqtool.layouts import properties as P
from rmqtool.layouts.constants import RETRY_GROUP_TOPIC_PREFIX
from rmqtool.layouts.message import MessageExt
from rmqtool.remoting import fastjson
from rmqtool.remoting.bodies import (
    CheckClientRequestBody,
    ConsumerData,
    ConsumerListBody,
    LockBatchRequestBody,
    LockBatchResponseBody,
)
from rmqtool.remoting.bodies import MessageQueue as MessageQueueBody
from rmqtool.remoting.codes import RequestCode, ResponseCode
from rmqtool.remoting.command import RemotingCommand
from rmqtool.remoting.headers import ConsumerSendMsgBackRequestHeader, GetConsumerListByGroupRequestHeader
from rmqtool.validators import check_group, check_topic

log = logging.getLogger("rmqtool.client")

CLUSTERING = "CLUSTERING"
BROADCASTING = "BROADCASTING"
CONSUME_FROM_LAST_OFFSET = "CONSUME_FROM_LAST_OFFSET"
CONSUME_FROM_FIRST_OFFSET = "CONSUME_FROM_FIRST_OFFSET"
CONSUME_FROM_TIMESTAMP = "CONSUME_FROM_TIMESTAMP"
PULL_TIME_DELAY_WHEN_EXCEPTION = 1.0  # s (4.9.8)
PULL_TIME_DELAY_WHEN_FLOW_CONTROL = 0.05
RECONSUME_LATER_LOCAL_DELAY = 5.0  # s: send-back failed too, consume again locally
SUSPEND_CURRENT_QUEUE_TIME = 1.0  # s, orderly SUSPEND_CURRENT_QUEUE_A_MOMENT
LOCK_INTERVAL = 20.0  # s, rocketmq.client.rebalance.lockInterval
INNER_PRODUCER_GROUP = "CLIENT_INNER_PRODUCER"


HELP_AFTER_S = 0.01  # listener calls still waiting this long after a pull get more consume threads


class _ConsumeRound:
    """The listener calls of one pull, shared by the consume jobs that take them, and their results."""

    __slots__ = ("work", "outbox", "active")

    def __init__(self, work: deque[list[MessageExt]]) -> None:
        self.work = work
        self.outbox: list[tuple[list[MessageExt], ConsumeStatus | str, int]] = []
        self.active = 0  # jobs running (changed on the loop thread only)

    def take(self) -> list[tuple[list[MessageExt], ConsumeStatus | str, int]]:
        """The results so far; jobs append concurrently, and only what was copied is removed."""
        got = self.outbox[:]
        del self.outbox[: len(got)]
        return got


class StopConsuming(Exception):
    """Raised by a listener to leave its messages unconsumed and uncommitted (no retry is sent)."""


@dataclass
class ConsumeContext:
    message_queue: MessageQueue
    delay_level_when_next_consume: int = 0  # concurrently: 0 lets the broker pick 3 + reconsumeTimes
    orderly: bool = False


Listener = Callable[[list[MessageExt], ConsumeContext], ConsumeStatus | None]


def _retry_topic(group: str) -> str:
    return RETRY_GROUP_TOPIC_PREFIX + group


class ConsumerImpl:
    """The consumer's state on the client loop (push and pull consumers)."""

    def __init__(self, group: str, instance: ClientInstance, *, push: bool = True,
                 message_model: str = CLUSTERING, consume_from_where: str = CONSUME_FROM_LAST_OFFSET,
                 consume_timestamp: int | None = None,
                 allocate_strategy: AllocateMessageQueueStrategy | None = None, namespace: str | None = None,
                 orderly: bool = False, consume_thread_nums: int = 20, pull_batch_size: int = 32,
                 consume_message_batch_max_size: int = 1, max_reconsume_times: int = -1,
                 pull_threshold_for_queue: int = 1000, consume_concurrently_max_span: int = 2000,
                 long_polling: bool = True, suspend_ms: int = 15000,
                 post_subscription_when_pull: bool = False, offset_store_dir: Path | None = None,
                 start_from: str | int | None = None) -> None:
        self.group = group
        self.instance = instance
        self.push = push
        self.message_model = message_model
        self.consume_from_where = consume_from_where
        self.consume_timestamp = consume_timestamp
        self.allocate_strategy = allocate_strategy or AllocateMessageQueueAveragely()
        self.namespace = namespace
        self.orderly = orderly
        self.consume_thread_nums = consume_thread_nums
        self.pull_batch_size = pull_batch_size
        self.consume_batch = consume_message_batch_max_size
        self.max_reconsume_times = max_reconsume_times
        self.pull_threshold_for_queue = pull_threshold_for_queue
        self.max_span = consume_concurrently_max_span
        self.long_polling = long_polling
        self.suspend_ms = suspend_ms
        self.post_subscription_when_pull = post_subscription_when_pull
        self.start_from = start_from
        self._start_from_applied: set[MessageQueue] = set()
        self.subscriptions: dict[str, SubscriptionData] = {}
        self.topic_subscribe_info: dict[str, list[MessageQueue]] = {}
        self.process_queues: dict[MessageQueue, ProcessQueue] = {}
        self._pull_tasks: dict[MessageQueue, asyncio.Task] = {}
        self._bg: set[asyncio.Task] = set()
        self.listener: Listener | None = None
        self.executor: concurrent.futures.ThreadPoolExecutor | None = None
        self.running = False
        self._rebalance_lock: asyncio.Lock | None = None
        self._rebalance_event: asyncio.Event | None = None
        self.consumed = 0
        self.sent_back = 0
        self.rebalance_count = 0  # finished rebalance rounds (the CLI waits for the first)
        if message_model == BROADCASTING:
            base = offset_store_dir or default_local_offset_dir()
            self.offset_store: OffsetStore = LocalFileOffsetStore(base / instance.client_id / group / "offsets.json")
        else:
            self.offset_store = RemoteBrokerOffsetStore(instance, group)

    @property
    def effective_max_reconsume_times(self) -> int:
        if self.max_reconsume_times >= 0:
            return self.max_reconsume_times
        return 2**31 - 1 if self.orderly else 16

    # ---- subscriptions and routes ------------------------------------------------------------------
    def subscribe(self, topic: str, expression: str | None = "*", expression_type: str = TAG) -> None:
        topic = ns.wrap(self.namespace, topic)
        self.subscriptions[topic] = build(topic, expression, expression_type)

    def topics_in_use(self) -> set[str]:
        return set(self.subscriptions)

    def on_route(self, topic: str, route: TopicRouteData) -> None:
        if topic in self.subscriptions:
            self.topic_subscribe_info[topic] = subscribe_queues(route, topic)

    def consumer_data(self) -> ConsumerData:
        return ConsumerData(self.group, "CONSUME_PASSIVELY" if self.push else "CONSUME_ACTIVELY",
                            self.message_model, self.consume_from_where, list(self.subscriptions.values()))

    async def start(self) -> None:
        """`DefaultMQPushConsumerImpl#start`: routes, SQL92 check, heartbeat, first rebalance."""
        self._rebalance_lock = asyncio.Lock()
        self._rebalance_event = asyncio.Event()
        self.started_ms = int(time.time() * 1000)  # PROP_CONSUMER_START_TIMESTAMP of the running info
        if self.push and self.message_model == CLUSTERING:
            retry = _retry_topic(self.group)
            self.subscriptions.setdefault(retry, build(retry, "*"))
        errors = []
        for topic in list(self.subscriptions):
            try:
                route = await self.instance.update_route(topic)
                if route is None and not topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
                    log.warning("no route for topic %s yet", topic)
            except ClientError:
                raise  # no name server at all
            except RemotingError as e:
                errors.append(e)
        for sub in self.subscriptions.values():
            if sub.expressionType != TAG:
                await self.check_client_config(sub)
        self.running = True
        await self.instance.send_heartbeat_to_all_brokers()
        if self.push:
            self._spawn(self._rebalance_service())
            self.rebalance_soon()
            if self.orderly and self.message_model == CLUSTERING:
                self._spawn(self._lock_service())

    def _spawn(self, coro: Any) -> asyncio.Task:
        t = asyncio.create_task(coro)
        self._bg.add(t)
        t.add_done_callback(self._bg.discard)
        return t

    async def check_client_config(self, sub: SubscriptionData) -> None:
        """CHECK_CLIENT_CONFIG for SQL92 subscriptions: any refusal aborts start (Java throws)."""
        body = fastjson.dumpb(CheckClientRequestBody(self.instance.client_id, self.group, sub).to_json_obj())
        route = self.instance.routes.get(sub.topic)
        for bd in route.brokerDatas if route else []:
            addr = bd.master_addr()
            if addr is None:
                continue
            resp = await self.instance.invoke(addr, RemotingCommand.request(RequestCode.CHECK_CLIENT_CONFIG,
                                                                            body=body))
            if resp.code != ResponseCode.SUCCESS:
                raise BrokerError(resp.code, f"the broker does not accept the {sub.expressionType} expression "
                                  f"{sub.subString!r}: {resp.remark}", addr)

    # ---- rebalance ---------------------------------------------------------------------------------
    def rebalance_soon(self) -> None:
        if self._rebalance_event is not None:
            self._rebalance_event.set()

    async def _rebalance_service(self) -> None:
        assert self._rebalance_event is not None
        while self.running:
            await self._rebalance_event.wait()
            self._rebalance_event.clear()
            with contextlib.suppress(Exception):
                await self.do_rebalance()

    async def do_rebalance(self) -> None:
        if not self.running or not self.push or self._rebalance_lock is None:
            return
        async with self._rebalance_lock:
            for topic in list(self.subscriptions):
                try:
                    await self.rebalance_by_topic(topic)
                except RemotingError as e:
                    log.debug("rebalance of %s failed: %s", topic, e)
            self.rebalance_count += 1

    async def find_consumer_id_list(self, topic: str) -> list[str] | None:
        route = self.instance.routes.get(topic)
        if route is None:
            return None
        for bd in route.brokerDatas:
            addr = bd.master_addr() or next(iter(bd.brokerAddrs.values()), None)
            if addr is None:
                continue
            try:
                resp = await self.instance.invoke(addr, RemotingCommand.request(
                    RequestCode.GET_CONSUMER_LIST_BY_GROUP, GetConsumerListByGroupRequestHeader(self.group).to_ext()))
            except RemotingError:
                continue
            if resp.code == ResponseCode.SUCCESS and resp.body:
                return ConsumerListBody.decode(resp.body).consumerIdList
            return None
        return None

    async def rebalance_by_topic(self, topic: str) -> None:
        mq_all = self.topic_subscribe_info.get(topic)
        if mq_all is None:
            await self.instance.update_route(topic)
            mq_all = self.topic_subscribe_info.get(topic)
            if mq_all is None:
                return
        if self.message_model == BROADCASTING:
            allocated = list(mq_all)
        else:
            cid_all = await self.find_consumer_id_list(topic)
            if not cid_all:
                return
            allocated = self.allocate_strategy.allocate(self.group, self.instance.client_id, sorted(mq_all),
                                                        sorted(cid_all))
        await self.update_process_queue_table(topic, set(allocated))

    async def update_process_queue_table(self, topic: str, allocated: set[MessageQueue]) -> None:
        for mq, pq in list(self.process_queues.items()):
            if mq.topic == topic and mq not in allocated:
                await self.remove_process_queue(mq, pq)
        new = [mq for mq in sorted(allocated) if mq not in self.process_queues]
        if self.orderly and self.message_model == CLUSTERING and new:
            locked = await self.lock(new)
            new = [mq for mq in new if mq in locked]
        for mq in new:
            self.offset_store.remove(mq)  # removeDirtyOffset
            offset = await self.compute_pull_from_where(mq)
            if offset < 0:
                continue
            pq = ProcessQueue()
            if self.orderly and self.message_model == CLUSTERING:
                pq.locked, pq.last_lock_timestamp = True, time.monotonic()
            self.process_queues[mq] = pq
            self.offset_store.update(mq, offset, False)
            self._pull_tasks[mq] = self._spawn(self._pull_loop(mq, pq, offset))
            if self.orderly:
                pq.wakeup = asyncio.Event()  # type: ignore[attr-defined]
                self._spawn(self._orderly_loop(mq, pq))

    async def remove_process_queue(self, mq: MessageQueue, pq: ProcessQueue) -> None:
        pq.dropped = True
        task = self._pull_tasks.pop(mq, None)
        if task is not None:
            task.cancel()
        self.process_queues.pop(mq, None)
        await self.offset_store.persist(mq)
        self.offset_store.remove(mq)
        if self.orderly and self.message_model == CLUSTERING:
            await self.unlock([mq], oneway=True)

    async def compute_pull_from_where(self, mq: MessageQueue) -> int:
        """`RebalancePushImpl#computePullFromWhere`, plus `start_from` (consume --from) on first assignment."""
        is_retry = mq.topic.startswith(RETRY_GROUP_TOPIC_PREFIX)
        if self.start_from is not None and not is_retry and mq not in self._start_from_applied:
            self._start_from_applied.add(mq)
            try:
                if self.start_from == "first":
                    return await query_offset(self.instance, RequestCode.GET_MIN_OFFSET, mq)
                if self.start_from == "last":
                    return await query_offset(self.instance, RequestCode.GET_MAX_OFFSET, mq)
                if isinstance(self.start_from, int):
                    return await query_offset(self.instance, RequestCode.SEARCH_OFFSET_BY_TIMESTAMP, mq,
                                              {"timestamp": self.start_from})
            except RemotingError:
                return -1
        last = await self.offset_store.read(mq)
        if last >= 0:
            return last
        if last == -2:
            return -1
        try:
            if self.consume_from_where == CONSUME_FROM_FIRST_OFFSET:
                return 0
            if self.consume_from_where == CONSUME_FROM_TIMESTAMP and not is_retry:
                ts = self.consume_timestamp or int(time.time() * 1000) - 30 * 60 * 1000
                return await query_offset(self.instance, RequestCode.SEARCH_OFFSET_BY_TIMESTAMP, mq,
                                          {"timestamp": ts})
            if is_retry and self.consume_from_where == CONSUME_FROM_LAST_OFFSET:
                return 0
            return await query_offset(self.instance, RequestCode.GET_MAX_OFFSET, mq)
        except RemotingError:
            return -1

    # ---- orderly locks ---------------------------------------------------------------------------
    async def lock(self, mqs: list[MessageQueue]) -> set[MessageQueue]:
        out: set[MessageQueue] = set()
        by_broker: dict[str, list[MessageQueue]] = {}
        for mq in mqs:
            by_broker.setdefault(mq.broker_name, []).append(mq)
        for broker, items in by_broker.items():
            addr = self.instance.master_addr(broker)
            if addr is None:
                continue
            body = self._lock_body(items)
            try:
                resp = await self.instance.invoke(addr, RemotingCommand.request(RequestCode.LOCK_BATCH_MQ,
                                                                                body=body))
            except RemotingError:
                continue
            if resp.code == ResponseCode.SUCCESS and resp.body:
                for e in LockBatchResponseBody.decode(resp.body).lockOKMQSet:
                    out.add(MessageQueue(e.topic, e.brokerName, e.queueId))
        return out

    def _lock_body(self, mqs: list[MessageQueue]) -> bytes:
        return fastjson.dumpb(LockBatchRequestBody(
            self.group, self.instance.client_id,
            [MessageQueueBody(m.topic, m.broker_name, m.queue_id) for m in mqs]).to_json_obj())

    async def unlock(self, mqs: list[MessageQueue], oneway: bool = False) -> None:
        by_broker: dict[str, list[MessageQueue]] = {}
        for mq in mqs:
            by_broker.setdefault(mq.broker_name, []).append(mq)
        for broker, items in by_broker.items():
            addr = self.instance.master_addr(broker)
            if addr is None:
                continue
            req = RemotingCommand.request(RequestCode.UNLOCK_BATCH_MQ, body=self._lock_body(items), oneway=oneway)
            with contextlib.suppress(RemotingError):
                if oneway:
                    await self.instance.invoke_oneway(addr, req)
                else:
                    await self.instance.invoke(addr, req)

    async def _lock_service(self) -> None:
        """Re-lock every owned queue every 20 s; a queue whose lock was lost stops being consumed."""
        while self.running:
            await asyncio.sleep(LOCK_INTERVAL)
            mqs = list(self.process_queues)
            if not mqs:
                continue
            locked = await self.lock(mqs)
            now = time.monotonic()
            for mq in mqs:
                pq = self.process_queues.get(mq)
                if pq is not None:
                    pq.locked = mq in locked
                    if pq.locked:
                        pq.last_lock_timestamp = now

    # ---- pulling ---------------------------------------------------------------------------------
    async def _pull_loop(self, mq: MessageQueue, pq: ProcessQueue, offset: int) -> None:
        next_offset = offset
        clustering = self.message_model == CLUSTERING
        while self.running and not pq.dropped:
            if pq.msg_count > self.pull_threshold_for_queue or (not self.orderly and pq.max_span() > self.max_span):
                await asyncio.sleep(PULL_TIME_DELAY_WHEN_FLOW_CONTROL)
                continue
            if self.orderly and clustering and (not pq.locked or pq.lock_expired()):
                await asyncio.sleep(1.0)
                continue
            sub = self.subscriptions.get(mq.topic)
            if sub is None:
                return
            commit = self.offset_store.read_memory(mq) if clustering else -1
            sys_flag = build_sys_flag(commit > 0, self.long_polling, self.post_subscription_when_pull)
            try:
                result = await pull_kernel(self.instance, self.group, mq, sub, next_offset, self.pull_batch_size,
                                           sys_flag, max(commit, 0), self.suspend_ms,
                                           self.suspend_ms / 1000 + 15 if self.long_polling else 10)
            except asyncio.CancelledError:
                raise
            except BrokerError as e:
                await asyncio.sleep(PULL_TIME_DELAY_WHEN_FLOW_CONTROL if e.code == ResponseCode.FLOW_CONTROL
                                    else PULL_TIME_DELAY_WHEN_EXCEPTION)
                continue
            except (RemotingError, OSError):
                await asyncio.sleep(PULL_TIME_DELAY_WHEN_EXCEPTION)
                continue
            if pq.dropped:
                return
            next_offset = result.next_begin_offset
            if result.status == PullStatus.OFFSET_ILLEGAL:
                log.warning("offset of %s illegal, moving to %d", mq, next_offset)
                pq.dropped = True
                self.offset_store.update(mq, next_offset, False)
                await self.offset_store.persist(mq)
                self.process_queues.pop(mq, None)
                self._pull_tasks.pop(mq, None)
                return
            msgs = result.messages if result.status == PullStatus.FOUND else []
            pq.caught_up = next_offset >= result.max_offset
            if msgs:
                self._reset_retry_topic(msgs)
                pq.put(msgs)
                self._dispatch(mq, pq, msgs)
            else:
                if pq.msg_count == 0 and clustering:
                    self.offset_store.update(mq, next_offset, True)  # correctTagsOffset
                if not self.long_polling:
                    await asyncio.sleep(0.2)

    def _reset_retry_topic(self, msgs: list[MessageExt]) -> None:
        group_topic = _retry_topic(self.group)
        for m in msgs:
            rt = m.properties.get(P.RETRY_TOPIC)
            if rt is not None and m.topic == group_topic:
                m.topic = rt
            if self.namespace:
                m.topic = ns.unwrap(self.namespace, m.topic)

    # ---- consuming -------------------------------------------------------------------------------
    def _dispatch(self, mq: MessageQueue, pq: ProcessQueue, msgs: list[MessageExt]) -> None:
        if self.orderly:
            pq.wakeup.set()  # type: ignore[attr-defined]
            return
        work = deque(msgs[i : i + self.consume_batch] for i in range(0, len(msgs), self.consume_batch))
        self._start_drainers(mq, pq, work)

    def _start_drainers(self, mq: MessageQueue, pq: ProcessQueue, work: deque[list[MessageExt]]) -> None:
        """Consume `work` (a pull's listener calls) on the consume threads.

        One executor job takes the calls one after the other: in Python a thread hop per call
        costs more than a fast listener's work (GIL). Results go to an outbox that the loop
        empties when the job ends and every HELP_AFTER_S while it runs, so what is consumed is
        acknowledged (and its offset can be committed) even while a later call blocks. Calls
        still waiting after HELP_AFTER_S mean a slow or blocked listener: more jobs join, taking
        calls from the same queue, up to `consume_thread_nums`, so one slow message holds up only
        its own thread, as in ConsumeMessageConcurrentlyService.
        """
        rnd = _ConsumeRound(work)
        rnd.active = 1
        self._spawn(self._consume_concurrently(mq, pq, rnd))
        loop = asyncio.get_running_loop()

        def tick() -> None:
            if pq.dropped or not self.running:
                return
            if rnd.outbox:
                self._spawn(self._process_results(mq, pq, rnd.take()))
            if rnd.work:
                for _ in range(min(len(rnd.work), self.consume_thread_nums - rnd.active)):
                    rnd.active += 1
                    self._spawn(self._consume_concurrently(mq, pq, rnd))
            if rnd.active > 0:
                loop.call_later(HELP_AFTER_S, tick)

        loop.call_later(HELP_AFTER_S, tick)

    def _call_listener(self, msgs: list[MessageExt], ctx: ConsumeContext) -> ConsumeStatus | str:
        assert self.listener is not None
        try:
            status = self.listener(msgs, ctx)
        except StopConsuming:
            return "STOP"
        except Exception as e:  # Java: an exception from the listener means RECONSUME_LATER
            log.warning("listener failed on %s: %s", [m.msg_id for m in msgs], e)
            return ConsumeStatus.RECONSUME_LATER
        if status is None:
            return ConsumeStatus.CONSUME_SUCCESS
        return ConsumeStatus(status)

    def _drain(self, rnd: _ConsumeRound, ctx: ConsumeContext) -> None:
        """Listener calls taken from the round's work until it is empty (consume thread)."""
        work, outbox = rnd.work, rnd.outbox
        while True:
            try:
                msgs = work.popleft()
            except IndexError:
                return
            ctx.delay_level_when_next_consume = 0
            status = self._call_listener(msgs, ctx)
            outbox.append((msgs, status, ctx.delay_level_when_next_consume))
            if status == "STOP":
                work.clear()  # the listener wants no more: the rest stays unconsumed (not acknowledged)
                return

    async def _consume_concurrently(self, mq: MessageQueue, pq: ProcessQueue, rnd: _ConsumeRound) -> None:
        """`ConsumeRequest.run` for the listener calls this job takes, then their results."""
        if pq.dropped:
            rnd.active -= 1
            return
        loop = asyncio.get_running_loop()
        try:
            await loop.run_in_executor(self.executor, self._drain, rnd, ConsumeContext(mq))
        finally:
            rnd.active -= 1
        await self._process_results(mq, pq, rnd.take())

    async def _process_results(self, mq: MessageQueue, pq: ProcessQueue,
                               results: list[tuple[list[MessageExt], ConsumeStatus | str, int]]) -> None:
        """`processConsumeResult`: acknowledge, send failures back, move the committable offset."""
        if pq.dropped or not results:
            return
        loop = asyncio.get_running_loop()
        done: list[MessageExt] = []
        retry_later: list[list[MessageExt]] = []
        for msgs, status, delay_level in results:
            if status == "STOP":
                break
            if isinstance(status, ConsumeStatus) and status.ok:
                done += msgs
                self.consumed += len(msgs)
            elif self.message_model == BROADCASTING:
                done += msgs  # broadcasting: failures are only logged
            else:
                failed = []
                for m in msgs:
                    if await self.send_message_back(m, delay_level, mq.broker_name):
                        done.append(m)
                        self.sent_back += 1
                    else:
                        m.reconsume_times += 1
                        failed.append(m)
                if failed:
                    retry_later.append(failed)
        for failed in retry_later:  # send-back failed too: consume again here after 5 s
            loop.call_later(RECONSUME_LATER_LOCAL_DELAY,
                            lambda f=failed: self._start_drainers(mq, pq, deque([f])))
        offset = pq.remove(done)
        if offset >= 0 and not pq.dropped:
            self.offset_store.update(mq, offset, True)

    async def _orderly_loop(self, mq: MessageQueue, pq: ProcessQueue) -> None:
        """`ConsumeMessageOrderlyService`: one batch at a time per queue, only while the lock is held."""
        loop = asyncio.get_running_loop()
        clustering = self.message_model == CLUSTERING
        wakeup: asyncio.Event = pq.wakeup  # type: ignore[attr-defined]
        while self.running and not pq.dropped:
            if clustering and (not pq.locked or pq.lock_expired()):
                await asyncio.sleep(0.1)
                continue
            msgs = pq.take(self.consume_batch)
            if not msgs:
                wakeup.clear()
                await wakeup.wait()
                continue
            ctx = ConsumeContext(mq, orderly=True)
            status = await loop.run_in_executor(self.executor, self._call_listener, msgs, ctx)
            if pq.dropped:
                return
            if status == "STOP":
                pq.make_again(msgs)
                return
            ok = isinstance(status, ConsumeStatus) and status.ok
            if not ok:
                if await self._check_reconsume_times(msgs):
                    pq.make_again(msgs)
                    await asyncio.sleep(SUSPEND_CURRENT_QUEUE_TIME)
                    continue
                self.sent_back += len(msgs)
            else:
                self.consumed += len(msgs)
            offset = pq.commit()
            if offset >= 0:
                self.offset_store.update(mq, offset, False)

    async def _check_reconsume_times(self, msgs: list[MessageExt]) -> bool:
        """True = suspend and consume again; False = every message went to the retry/DLQ path."""
        suspend = False
        for m in msgs:
            if m.reconsume_times >= self.effective_max_reconsume_times:
                m.properties[P.RECONSUME_TIME] = str(m.reconsume_times)
                if not await self._send_to_retry_topic(m, delay=False):
                    suspend = True
                    m.reconsume_times += 1
            else:
                suspend = True
                m.reconsume_times += 1
        return suspend

    async def send_message_back(self, m: MessageExt, delay_level: int, broker_name: str) -> bool:
        """CONSUMER_SEND_MSG_BACK; on failure the fallback resend to %RETRY% (formats.md §9)."""
        addr = self.instance.master_addr(broker_name) or str(m.store_host)
        header = ConsumerSendMsgBackRequestHeader(
            offset=m.commit_log_offset, group=self.group, delayLevel=delay_level, originMsgId=m.msg_id,
            originTopic=ns.wrap(self.namespace, m.topic), unitMode=False,
            maxReconsumeTimes=self.effective_max_reconsume_times).to_ext()
        header["bname"] = broker_name  # 4.9.x+ clients add the target broker name
        try:
            resp = await self.instance.invoke(addr, RemotingCommand.request(RequestCode.CONSUMER_SEND_MSG_BACK,
                                                                            header), 5.0)
            if resp.code == ResponseCode.SUCCESS:
                return True
            log.debug("send back refused (%s %s), resending to the retry topic", resp.code, resp.remark)
        except RemotingError as e:
            log.debug("send back failed (%s), resending to the retry topic", e)
        return await self._send_to_retry_topic(m, delay=True)

    async def _send_to_retry_topic(self, m: MessageExt, delay: bool) -> bool:
        from rmqtool.client.producer import ProducerImpl

        producer = self.instance.producers.get(INNER_PRODUCER_GROUP)
        if producer is None:
            producer = ProducerImpl(INNER_PRODUCER_GROUP, self.instance, retry_times_when_send_failed=2)
            self.instance.producers[INNER_PRODUCER_GROUP] = producer
        retry = Message(_retry_topic(self.group), m.body, properties=dict(m.properties), flag=m.flag)
        props = retry.properties
        props.pop(P.MIN_OFFSET, None)
        props.pop(P.MAX_OFFSET, None)
        props.pop(P.TRAN_MSG, None)
        props[P.ORIGIN_MESSAGE_ID] = m.properties.get(P.ORIGIN_MESSAGE_ID) or m.msg_id
        props[P.RETRY_TOPIC] = ns.wrap(self.namespace, m.topic)
        if delay:
            props[P.RECONSUME_TIME] = str(m.reconsume_times + 1)
            props[P.DELAY] = str(3 + m.reconsume_times)
        props[P.MAX_RECONSUME_TIMES] = str(self.effective_max_reconsume_times)
        try:
            producer.prepare(retry)
            await producer.send(retry, mode="sync")
            return True
        except Exception as e:
            log.warning("resend of %s to %s failed: %s", m.msg_id, retry.topic, e)
            return False

    # ---- offsets and shutdown --------------------------------------------------------------------
    async def persist_consumer_offset(self) -> None:
        await self.offset_store.persist_all(set(self.process_queues), oneway=True)

    async def shutdown(self) -> None:
        self.running = False
        for t in list(self._bg):
            t.cancel()
        for t in list(self._bg):
            with contextlib.suppress(BaseException):
                await t
        if self.push:
            for mq in list(self.process_queues):
                await self.offset_store.persist(mq, oneway=False)
            if self.orderly and self.message_model == CLUSTERING and self.process_queues:
                await self.unlock(list(self.process_queues))
        for pq in self.process_queues.values():
            pq.dropped = True
        self.process_queues.clear()

    def caught_up(self) -> bool:
        """Every assigned queue pulled to its max offset and every pulled message consumed."""
        pqs = [(mq, pq) for mq, pq in self.process_queues.items()]
        return bool(pqs) and all(pq.caught_up and pq.msg_count == 0 for _, pq in pqs)


class PushConsumer:
    """A push consumer: long-polling pull loops feed `listener` on `consume_thread_nums` threads.

    The listener gets a list of `MessageExt` (`consume_message_batch_max_size`, default 1) and a
    `ConsumeContext`; returning None or CONSUME_SUCCESS commits them, RECONSUME_LATER (or raising)
    sends them back for a retry, to the DLQ after `max_reconsume_times` (-1: 16).
    """

    def __init__(self, group: str, namesrv: str | None = None, *, message_model: str = CLUSTERING,
                 consume_from_where: str = CONSUME_FROM_LAST_OFFSET, consume_timestamp: int | None = None,
                 allocate_strategy: AllocateMessageQueueStrategy | None = None, namespace: str | None = None,
                 consume_thread_nums: int = 20, pull_batch_size: int = 32,
                 consume_message_batch_max_size: int = 1, max_reconsume_times: int = -1,
                 pull_threshold_for_queue: int = 1000, long_polling: bool = True, suspend_ms: int = 15000,
                 post_subscription_when_pull: bool = False, offset_store_dir: Path | None = None,
                 start_from: str | int | None = None, instance: ClientInstance | None = None,
                 config: ClientConfig | None = None) -> None:
        check_group(group)
        # clustering consumers get a process-unique instance name (changeInstanceNameToPID)
        name = "DEFAULT" if message_model == BROADCASTING else f"{os.getpid()}#{time.monotonic_ns()}"
        self.instance, self._own = resolve_instance(namesrv, instance, config, name)
        self.impl = ConsumerImpl(
            ns.wrap(namespace, group), self.instance, push=True, message_model=message_model,
            consume_from_where=consume_from_where, consume_timestamp=consume_timestamp,
            allocate_strategy=allocate_strategy, namespace=namespace, consume_thread_nums=consume_thread_nums,
            pull_batch_size=pull_batch_size, consume_message_batch_max_size=consume_message_batch_max_size,
            max_reconsume_times=max_reconsume_times, pull_threshold_for_queue=pull_threshold_for_queue,
            long_polling=long_polling, suspend_ms=suspend_ms,
            post_subscription_when_pull=post_subscription_when_pull, offset_store_dir=offset_store_dir,
            start_from=start_from)
        self._started = False

    def subscribe(self, topic: str, expression: str = "*", *, expression_type: str = TAG) -> PushConsumer:
        """`subscribe(topic, "TagA || TagB")`, or `expression_type="SQL92"` for a property filter."""
        check_topic(topic)
        self.impl.subscribe(topic, expression, expression_type)
        return self

    def subscribe_sql(self, topic: str, sql: str) -> PushConsumer:
        return self.subscribe(topic, sql, expression_type=SQL92)

    def register_listener(self, listener: Listener) -> PushConsumer:
        """A concurrent listener (`MessageListenerConcurrently`)."""
        self.impl.listener, self.impl.orderly = listener, False
        return self

    def register_orderly_listener(self, listener: Listener) -> PushConsumer:
        """An orderly listener: one batch at a time per queue, queues locked on the broker (clustering)."""
        self.impl.listener, self.impl.orderly = listener, True
        return self

    def start(self) -> PushConsumer:
        if self._started:
            return self
        if self.impl.listener is None:
            raise ClientError("register a listener before start()")
        if self.impl.group in self.instance.consumers:
            raise ClientError(f"The consumer group[{self.impl.group}] has been created before")
        self.impl.executor = concurrent.futures.ThreadPoolExecutor(self.impl.consume_thread_nums,
                                                                   thread_name_prefix="rmq-consume")
        self.instance.start()
        self.instance.consumers[self.impl.group] = self.impl
        try:
            self.instance.run(self.impl.start())
        except BaseException:
            self.instance.consumers.pop(self.impl.group, None)
            self.instance.shutdown()
            self.impl.executor.shutdown(wait=False)
            raise
        self._started = True
        return self

    def shutdown(self) -> None:
        """Stop pulling, commit offsets (sync), unregister; the group rebalances at once."""
        if not self._started:
            return
        self._started = False
        with contextlib.suppress(Exception):
            self.instance.run(self.impl.shutdown(), timeout=15)
        self.instance.consumers.pop(self.impl.group, None)
        with contextlib.suppress(Exception):
            self.instance.run(self.instance.unregister_client(None, self.impl.group), timeout=5)
        if self.impl.executor is not None:
            self.impl.executor.shutdown(wait=False, cancel_futures=True)
        self.instance.shutdown()

    def __enter__(self) -> PushConsumer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.shutdown()

    def rebalance_now(self) -> None:
        self.instance.run(self.impl.do_rebalance())

    def assigned_queues(self) -> list[MessageQueue]:
        return sorted(self.impl.process_queues)

    def caught_up(self) -> bool:
        return self.instance.run(_call(self.impl.caught_up))

    @property
    def client_id(self) -> str:
        return self.instance.client_id


async def _call(fn: Callable[[], Any]) -> Any:
    return fn()


class PullConsumer:
    """Pull on demand (`DefaultMQPullConsumer`): you pick queues and offsets, commit when you like."""

    def __init__(self, group: str, namesrv: str | None = None, *, namespace: str | None = None,
                 instance: ClientInstance | None = None, config: ClientConfig | None = None) -> None:
        check_group(group)
        self.instance, self._own = resolve_instance(namesrv, instance, config)
        self.namespace = namespace
        self.impl = ConsumerImpl(ns.wrap(namespace, group), self.instance, push=False, namespace=namespace)
        self._started = False

    def start(self) -> PullConsumer:
        if not self._started:
            self.instance.start()
            self.instance.consumers[self.impl.group] = self.impl
            self.impl.running = True
            self._started = True
        return self

    def shutdown(self) -> None:
        if not self._started:
            return
        self._started = False
        with contextlib.suppress(Exception):
            self.instance.run(self.impl.offset_store.persist_all(set(self.impl.offset_store.table), False), 10)
        self.instance.consumers.pop(self.impl.group, None)
        self.instance.shutdown()

    def __enter__(self) -> PullConsumer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.shutdown()

    def _mq(self, mq: MessageQueue) -> MessageQueue:
        return MessageQueue(ns.wrap(self.namespace, mq.topic), mq.broker_name, mq.queue_id)

    def fetch_subscribe_message_queues(self, topic: str) -> list[MessageQueue]:
        route = self.instance.run(self.instance.update_route(ns.wrap(self.namespace, topic)))
        if route is None:
            raise ClientError(f"Can not find Message Queue for this topic, {topic}")
        return [MessageQueue(topic, q.broker_name, q.queue_id) for q in subscribe_queues(route, topic)]

    def pull(self, mq: MessageQueue, expression: str = "*", offset: int = 0, max_nums: int = 32, *,
             expression_type: str = TAG, block: bool = False, timeout: float = 10.0) -> PullResult:
        """One PULL_MESSAGE; `block=True` lets the broker hold it until a message arrives (`timeout`)."""
        mq = self._mq(mq)
        sub = build(mq.topic, expression, expression_type)
        suspend_ms = int(timeout * 1000)
        flag = build_sys_flag(False, block, True)
        result = self.instance.run(pull_kernel(self.instance, self.impl.group, mq, sub, offset, max_nums, flag, 0,
                                               suspend_ms, timeout + 5 if block else timeout))
        for m in result.messages:
            m.topic = ns.unwrap(self.namespace, m.topic)
        return result

    def pull_block_if_not_found(self, mq: MessageQueue, expression: str = "*", offset: int = 0,
                                max_nums: int = 32, timeout: float = 20.0) -> PullResult:
        return self.pull(mq, expression, offset, max_nums, block=True, timeout=timeout)

    def fetch_consume_offset(self, mq: MessageQueue) -> int:
        """The group's committed offset, -1 if there is none."""
        return self.instance.run(self.impl.offset_store.read(self._mq(mq)))

    def update_consume_offset(self, mq: MessageQueue, offset: int, *, persist: bool = True) -> None:
        mq = self._mq(mq)
        self.impl.offset_store.update(mq, offset, False)
        if persist:
            self.instance.run(self.impl.offset_store.persist(mq))

    def min_offset(self, mq: MessageQueue) -> int:
        return self.instance.run(query_offset(self.instance, RequestCode.GET_MIN_OFFSET, self._mq(mq)))

    def max_offset(self, mq: MessageQueue) -> int:
        return self.instance.run(query_offset(self.instance, RequestCode.GET_MAX_OFFSET, self._mq(mq)))

    def search_offset(self, mq: MessageQueue, timestamp_ms: int) -> int:
        return self.instance.run(query_offset(self.instance, RequestCode.SEARCH_OFFSET_BY_TIMESTAMP, self._mq(mq),
                                              {"timestamp": timestamp_ms}))
