"""One pop, queue by queue: Java's `PopMessageProcessor.popMsgFromTopic` / `popMsgFromQueue`.

Synchronous (store reads and the checkpoint put); `PopService` runs it on the store thread pool
when puts wait for a sync flush. Per queue: take the queue's try-lock (a busy queue is skipped,
its backlog counted in restNum), start from the consumer offset (initialised as
`getInitOffset` does), read up to what is still missing, store one checkpoint for what was read
(or, orderly, record the read in ConsumerOrderInfoManager instead), then move the consumer
offset past it: Java's PopBufferMergeService commits that offset as soon as the checkpoint is
stored (enablePopBufferMerge=false, the default), so it is committed here at once. With the flag
the checkpoint goes to the buffer (buffer.py), which commits the offset once it is done or stored.
"""

from __future__ import annotations

import struct
import threading
from dataclasses import dataclass, field
from typing import Any

from rmqtool.layouts import properties as P
from rmqtool.layouts.constants import RETRY_GROUP_TOPIC_PREFIX
from rmqtool.layouts.message import decode_record, encode_record
from rmqtool.layouts.pop import (
    POP_CK,
    PopCheckPoint,
    append_offset_info,
    build_extra_info,
)

from .records import ck_message

_QUEUE_OFFSET = struct.Struct(">q")  # a record's QUEUEOFFSET field, at byte 20 of v1 and v2 records
_QUEUE_ID = struct.Struct(">i")  # QUEUEID, at byte 12
INIT_MODE_MIN = 0  # ConsumeInitMode.MIN; MAX = 1


@dataclass
class PoppedMessage:
    """One message handed out: the record as served and the receipt handle a client acks with."""

    raw: bytes
    topic: str  # the topic it was read from (the retry topic for a redelivery)
    queue_id: int
    queue_offset: int
    extra_info: str


@dataclass
class PopRequest:
    """What a pop asks for (the PopMessageRequestHeader fields that matter after the checks)."""

    group: str
    topic: str
    queue_id: int
    max_nums: int
    invisible_time: int
    init_mode: int = INIT_MODE_MIN
    order: bool = False
    attempt_id: str | None = None
    tags_codes: set[int] | None = None
    filter: Any = None


@dataclass
class PopContext:
    """The running result of one pop over one or more queues."""

    req: PopRequest
    pop_time: int
    revive_qid: int
    rest_num: int = 0
    messages: list[PoppedMessage] = field(default_factory=list)
    start_offset_info: list[str] = field(default_factory=list)
    msg_offset_info: list[str] = field(default_factory=list)
    order_count_info: list[str] = field(default_factory=list)


class QueueLockManager:
    """`PopMessageProcessor.QueueLockManager`: a try-lock per topic@group@queueId."""

    def __init__(self) -> None:
        self._locks: dict[str, threading.Lock] = {}
        self._guard = threading.Lock()

    @staticmethod
    def key(topic: str, group: str, queue_id: int) -> str:
        return f"{topic}@{group}@{queue_id}"

    def try_lock(self, key: str) -> bool:
        lock = self._locks.get(key)
        if lock is None:
            with self._guard:
                lock = self._locks.setdefault(key, threading.Lock())
        return lock.acquire(blocking=False)

    def lock(self, key: str) -> None:
        """Wait for the lock (acks of orderly pops spin on tryLock in Java)."""
        if not self.try_lock(key):
            self._locks[key].acquire()

    def unlock(self, key: str) -> None:
        lock = self._locks.get(key)
        if lock is not None and lock.locked():
            lock.release()


class Popper:
    """The queue reads of pops, over one broker's store, offsets, topics and order state."""

    def __init__(self, service: Any) -> None:
        self.service = service
        self.local = service.local
        self.store = service.local.store
        self.locks = QueueLockManager()

    # -- offsets ----------------------------------------------------------------------------------
    def init_offset(self, topic: str, group: str, queue_id: int, init_mode: int, commit: bool) -> int:
        """`getInitOffset`: MIN (or a retry topic) from the queue's start; MAX from its last message
        (from 0 while the queue still starts at 0: initPopOffsetByCheckMsgInMem, the store is mapped)."""
        store = self.store
        if init_mode == INIT_MODE_MIN or topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
            offset = store.get_min_offset_in_queue(topic, queue_id)
        elif store.get_min_offset_in_queue(topic, queue_id) <= 0 and store.get_max_offset_in_queue(topic, queue_id) > 0:
            offset = 0
        else:
            offset = max(0, store.get_max_offset_in_queue(topic, queue_id) - 1)
        if commit:
            self.local.offsets.commit_offset(group, topic, queue_id, offset)
        return offset

    def pop_offset(self, topic: str, group: str, queue_id: int, init_mode: int, commit: bool) -> int:
        """`getPopOffset`: the consumer offset (initialised if none), or past the buffered pops."""
        offset = self.local.offsets.query_offset(group, topic, queue_id)
        if offset < 0:
            offset = self.init_offset(topic, group, queue_id, init_mode, commit)
        return max(offset, self.service.buffer.latest_offset(QueueLockManager.key(topic, group, queue_id)))

    def current_offset(self, topic: str, group: str, queue_id: int) -> int:
        """Where the next pop of the queue starts (-1: not yet initialised), buffered pops included."""
        return max(self.local.offsets.query_offset(group, topic, queue_id),
                   self.service.buffer.latest_offset(QueueLockManager.key(topic, group, queue_id)))

    # -- reads ------------------------------------------------------------------------------------
    def pop_topic(self, ctx: PopContext, topic: str, is_retry: bool, random_q: int) -> None:
        """`popMsgFromTopic`: every readable queue of `topic`, starting at a random one."""
        tc = self.local.topics.select(topic)
        if tc is None:
            return
        n = tc.read_queue_nums
        for i in range(n):
            self.pop_queue(ctx, topic, is_retry, (random_q + i) % n)

    def pop_queue(self, ctx: PopContext, topic: str, is_retry: bool, queue_id: int) -> None:
        """`popMsgFromQueue`."""
        req = ctx.req
        store = self.store
        key = QueueLockManager.key(topic, req.group, queue_id)
        offset = self.pop_offset(topic, req.group, queue_id, req.init_mode, False)
        if not self.locks.try_lock(key):
            if not req.order:
                ctx.rest_num += store.get_max_offset_in_queue(topic, queue_id) - offset
            return
        try:
            offset = self.pop_offset(topic, req.group, queue_id, req.init_mode, True)
            if req.order:
                if self.service.order_info.check_block(req.attempt_id, topic, req.group, queue_id,
                                                       req.invisible_time, ctx.pop_time):
                    return
            if len(ctx.messages) >= req.max_nums:
                ctx.rest_num += store.get_max_offset_in_queue(topic, queue_id) - offset
                return
            result = self._read(topic, queue_id, offset, req.max_nums - len(ctx.messages), req)
            status = _status(result)
            if status in ("OFFSET_TOO_SMALL", "OFFSET_OVERFLOW_BADLY", "OFFSET_FOUND_NULL"):
                # the stored offset is not right for this queue: start again where the store says
                self.local.offsets.commit_offset(req.group, topic, queue_id, result.next_begin_offset)
                offset = result.next_begin_offset
                result = self._read(topic, queue_id, offset, req.max_nums - len(ctx.messages), req)
                status = _status(result)
            raws = list(result.raw)
            if raws:
                queue_offsets = [_QUEUE_OFFSET.unpack_from(r, 20)[0] for r in raws]
                if req.order:
                    count = self.service.order_info.update(req.attempt_id, is_retry, topic, req.group, queue_id,
                                                           ctx.pop_time, req.invisible_time, queue_offsets,
                                                           ctx.order_count_info)
                    append_offset_info(ctx.order_count_info, topic, queue_id, str(count))
                    self.local.offsets.commit_offset(req.group, topic, queue_id, offset)
                else:
                    if not self._append_check_point(ctx, topic, queue_id, offset, queue_offsets,
                                                    result.next_begin_offset):
                        ctx.rest_num += len(raws)
                        return
                append_offset_info(ctx.start_offset_info, topic, queue_id, str(offset))
                append_offset_info(ctx.msg_offset_info, topic, queue_id, ",".join(str(o) for o in queue_offsets))
                ctx.rest_num += result.max_offset - result.next_begin_offset
                self._add(ctx, topic, is_retry, queue_id, offset, raws, queue_offsets)
                return
            if status in ("NO_MATCHED_MESSAGE", "OFFSET_FOUND_NULL", "MESSAGE_WAS_REMOVING",
                          "NO_MATCHED_LOGIC_QUEUE") and result.next_begin_offset > -1:
                # nothing to hand out up to nextBeginOffset (addCkMock): the next pop starts there
                if self.service.buffer.enabled:
                    self.service.buffer.add_ck_mock(req.group, topic, queue_id, offset, req.invisible_time,
                                                    ctx.pop_time, ctx.revive_qid, result.next_begin_offset)
                else:
                    self.local.offsets.commit_offset(req.group, topic, queue_id, result.next_begin_offset)
            ctx.rest_num += result.max_offset - result.next_begin_offset
        finally:
            self.locks.unlock(key)

    def _read(self, topic: str, queue_id: int, offset: int, max_msgs: int, req: PopRequest) -> Any:
        kw: dict[str, Any] = {"decode": False}
        if req.tags_codes is not None and not topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
            kw["tags_codes"] = req.tags_codes
        if req.filter is not None and not topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
            kw["filter"] = req.filter
        return self.store.get_message(topic, queue_id, offset, max_msgs, **kw)

    def _append_check_point(self, ctx: PopContext, topic: str, queue_id: int, offset: int,
                            queue_offsets: list[int], next_begin_offset: int) -> bool:
        """`appendCheckPoint` + `putCkToStore`: the checkpoint record, stored before anything is
        handed out, and the consumer offset moved to `next_begin_offset`; with enablePopBufferMerge
        the buffer holds the checkpoint (or stores it now) and moves the offset in turn."""
        req = ctx.req
        ck = PopCheckPoint(start_offset=offset, pop_time=ctx.pop_time, invisible_time=req.invisible_time,
                           num=len(queue_offsets), queue_id=queue_id, topic=topic, cid=req.group,
                           broker_name=self.service.broker_name)
        for o in queue_offsets:
            ck.add_diff(o - offset)
        buffer = self.service.buffer
        if buffer.enabled:
            return buffer.add_ck(ck, ctx.revive_qid, next_begin_offset) or \
                buffer.add_ck_just_offset(ck, ctx.revive_qid, next_begin_offset)
        msg = ck_message(self.local, self.service.revive_topic, ck, ctx.revive_qid, self.service.now())
        try:
            put = self.store.put_message(msg)
        except Exception:  # noqa: BLE001 - Java logs and hands nothing out; the client pops again
            return False
        if str(getattr(put.status, "name", put.status)) not in ("PUT_OK", "FLUSH_DISK_TIMEOUT",
                                                               "FLUSH_SLAVE_TIMEOUT", "SLAVE_NOT_AVAILABLE"):
            return False
        self.local.offsets.commit_offset(req.group, topic, queue_id, next_begin_offset)
        return True

    def _add(self, ctx: PopContext, topic: str, is_retry: bool, queue_id: int, ck_offset: int,
             raws: list[bytes], queue_offsets: list[int]) -> None:
        """Hand the records out; a retry record is re-encoded under the original topic with its
        POP_CK receipt handle (popResponseReturnActualRetryTopic=false, Java's default)."""
        req = ctx.req
        svc = self.service
        rqid = ctx.revive_qid
        for raw, qo in zip(raws, queue_offsets, strict=True):
            extra = build_extra_info(ck_offset, ctx.pop_time, req.invisible_time, rqid, topic, svc.broker_name,
                                     queue_id, qo)
            if is_retry:
                msg = decode_record(raw, check_crc=False)
                props = dict(msg.properties)
                props.setdefault(POP_CK, extra)
                msg.properties = P.broker_order(props, owned=True)
                msg.topic = req.topic
                raw = encode_record(msg)
            ctx.messages.append(PoppedMessage(raw, topic, queue_id, qo, extra))


def _status(result: Any) -> str:
    return str(getattr(result.status, "name", result.status))
