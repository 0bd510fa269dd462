"""PopService: the POP operations of one broker, as coroutines (see `rmqtool.broker.pop`).

The checks, their order, response codes and remarks are Java 5.3.3's PopMessageProcessor,
AckMessageProcessor, ChangeInvisibleTimeProcessor and NotificationProcessor; failures raise
`PopError(code, remark)`, which the remoting processor turns into the answer Java gives.
Long polling (`PopLongPollingService`): a pop or notification that found nothing waits until a
message arrives on the topic or its retry topic, or until bornTime + pollTime.
"""

from __future__ import annotations

import asyncio
import logging
import random
import threading
from pathlib import Path
from typing import Any

from rmqtool.broker.confvalues import conf_flag, conf_int
from rmqtool.broker.sql92 import SelectorError
from rmqtool.layouts.pop import (
    POP_ORDER_REVIVE_QUEUE,
    pop_retry_topic,
    pop_retry_topic_v1,
    revive_topic,
)
from rmqtool.remoting.bodies import SubscriptionData
from rmqtool.remoting.codes import ResponseCode
from rmqtool.store.orderinfo import ConsumerOrderInfoManager

from .acks import PopAckMixin
from .buffer import SCAN_INTERVAL_S, PopBufferMergeService
from .popper import INIT_MODE_MIN, PopContext, Popper, PopRequest, QueueLockManager
from .results import (  # noqa: F401 - re-exported: the API's names as they always were
    FAQ_APPLY_TOPIC,
    MAX_POLLING,
    MAX_POP_NUMS,
    NOT_SET,
    ChangeInvisibleResult,
    PopError,
    PopResult,
    _java_error,
)


class PopService(PopAckMixin):
    """POP_MESSAGE, ACK_MESSAGE, BATCH_ACK_MESSAGE, CHANGE_MESSAGE_INVISIBLETIME and NOTIFICATION
    of one BrokerController, with the revive service and the order state underneath."""

    def __init__(self, controller: Any) -> None:
        self.controller = controller
        self.local = controller.local
        self.store = controller.local.store
        cfg = self.local.config
        extra: dict[str, str] = dict(getattr(cfg, "extra", {}) or {})
        self.broker_name: str = cfg.broker_name
        self.broker_ip = getattr(cfg, "broker_ip1", "127.0.0.1")
        self.revive_topic = revive_topic(cfg.broker_cluster_name)
        self.revive_queue_num = max(1, conf_int(extra, "reviveQueueNum", 8))
        self.retry_v2 = conf_flag(extra, "enableRetryTopicV2", False)
        self.retry_v1_too = conf_flag(extra, "retrieveMessageFromPopRetryTopicV1", True)
        self.retry_probability = conf_int(extra, "popFromRetryProbability", 20)
        self.revive_interval_ms = conf_int(extra, "reviveInterval", 1000)
        self.timer_wheel_enable = bool(getattr(cfg, "timer_wheel_enable", True))
        self.buffer = PopBufferMergeService(self, extra)
        self.popper = Popper(self)
        self.locks: QueueLockManager = self.popper.locks
        config_dir = Path(cfg.store_path_root_dir) / "config" if not getattr(self.local, "read_only", False) else None
        self.order_info = ConsumerOrderInfoManager(config_dir, self.now)
        self.order_info.load()
        self._ck_counter = 0
        self._counter_lock = threading.Lock()
        self._random = random.Random()
        self._waiters: dict[str, set[asyncio.Future[None]]] = {}
        self._pending_acks: list[tuple[Any, asyncio.Future[None]]] = []
        self._loop: asyncio.AbstractEventLoop | None = None
        from .revive import PopReviveService

        self.revive = [PopReviveService(self, qid) for qid in range(self.revive_queue_num)]

    def now(self) -> int:
        return self.controller.now()

    # -- lifecycle ------------------------------------------------------------------------------
    def start(self) -> list[asyncio.Task]:
        """Listen for arrivals (long polling) and start the revive loop; returns the tasks."""
        self._loop = asyncio.get_running_loop()
        self.store.add_arrival_listener(self._on_arrival, self._waiters)  # the topics pops wait on
        tasks = [asyncio.create_task(self._revive_loop(), name="pop-revive"),
                 asyncio.create_task(self._persist_loop(), name="pop-order-info")]
        if self.buffer.enabled:
            tasks.append(asyncio.create_task(self._buffer_loop(), name="pop-buffer-merge"))
        return tasks

    def stop(self) -> None:
        self.store.remove_arrival_listener(self._on_arrival)
        for s in list(self._waiters.values()):
            for fut in s:
                if not fut.done():
                    fut.set_result(None)
        if self.buffer.enabled:  # held checkpoints and their acks go to the revive topic
            self.buffer.flush()
        self.order_info.persist()

    async def _revive_loop(self) -> None:
        while True:
            await asyncio.sleep(self.revive_interval_ms / 1000)
            if not self.timer_wheel_enable:
                continue
            try:
                await self.controller.run(self.revive_once)
            except asyncio.CancelledError:
                raise
            except Exception:  # noqa: BLE001 - logged; the next round starts again from the revive offset
                logging.getLogger("rmqtool.broker.pop").exception("revive failed")

    async def _buffer_loop(self) -> None:
        while True:
            await asyncio.sleep(SCAN_INTERVAL_S)
            if not self.buffer.pending():
                continue
            try:
                await self.controller.run(self.buffer.scan)
            except asyncio.CancelledError:
                raise
            except Exception:  # noqa: BLE001 - logged; the next scan tries again
                logging.getLogger("rmqtool.broker.pop").exception("pop buffer scan failed")

    def revive_once(self) -> int:
        """One round of every revive queue; returns how many messages went back to retry topics."""
        return sum(r.run_once() for r in self.revive)

    async def _persist_loop(self) -> None:
        while True:
            await asyncio.sleep(5)
            if self.order_info.dirty:
                await self.controller.run(self.order_info.persist)

    # -- long polling -----------------------------------------------------------------------------
    def _on_arrival(self, topic: str, queue_id: int) -> None:
        loop = self._loop
        if loop is None or topic not in self._waiters:
            return
        try:
            loop.call_soon_threadsafe(self.notify, topic)
        except RuntimeError:  # loop closed during shutdown
            pass

    def notify(self, topic: str) -> None:
        """Wake the pops and notifications polling `topic` (or its retry topic); on the loop thread."""
        for fut in self._waiters.get(topic, ()):
            if not fut.done():
                fut.set_result(None)

    async def _wait(self, topics: list[str], timeout_s: float, arrived: Any) -> bool:
        if sum(len(s) for s in self._waiters.values()) >= MAX_POLLING:
            raise PopError(ResponseCode.POLLING_FULL, None)
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        for t in topics:
            self._waiters.setdefault(t, set()).add(fut)
        try:
            if arrived():
                return True
            await asyncio.wait_for(fut, timeout_s)
            return True
        except asyncio.TimeoutError:
            return False
        finally:
            for t in topics:
                s = self._waiters.get(t)
                if s is not None:
                    s.discard(fut)
                    if not s:
                        self._waiters.pop(t, None)

    def retry_topics(self, topic: str, group: str) -> list[str]:
        out = [pop_retry_topic(topic, group, self.retry_v2)]
        if self.retry_v2 and self.retry_v1_too:
            out.append(pop_retry_topic_v1(topic, group))
        return out

    # -- checks ----------------------------------------------------------------------------------
    def _topic(self, topic: str) -> Any:
        tc = self.local.topics.select(topic)
        if tc is None:
            raise PopError(ResponseCode.TOPIC_NOT_EXIST, f"topic[{topic}] not exist, apply first please! {FAQ_APPLY_TOPIC}")
        return tc

    def _group(self, group: str) -> None:
        try:
            cfg = self.local.subscriptions.find(group)
        except Exception:  # noqa: BLE001 - an invalid group name: no such group
            cfg = None
        if cfg is None:
            raise PopError(ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST,
                           f"subscription group [{group}] does not exist, \nSee "
                           "https://rocketmq.apache.org/docs/bestPractice/06FAQ for further details.")
        if not cfg.consume_enable:
            raise PopError(ResponseCode.NO_PERMISSION, f"subscription group no permission, {group}")

    def _next_revive_qid(self) -> int:
        with self._counter_lock:
            n = self._ck_counter
            self._ck_counter += 1
        return abs(n % self.revive_queue_num)

    # -- POP_MESSAGE ------------------------------------------------------------------------------
    async def pop(self, group: str, topic: str, queue_id: int = -1, max_nums: int = 32,
                  invisible_time: int = 60_000, poll_time: int = 0, expression: str | None = "*",
                  expression_type: str | None = "TAG", order: bool = False, init_mode: int = INIT_MODE_MIN,
                  attempt_id: str | None = None, born_time: int = 0, peer: str = "in-process") -> PopResult:
        """Hand out up to `max_nums` messages of `topic` (every queue with -1), invisible for
        `invisible_time` ms, waiting up to `poll_time` ms for some to arrive. Raises PopError."""
        now = self.now()
        born = born_time if born_time > 0 else now
        if now - born - poll_time > 500:
            raise PopError(ResponseCode.POLLING_TIMEOUT, f"the broker[{self.broker_ip}] pop message is timeout too much")
        if max_nums > MAX_POP_NUMS:
            raise PopError(ResponseCode.INVALID_PARAMETER,
                           f"the broker[{self.broker_ip}] pop message's num is greater than 32")
        if not self.timer_wheel_enable:
            raise PopError(ResponseCode.SYSTEM_ERROR, f"the broker[{self.broker_ip}] pop message is forbidden "
                                                      "because timerWheelEnable is false")
        tc = self._topic(topic)
        if not tc.perm & 4:
            raise PopError(ResponseCode.NO_PERMISSION, f"the topic[{topic}] peeking message is forbidden")
        qid = -1 if queue_id < 0 else queue_id
        if qid >= tc.read_queue_nums:
            raise PopError(ResponseCode.INVALID_PARAMETER,
                           f"queueId[{qid}] is illegal, topic:[{topic}] topicConfig.readQueueNums:"
                           f"[{tc.read_queue_nums}] consumer:[{peer}]")
        self._group(group)
        codes, flt = None, None
        if expression:
            try:
                codes, flt = self.controller._message_filter(SubscriptionData.build(topic, expression, expression_type))
            except (SelectorError, PermissionError, ValueError):
                raise PopError(ResponseCode.SUBSCRIPTION_PARSE_FAILED, "parse the consumer's subscription failed") \
                    from None
        req = PopRequest(group, topic, qid, max(0, max_nums), invisible_time, init_mode, order, attempt_id, codes, flt)
        deadline_ms = min(born + poll_time, now + poll_time)
        watch = [topic, *self.retry_topics(topic, group)]
        while True:
            result = await self.controller.run(self._pop_once, req, tc)
            if result.messages:
                if result.rest_num > 0:
                    self.notify(topic)
                return result
            remaining = deadline_ms - self.now()
            if poll_time <= 0 or remaining <= 0:
                result.code = ResponseCode.POLLING_TIMEOUT
                result.remark = "NO_MESSAGE_IN_QUEUE"
                return result
            woke = await self._wait(watch, remaining / 1000, lambda: self._has_new(req, tc))
            if not woke:  # one last look after the hold, as Java's expired request does
                result = await self.controller.run(self._pop_once, req, tc)
                if not result.messages:
                    result.code = ResponseCode.POLLING_TIMEOUT
                    result.remark = "NO_MESSAGE_IN_QUEUE"
                return result

    def _has_new(self, req: PopRequest, tc: Any) -> bool:
        """Anything past the group's offset in the queues polled (closes the arrival race)."""
        store = self.store
        topics = [(req.topic, range(tc.read_queue_nums) if req.queue_id < 0 else [req.queue_id])]
        if not req.order:
            for rt in self.retry_topics(req.topic, req.group):
                rtc = self.local.topics.select(rt)
                if rtc is not None:
                    topics.append((rt, range(rtc.read_queue_nums)))
        for t, qids in topics:
            for q in qids:
                off = self.popper.current_offset(t, req.group, q)
                if store.get_max_offset_in_queue(t, q) > max(off, 0) and not (
                        req.order and self.order_info.check_block(req.attempt_id, t, req.group, q,
                                                                  req.invisible_time)):
                    return True
        return False

    def _pop_once(self, req: PopRequest, tc: Any) -> PopResult:
        """`processRequest` after the checks: retry topic first with popFromRetryProbability %, then
        the topic, then the retry topic again if the pop is not full."""
        random_q = self._random.randrange(100)
        revive_qid = POP_ORDER_REVIVE_QUEUE if req.order else self._next_revive_qid()
        ctx = PopContext(req, self.now(), revive_qid)
        need_retry = random_q < self.retry_probability
        retry_topic = pop_retry_topic(req.topic, req.group, self.retry_v2)
        if self.retry_v2 and self.retry_v1_too and random_q % 2 == 0:
            retry_topic = pop_retry_topic_v1(req.topic, req.group)
        popper = self.popper
        if need_retry and not req.order:
            popper.pop_topic(ctx, retry_topic, True, random_q)
        if req.queue_id < 0:
            popper.pop_topic(ctx, tc.topic_name, False, random_q)
        else:
            popper.pop_queue(ctx, tc.topic_name, False, req.queue_id)
        if not need_retry and len(ctx.messages) < req.max_nums and not req.order:
            popper.pop_topic(ctx, retry_topic, True, random_q)
        return PopResult(ResponseCode.SUCCESS, "FOUND", ctx.pop_time, req.invisible_time, revive_qid, ctx.rest_num,
                         ";".join(ctx.start_offset_info), ";".join(ctx.msg_offset_info),
                         ";".join(ctx.order_count_info) if req.order else None, ctx.messages)

    # -- NOTIFICATION -------------------------------------------------------------------------------
    async def notification(self, group: str, topic: str, queue_id: int = -1, poll_time: int = 0,
                           born_time: int = 0, order: bool = False, attempt_id: str | None = None,
                           peer: str = "in-process") -> tuple[bool, bool]:
        """NOTIFICATION: (hasMsg, pollingFull), waiting up to `poll_time` ms for a message."""
        tc = self._topic(topic)
        if not tc.perm & 4:
            raise PopError(ResponseCode.NO_PERMISSION, f"the topic[{topic}] peeking message is forbidden")
        if queue_id >= tc.read_queue_nums:
            raise PopError(ResponseCode.INVALID_PARAMETER,
                           f"queueId[{queue_id}] is illegal, topic:[{topic}] topicConfig.readQueueNums:"
                           f"[{tc.read_queue_nums}] consumer:[{peer}]")
        self._group(group)
        now = self.now()
        req = PopRequest(group, topic, -1 if queue_id < 0 else queue_id, 1, 0, INIT_MODE_MIN, order, attempt_id)
        if self._has_new(req, tc):
            return True, False
        born = born_time if born_time > 0 else now
        remaining = min(born + poll_time, now + poll_time) - now
        if poll_time <= 0 or remaining <= 0:
            return False, False
        try:
            woke = await self._wait([topic, *self.retry_topics(topic, group)], remaining / 1000,
                                    lambda: self._has_new(req, tc))
        except PopError:
            return False, True
        return (woke and self._has_new(req, tc)), False
