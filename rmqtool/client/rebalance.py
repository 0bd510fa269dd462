"""Rebalance of a push consumer: allocate queues among the group's clients, start and stop their
process queues, compute where to pull from, and hold the broker locks of orderly consumption
(`RebalanceImpl`, `RebalancePushImpl`, protocol.md §7.4-§7.6).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time

from rmqtool.client.allocate import AllocateMessageQueueStrategy
from rmqtool.client.consumer_types import (
    BROADCASTING,
    CLUSTERING,
    CONSUME_FROM_FIRST_OFFSET,
    CONSUME_FROM_LAST_OFFSET,
    CONSUME_FROM_TIMESTAMP,
)
from rmqtool.client.instance import ClientInstance
from rmqtool.client.message import MessageQueue
from rmqtool.client.offsets import OffsetStore
from rmqtool.client.process_queue import ProcessQueue
from rmqtool.client.pull import query_offset
from rmqtool.client.subscription import SubscriptionData
from rmqtool.errors import RemotingError
from rmqtool.layouts.constants import RETRY_GROUP_TOPIC_PREFIX
from rmqtool.remoting import fastjson
from rmqtool.remoting.bodies import ConsumerListBody, LockBatchRequestBody, LockBatchResponseBody
from rmqtool.remoting.bodies import MessageQueue as MessageQueueBody
from rmqtool.remoting.codes import RequestCode, ResponseCode
from rmqtool.remoting.command import RemotingCommand
from rmqtool.remoting.headers import GetConsumerListByGroupRequestHeader

log = logging.getLogger("rmqtool.client")

LOCK_INTERVAL = 20.0  # s, rocketmq.client.rebalance.lockInterval


class RebalanceImpl:
    """`RebalanceImpl` / `RebalancePushImpl`: which queues this client owns, and their broker locks.

    A base of `ConsumerImpl` (consumer_impl.py), which holds the state used here: subscriptions,
    routes, `process_queues`, the offset store, and `_pull_loop` / `_orderly_loop` to start on a
    new queue.
    """

    group: str
    instance: ClientInstance
    push: bool
    running: bool
    orderly: bool
    message_model: str
    consume_from_where: str
    consume_timestamp: int | None
    allocate_strategy: AllocateMessageQueueStrategy
    start_from: str | int | None
    subscriptions: dict[str, SubscriptionData]
    topic_subscribe_info: dict[str, list[MessageQueue]]
    process_queues: dict[MessageQueue, ProcessQueue]
    offset_store: OffsetStore
    rebalance_count: int
    _start_from_applied: set[MessageQueue]
    _pull_tasks: dict[MessageQueue, asyncio.Task]
    _rebalance_lock: asyncio.Lock | None
    _rebalance_event: asyncio.Event | None

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
        for addr, items in self._by_master(mqs):
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

    def _by_master(self, mqs: list[MessageQueue]) -> list[tuple[str, list[MessageQueue]]]:
        """The queues grouped by broker, each group with its master's address (locks live on the
        master; a broker without a known master is left out, as `findBrokerAddressInSubscribe`
        with onlyThisBroker finds none)."""
        by_broker: dict[str, list[MessageQueue]] = {}
        for mq in mqs:
            by_broker.setdefault(mq.broker_name, []).append(mq)
        out = []
        for broker, items in by_broker.items():
            addr = self.instance.master_addr(broker)
            if addr is not None:
                out.append((addr, items))
        return out

    def _lock_body(self, mqs: list[MessageQueue]) -> bytes:
        return fastjson.dumpb(LockBatchRequestBody(
            self.group, self.instance.client_id,
            [MessageQueueBody(m.topic, m.broker_name, m.queue_id) for m in mqs]).to_json_obj())

    async def unlock(self, mqs: list[MessageQueue], oneway: bool = False) -> None:
        for addr, items in self._by_master(mqs):
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
