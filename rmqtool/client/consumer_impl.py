"""`ConsumerImpl`: a consumer's state on the client loop (`DefaultMQPushConsumerImpl`).

Subscriptions and routes, start, the pull loop of each owned queue with long polling and flow
control (`DefaultMQPushConsumerImpl#pullMessage`), offsets committed every 5 s and on shutdown;
rebalance (rebalance.py) and the listener calls (consume_service.py) are its bases.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import logging
import time
from pathlib import Path
from typing import Any

from rmqtool.client import namespace as ns
from rmqtool.client.allocate import AllocateMessageQueueAveragely, AllocateMessageQueueStrategy
from rmqtool.client.consume_service import ConsumeMessageService
from rmqtool.client.consumer_types import (
    BROADCASTING,
    CLUSTERING,
    CONSUME_FROM_LAST_OFFSET,
    Listener,
    retry_topic,
)
from rmqtool.client.exceptions import BrokerError, ClientError
from rmqtool.client.instance import ClientInstance
from rmqtool.client.message import MessageQueue, PullStatus
from rmqtool.client.offsets import (
    LocalFileOffsetStore,
    OffsetStore,
    RemoteBrokerOffsetStore,
    default_local_offset_dir,
)
from rmqtool.client.process_queue import ProcessQueue
from rmqtool.client.pull import build_sys_flag, pull_kernel
from rmqtool.client.rebalance import RebalanceImpl
from rmqtool.client.route import TopicRouteData, subscribe_queues
from rmqtool.client.subscription import TAG, SubscriptionData, build
from rmqtool.errors import RemotingError
from rmqtool.layouts import properties as P
from rmqtool.layouts.constants import RETRY_GROUP_TOPIC_PREFIX
from rmqtool.layouts.message import MessageExt
from rmqtool.remoting import fastjson
from rmqtool.remoting.bodies import CheckClientRequestBody, ConsumerData
from rmqtool.remoting.codes import RequestCode, ResponseCode
from rmqtool.remoting.command import RemotingCommand

log = logging.getLogger("rmqtool.client")

PULL_TIME_DELAY_WHEN_EXCEPTION = 1.0  # s (4.9.8)
PULL_TIME_DELAY_WHEN_FLOW_CONTROL = 0.05


class ConsumerImpl(RebalanceImpl, ConsumeMessageService):
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
            retry = retry_topic(self.group)
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
                self._resetretry_topic(msgs)
                pq.put(msgs)
                self._dispatch(mq, pq, msgs)
            else:
                if pq.msg_count == 0 and clustering:
                    self.offset_store.update(mq, next_offset, True)  # correctTagsOffset
                if not self.long_polling:
                    await asyncio.sleep(0.2)

    def _resetretry_topic(self, msgs: list[MessageExt]) -> None:
        group_topic = retry_topic(self.group)
        for m in msgs:
            rt = m.properties.get(P.RETRY_TOPIC)
            if rt is not None and m.topic == group_topic:
                m.topic = rt
            if self.namespace:
                m.topic = ns.unwrap(self.namespace, m.topic)

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
