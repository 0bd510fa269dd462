"""ACK_MESSAGE, BATCH_ACK_MESSAGE and CHANGE_MESSAGE_INVISIBLETIME of `PopService` (a mixin).

Java 5.3.3's AckMessageProcessor and ChangeInvisibleTimeProcessor: an ack (or the ack of the old
checkpoint when the invisible time changes) is merged into its checkpoint while that is held by
the buffer (`PopBufferMergeService.addAk`, enablePopBufferMerge=true), else stored as an `ack` /
`bAck` record on the revive topic; orderly pops move the consumer offset instead.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from rmqtool.layouts.pop import (
    POP_ORDER_REVIVE_QUEUE,
    AckMsg,
    BatchAck,
    ExtraInfoError,
    PopCheckPoint,
    build_extra_info,
    extra_field,
    extra_int,
    real_topic,
    split_extra_info,
)
from rmqtool.remoting.codes import ResponseCode

from .popper import QueueLockManager
from .records import ack_message, ck_message
from .results import NOT_SET, ChangeInvisibleResult, PopError, _java_error


class PopAckMixin:
    """The ack side of PopService (its attributes: local, store, controller, locks, order_info, ...)."""

    local: Any
    store: Any
    controller: Any
    locks: QueueLockManager
    order_info: Any
    revive_topic: str
    broker_name: str
    _pending_acks: list[tuple[Any, asyncio.Future[None]]]
    buffer: Any  # PopBufferMergeService

    def now(self) -> int:
        raise NotImplementedError

    def _topic(self, topic: str) -> Any:
        raise NotImplementedError

    # -- ACK_MESSAGE / BATCH_ACK_MESSAGE ----------------------------------------------------------
    def _check_ack_queue(self, topic: str, queue_id: int, peer: str) -> Any:
        tc = self._topic(topic)
        if queue_id >= tc.read_queue_nums or queue_id < 0:
            raise PopError(ResponseCode.MESSAGE_ILLEGAL,
                           f"queueId[{queue_id}] is illegal, topic:[{topic}] topicConfig.readQueueNums:"
                           f"[{tc.read_queue_nums}] consumer:[{peer}]")
        return tc

    async def ack_message(self, group: str, topic: str, queue_id: int, extra_info: str, offset: int,
                          peer: str = "in-process") -> None:
        """ACK_MESSAGE with the request's own fields (`topic` is the real one: the retry topic for a
        redelivered message). Raises PopError."""
        self._check_ack_queue(topic, queue_id, peer)
        lo = self.store.get_min_offset_in_queue(topic, queue_id)
        hi = self.store.get_max_offset_in_queue(topic, queue_id)
        if offset < lo or offset > hi:
            raise PopError(ResponseCode.NO_MESSAGE,
                           f"offset is illegal, key:{topic}@{queue_id}, commit:{offset}, store:{lo}~{hi}")
        try:
            parts = split_extra_info(extra_info)
            broker_name = extra_field(parts, 5)
            rqid = extra_int(parts, 3)
            ck_offset = extra_int(parts, 0)
            pop_time = extra_int(parts, 1)
            invisible = extra_int(parts, 2)
        except ExtraInfoError as e:
            raise _java_error(e) from None
        if rqid == POP_ORDER_REVIVE_QUEUE:
            await self.controller.run(self._ack_orderly, topic, group, queue_id, offset, pop_time, invisible, peer)
            return
        ack = AckMsg(offset, ck_offset, group, topic, queue_id, pop_time, broker_name)
        if self.buffer.add_ak(rqid, ack):  # merged into its buffered checkpoint: nothing stored
            return
        await self._append_ack(ack, rqid, invisible)

    async def ack(self, group: str, topic: str, extra_info: str, peer: str = "in-process") -> None:
        """Ack one message by its receipt handle; `topic` is the topic the consumer subscribed to."""
        try:
            parts = split_extra_info(extra_info)
            rt = real_topic(topic, group, extra_field(parts, 4))
            qid, offset = extra_int(parts, 6), extra_int(parts, 7)
        except ExtraInfoError as e:
            raise _java_error(e) from None
        except ValueError as e:
            raise _java_error(e) from None
        await self.ack_message(group, rt, qid, extra_info, offset, peer)

    def _put_ack(self, ack: AckMsg, revive_qid: int, invisible_time: int) -> None:
        msg = ack_message(self.local, self.revive_topic, ack, revive_qid, invisible_time, self.now())
        self.store.put_message(msg)  # Java logs a failed put and still answers SUCCESS

    async def _append_ack(self, ack: AckMsg, revive_qid: int, invisible_time: int) -> None:
        """The ack record, stored together with the other acks of this loop turn (one put_messages
        call: one lock, one dispatch); answered once it is stored, as `appendAck` answers."""
        msg = ack_message(self.local, self.revive_topic, ack, revive_qid, invisible_time, self.now())
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._pending_acks.append((msg, fut))
        if len(self._pending_acks) == 1:
            asyncio.get_running_loop().call_soon(self._flush_acks)
        await fut

    def _flush_acks(self) -> None:
        batch, self._pending_acks = self._pending_acks, []
        if not batch:
            return

        def done(result: Any) -> None:
            for _msg, fut in batch:
                if not fut.done():
                    fut.set_result(None)

        async def put_async() -> None:
            try:
                await self.controller.run(self.store.put_messages, [m for m, _ in batch])
            except Exception:  # noqa: BLE001 - Java logs a failed ack put and still answers SUCCESS
                logging.getLogger("rmqtool.broker.pop").exception("storing %d ack records failed", len(batch))
            done(None)

        if self.controller.inline_store_calls:
            try:
                self.store.put_messages([m for m, _ in batch])
            except Exception:  # noqa: BLE001 - as above
                logging.getLogger("rmqtool.broker.pop").exception("storing %d ack records failed", len(batch))
            done(None)
        else:
            self.controller.spawn(put_async())

    async def batch_ack(self, acks: list[BatchAck], broker_name: str | None = None, peer: str = "in-process") -> None:
        """BATCH_ACK_MESSAGE: every set bit of each entry is an ack; entries for unknown queues or
        offsets out of the queue's range are skipped, as Java skips them."""
        if not acks:
            raise PopError(ResponseCode.NO_MESSAGE, None)
        for b in acks:
            try:
                topic = real_topic(b.topic, b.consumer_group, b.retry)
            except ValueError as e:
                raise _java_error(e) from None
            if self.local.topics.select(topic) is None or self.store.get_max_offset_in_queue(topic, b.queue_id) <= 0 \
                    and self.store.get_min_offset_in_queue(topic, b.queue_id) < 0:
                continue
            lo = self.store.get_min_offset_in_queue(topic, b.queue_id)
            hi = self.store.get_max_offset_in_queue(topic, b.queue_id)
            offsets = [b.start_offset + i for i in b.bits if lo <= b.start_offset + i <= hi]
            if b.revive_queue_id == POP_ORDER_REVIVE_QUEUE:
                for off in offsets:
                    await self.controller.run(self._ack_orderly, topic, b.consumer_group, b.queue_id, off,
                                              b.pop_time, b.invisible_time, peer)
                continue
            if not offsets:
                continue
            ack = AckMsg(-1, b.start_offset, b.consumer_group, topic, b.queue_id, b.pop_time, broker_name,
                         ack_offset_list=offsets)
            if not self.buffer.add_ak(b.revive_queue_id, ack):
                await self._append_ack(ack, b.revive_queue_id, b.invisible_time)

    def _ack_orderly(self, topic: str, group: str, queue_id: int, ack_offset: int, pop_time: int,
                     invisible_time: int, peer: str) -> None:
        """`ackOrderly`: move the consumer offset to the first unacked message of the orderly pop."""
        offsets = self.local.offsets
        key = QueueLockManager.key(topic, group, queue_id)
        if ack_offset < offsets.query_offset(group, topic, queue_id):
            return
        self.locks.lock(key)
        try:
            old = offsets.query_offset(group, topic, queue_id)
            if ack_offset < old:
                return
            nxt = self.order_info.commit_and_next(topic, group, queue_id, ack_offset, pop_time)
            if nxt > -1:
                offsets.commit_offset(group, topic, queue_id, nxt)
                if not self.order_info.check_block(None, topic, group, queue_id, invisible_time):
                    self._notify_threadsafe(topic)
            elif nxt == -1:
                raise PopError(ResponseCode.MESSAGE_ILLEGAL,
                               f"offset is illegal, key:{key}, old:{old}, commit:{ack_offset}, next:{nxt}, {peer}")
        finally:
            self.locks.unlock(key)

    def _notify_threadsafe(self, topic: str) -> None:
        loop = self._loop
        if loop is not None:
            try:
                loop.call_soon_threadsafe(self.notify, topic)
            except RuntimeError:
                pass

    # -- CHANGE_MESSAGE_INVISIBLETIME -------------------------------------------------------------
    async def change_invisible_time_message(self, group: str, topic: str, queue_id: int, extra_info: str,
                                            offset: int, invisible_time: int,
                                            peer: str = "in-process") -> ChangeInvisibleResult:
        """CHANGE_MESSAGE_INVISIBLETIME with the request's own fields (`topic` the real one)."""
        self._check_ack_queue(topic, queue_id, peer)
        lo = self.store.get_min_offset_in_queue(topic, queue_id)
        hi = self.store.get_max_offset_in_queue(topic, queue_id)
        if offset < lo or offset >= hi:
            raise PopError(ResponseCode.NO_MESSAGE, NOT_SET)
        try:
            parts = split_extra_info(extra_info)
            rqid = extra_int(parts, 3)
            if rqid == POP_ORDER_REVIVE_QUEUE:
                pop_time = extra_int(parts, 1)
                return await self.controller.run(self._change_orderly, group, topic, queue_id, offset, pop_time,
                                                 invisible_time, rqid)
            broker_name = extra_field(parts, 5)
            ck_offset, pop_time, old_invisible = extra_int(parts, 0), extra_int(parts, 1), extra_int(parts, 2)
        except ExtraInfoError as e:
            raise _java_error(e) from None
        now = self.now()
        ck = PopCheckPoint(start_offset=offset, pop_time=now, invisible_time=invisible_time, num=1, queue_id=queue_id,
                           topic=topic, cid=group, broker_name=broker_name)
        ck.add_diff(0)
        ack = AckMsg(offset, ck_offset, group, topic, queue_id, pop_time, broker_name)

        def append() -> bool:
            put = self.store.put_message(ck_message(self.local, self.revive_topic, ck, rqid, self.now()))
            if str(getattr(put.status, "name", put.status)) not in ("PUT_OK", "FLUSH_DISK_TIMEOUT",
                                                                   "FLUSH_SLAVE_TIMEOUT", "SLAVE_NOT_AVAILABLE"):
                return False
            if not self.buffer.add_ak(rqid, ack):  # ackOrigin: the old checkpoint's message is done
                self._put_ack(ack, rqid, old_invisible)
            return True

        if not await self.controller.run(append):
            raise PopError(ResponseCode.SYSTEM_ERROR, NOT_SET)
        return ChangeInvisibleResult(now, invisible_time, rqid,
                                     build_extra_info(offset, now, invisible_time, rqid, topic, broker_name,
                                                      queue_id, offset))

    async def change_invisible_time(self, group: str, topic: str, extra_info: str, invisible_time: int,
                                    peer: str = "in-process") -> ChangeInvisibleResult:
        """Make a message invisible for `invisible_time` ms from now, by its receipt handle;
        `topic` is the subscribed topic. The result's `extra_info` is the new receipt handle."""
        try:
            parts = split_extra_info(extra_info)
            rt = real_topic(topic, group, extra_field(parts, 4))
            qid, offset = extra_int(parts, 6), extra_int(parts, 7)
        except (ExtraInfoError, ValueError) as e:
            raise _java_error(e) from None
        return await self.change_invisible_time_message(group, rt, qid, extra_info, offset, invisible_time, peer)

    def _change_orderly(self, group: str, topic: str, queue_id: int, offset: int, pop_time: int,
                        invisible_time: int, rqid: int) -> ChangeInvisibleResult:
        """`processChangeInvisibleTimeForOrder`: only the message's next visible time changes."""
        offsets = self.local.offsets
        same = ChangeInvisibleResult(0, 0, 0, "")
        if offset < offsets.query_offset(group, topic, queue_id):
            return same
        key = QueueLockManager.key(topic, group, queue_id)
        self.locks.lock(key)
        try:
            if offset < offsets.query_offset(group, topic, queue_id):
                return same
            visible = self.now() + invisible_time
            self.order_info.update_next_visible_time(topic, group, queue_id, offset, pop_time, visible)
            return ChangeInvisibleResult(pop_time, visible - pop_time, rqid,
                                         build_extra_info(offset, pop_time, visible - pop_time, rqid, topic,
                                                          self.broker_name, queue_id, offset))
        finally:
            self.locks.unlock(key)
