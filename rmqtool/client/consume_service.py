"""Consuming pulled messages: listener calls on the consume thread pool, concurrently or orderly,
results acknowledged, failures sent back to the broker or to the %RETRY% topic
(`ConsumeMessageConcurrentlyService`, `ConsumeMessageOrderlyService`, protocol.md §7.7, §7.8).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
from collections import deque

from rmqtool.client import namespace as ns
from rmqtool.client.consumer_types import (
    BROADCASTING,
    CLUSTERING,
    INNER_PRODUCER_GROUP,
    ConsumeContext,
    Listener,
    StopConsuming,
    retry_topic,
)
from rmqtool.client.instance import ClientInstance
from rmqtool.client.message import ConsumeStatus, Message, MessageQueue
from rmqtool.client.offsets import OffsetStore
from rmqtool.client.process_queue import ProcessQueue
from rmqtool.client.producer import ProducerImpl
from rmqtool.errors import RemotingError
from rmqtool.layouts import properties as P
from rmqtool.layouts.message import MessageExt
from rmqtool.remoting.codes import RequestCode, ResponseCode
from rmqtool.remoting.command import RemotingCommand
from rmqtool.remoting.headers import ConsumerSendMsgBackRequestHeader

log = logging.getLogger("rmqtool.client")

RECONSUME_LATER_LOCAL_DELAY = 5.0  # s: send-back failed too, consume again locally
SUSPEND_CURRENT_QUEUE_TIME = 1.0  # s, orderly SUSPEND_CURRENT_QUEUE_A_MOMENT
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


class ConsumeMessageService:
    """`ConsumeMessageConcurrentlyService` and `ConsumeMessageOrderlyService` of a push consumer.

    A base of `ConsumerImpl` (consumer_impl.py), which pulls messages into process queues and
    calls `_dispatch`; this part runs the listener on the consume threads and handles its results.
    """

    group: str
    instance: ClientInstance
    namespace: str | None
    running: bool
    orderly: bool
    message_model: str
    consume_batch: int
    consume_thread_nums: int
    listener: Listener | None
    executor: concurrent.futures.ThreadPoolExecutor | None
    offset_store: OffsetStore
    consumed: int
    sent_back: int

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
                if not await self._send_toretry_topic(m, delay=False):
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
        return await self._send_toretry_topic(m, delay=True)

    async def _send_toretry_topic(self, m: MessageExt, delay: bool) -> bool:
        producer = self.instance.producers.get(INNER_PRODUCER_GROUP)
        if producer is None:
            producer = ProducerImpl(INNER_PRODUCER_GROUP, self.instance, retry_times_when_send_failed=2)
            self.instance.producers[INNER_PRODUCER_GROUP] = producer
        retry = Message(retry_topic(self.group), m.body, properties=dict(m.properties), flag=m.flag)
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
