"""SEND_MESSAGE (10), SEND_MESSAGE_V2 (310), SEND_BATCH_MESSAGE (320), CONSUMER_SEND_MSG_BACK (36).

`SendMessageProcessor` of the Java broker (protocol.md §4.1, §4.9): header checks in the order
of `msgCheck`, topic auto-creation from the request's default topic, the retry -> DLQ decision
with the client's maxReconsumeTimes, transactional half messages (transaction.py), then the
store. The send response carries the offset msgId, queue id and queue offset, MSG_REGION and
TRACE_ON, which clients read.
"""

from __future__ import annotations

import random
import struct
from typing import Any

from rmqtool.broker.durable import Later
from rmqtool.broker.recall import recall_handle_of
from rmqtool.errors import InvalidInput, InvalidMessage, InvalidTopic
from rmqtool.layouts import properties as P
from rmqtool.layouts.constants import DLQ_GROUP_TOPIC_PREFIX, RETRY_GROUP_TOPIC_PREFIX
from rmqtool.layouts.message import MessageExt
from rmqtool.remoting.codes import RequestCode, ResponseCode
from rmqtool.remoting.command import RESPONSE_FLAG, RemotingCommand
from rmqtool.remoting.headers import (
    ConsumerSendMsgBackRequestHeader,
    SendMessageRequestHeader,
    send_header_from_ext,
)
from rmqtool.remoting.transport import Connection
from rmqtool.store.diskspace import disk_util
from rmqtool.store.putpath import PutMessageStatus
from rmqtool.validators import validate_topic_remark

PERM_READ, PERM_WRITE, PERM_INHERIT = 4, 2, 1
V3_4_9 = 121  # maxReconsumeTimes in the header is honoured from this client version on
NOT_ALLOWED_SEND_TOPICS = frozenset({
    "SCHEDULE_TOPIC_XXXX", "RMQ_SYS_TRANS_HALF_TOPIC", "RMQ_SYS_TRANS_OP_HALF_TOPIC",
    "TRANS_CHECK_MAX_TIME_TOPIC", "SELF_TEST_TOPIC", "OFFSET_MOVED_EVENT",
})

# PutMessageStatus -> response code (SendMessageProcessor.handlePutMessageResult)
PUT_STATUS_CODES = {
    "PUT_OK": ResponseCode.SUCCESS,
    "FLUSH_DISK_TIMEOUT": ResponseCode.FLUSH_DISK_TIMEOUT,
    "FLUSH_SLAVE_TIMEOUT": ResponseCode.FLUSH_SLAVE_TIMEOUT,
    "SLAVE_NOT_AVAILABLE": ResponseCode.SLAVE_NOT_AVAILABLE,
    "CREATE_MAPPED_FILE_FAILED": ResponseCode.SYSTEM_ERROR,
    "MESSAGE_ILLEGAL": ResponseCode.MESSAGE_ILLEGAL,
    "PROPERTIES_SIZE_EXCEEDED": ResponseCode.MESSAGE_ILLEGAL,
    "SERVICE_NOT_AVAILABLE": ResponseCode.SERVICE_NOT_AVAILABLE,
    "OS_PAGE_CACHE_BUSY": ResponseCode.SYSTEM_BUSY,
    "OS_PAGECACHE_BUSY": ResponseCode.SYSTEM_BUSY,
    "UNKNOWN_ERROR": ResponseCode.SYSTEM_ERROR,
}
_BATCH_HEAD = struct.Struct(">iiiii")  # totalSize, magic, bodyCRC, flag, bodyLen


def status_name(status: Any) -> str:
    """PutMessageStatus as a name, whether the store gives a str or an Enum."""
    return str(getattr(status, "name", status))


def decode_batch_body(body: bytes) -> list[tuple[int, bytes, str]]:
    """`MessageDecoder.decodeMessages`: (flag, body, properties text) of each inner message."""
    out = []
    p, n = 0, len(body)
    while p < n:
        if p + 20 > n:
            raise InvalidMessage("batch body cut short")
        total, _magic, _crc, flag, blen = _BATCH_HEAD.unpack_from(body, p)
        if blen < 0 or p + 20 + blen + 2 > n or total < 22 + blen:
            raise InvalidMessage("batch element runs past the body")
        b = body[p + 20 : p + 20 + blen]
        q = p + 20 + blen
        (plen,) = struct.unpack_from(">h", body, q)
        if plen < 0 or q + 2 + plen > n:
            raise InvalidMessage("batch element properties run past the body")
        props = body[q + 2 : q + 2 + plen].decode("utf-8", "replace")
        out.append((flag, b, props))
        p = q + 2 + plen
    if not out:
        raise InvalidMessage("the batch is empty")
    return out


def encode_batch_body(items: list[tuple[int, bytes, str]]) -> bytes:
    """`MessageDecoder.encodeMessages`, for clients and tests."""
    parts = []
    for flag, b, props in items:
        pb = props.encode("utf-8")
        parts.append(_BATCH_HEAD.pack(22 + len(b) + len(pb), 0, 0, flag, len(b)) + b + struct.pack(">h", len(pb)) + pb)
    return b"".join(parts)


class SendProcessor:
    def process_send(self: Any, cmd: RemotingCommand, conn: Connection) -> Any:
        """A send: the response, or (store calls on the pool) an awaitable of it."""
        h = send_header_from_ext(cmd.code, cmd.ext_fields)
        err = self._msg_check(cmd, h)
        if err is not None:
            return err
        max_size = self.config.max_message_size
        if len(cmd.body) > max_size and not h.batch and cmd.code != RequestCode.SEND_BATCH_MESSAGE:
            # CommitLog's encoder refuses it; batches are checked per message
            return cmd.response(ResponseCode.MESSAGE_ILLEGAL, remark=(
                f"the message is illegal, maybe msg body or properties length not matched. msg body length "
                f"limit {max_size}B, msg properties length limit 32KB."))  # handlePutMessageResult's words
        tc = self.local.topics.select(h.topic)
        queue_nums = max(tc.write_queue_nums, tc.read_queue_nums)
        queue_id = h.queueId
        if queue_id < 0:
            queue_id = random.randrange(max(1, tc.write_queue_nums))
        if queue_id >= queue_nums:
            return cmd.response(ResponseCode.SYSTEM_ERROR,
                                remark=f"request queueId[{queue_id}] is illegal, {tc!r} Producer: {conn.peer}")
        props = P.decode_properties(h.properties or "")
        self.stamp_region(props)
        topic = h.topic
        reconsume = h.reconsumeTimes or 0
        if topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
            group = topic[len(RETRY_GROUP_TOPIC_PREFIX):]
            sub = self.group_config(group)
            if sub is None:
                return cmd.response(ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST,
                                    remark=f"subscription group not exist, {group}")
            max_times = sub.retry_max_times
            if cmd.version >= V3_4_9 and h.maxReconsumeTimes is not None:
                max_times = h.maxReconsumeTimes
            if reconsume > max_times:  # handleRetryAndDLQ (5.x: strictly more than the max)
                topic = DLQ_GROUP_TOPIC_PREFIX + group
                self.local.topics.create_in_send_back(topic, 1, PERM_READ | PERM_WRITE)
                self.register_broker_all()
                queue_id = 0
                props[P.DELAY] = "-1"
        if cmd.code == 320 or h.batch:
            return self._send_batch(cmd, h, topic, queue_id, props, conn)
        msg = MessageExt(topic, cmd.body, queue_id, h.flag, props, h.sysFlag, h.bornTimestamp, conn.peer,
                         reconsume_times=reconsume)

        def done(result: Any) -> RemotingCommand:
            self.stats["put"] += 1
            self.put_msgs[topic] += 1  # count_put(topic, 1), folded in when the stats are read
            self.put_calls[topic] += 1
            r = self._send_response(cmd, result, queue_id, props.get(P.UNIQ_KEY))
            if r.code == ResponseCode.SUCCESS and P.TIMER_OUT_MS in msg.properties:
                handle = recall_handle_of(msg, self.broker_name)  # the put hook parked it on the timer wheel
                if handle is not None:
                    r.ext_fields["recallHandle"] = handle
            return r

        if props.get(P.TRAN_MSG) == "true":
            return self.call_store(self.put_half_message, (msg, h.producerGroup), done)
        # the handler's checks are `LocalBroker.check`'s but for what `send_checked` still makes
        # (a %RETRY% topic turned into its %DLQ% was not checked here: `send` checks it)
        send = self.local.send_checked if topic == h.topic else self.local.send
        return self.call_store(send, (msg,), done)

    def _msg_check(self: Any, cmd: RemotingCommand, h: SendMessageRequestHeader) -> RemotingCommand | None:
        """`AbstractSendMessageProcessor.msgCheck`, answering with the Java broker's codes."""
        bad = validate_topic_remark(h.topic)
        if bad is not None:
            return cmd.response(ResponseCode.INVALID_PARAMETER, remark=bad)
        if h.topic in NOT_ALLOWED_SEND_TOPICS:
            return cmd.response(ResponseCode.NO_PERMISSION,
                                remark=f"Sending message to topic[{h.topic}] is forbidden.")
        tc = self.local.topics.select(h.topic)
        if tc is None:
            try:
                if h.topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
                    tc = self.local.topics.create_in_send_back(h.topic, 1, PERM_READ | PERM_WRITE)
                else:
                    default = self.local.topics.select(h.defaultTopic or "TBW102")
                    if default is None or not default.perm & PERM_INHERIT:
                        raise InvalidTopic(f"topic[{h.topic}] not exist, apply first please!")
                    tc = self.local.topics.create_in_send(h.topic, h.defaultTopicQueueNums, 0)
            except InvalidTopic as e:
                return cmd.response(ResponseCode.TOPIC_NOT_EXIST, remark=str(e))
            self.register_broker_all()
        if not tc.perm & PERM_WRITE:
            return cmd.response(ResponseCode.NO_PERMISSION,
                                remark=f"the topic[{h.topic}] sending message is forbidden")
        return None

    def _send_batch(self: Any, cmd: RemotingCommand, h: SendMessageRequestHeader, topic: str,
                    queue_id: int, batch_props: dict[str, str], conn: Connection, *, fast: bool = True) -> Any:
        """SEND_BATCH_MESSAGE: the body straight into CommitLog records (`send_batch_body`), or,
        for anything that path leaves alone, one MessageExt per inner message; one store call."""
        if fast:
            answer = self._send_batch_body(cmd, h, topic, queue_id, batch_props, conn)
            if answer is not None:
                return answer
        decode = P.decode_properties
        extra = list(batch_props.items())
        peer, sys_flag, born, reconsume = conn.peer, h.sysFlag, h.bornTimestamp, h.reconsumeTimes or 0
        msgs = []
        for flag, body, text in decode_batch_body(cmd.body):
            props = decode(text)
            for k, v in extra:  # the batch's own properties fill in what an inner message lacks
                props.setdefault(k, v)
            msgs.append(MessageExt(topic, body, queue_id, flag, props, sys_flag, born, peer,
                                   reconsume_times=reconsume))

        def done(results: list[Any]) -> RemotingCommand:
            self.stats["put"] += len(msgs)
            self.count_put(topic, len(msgs))
            if not results:
                return cmd.response(ResponseCode.SYSTEM_ERROR, remark="nothing stored")
            for r in results:
                if status_name(r.status) != "PUT_OK":
                    return self._send_response(cmd, r, queue_id)
            ids = ",".join([r.offset_msg_id for r in results])
            uniq = batch_props.get(P.UNIQ_KEY)  # the batch's own, as Java's getUniqID(messageExtBatch)
            return self._send_ok(cmd, ResponseCode.SUCCESS, ids, queue_id, results[0].queue_offset, uniq, uniq)

        return self.call_store(self.local.send_batch, (msgs,), done)

    def _send_batch_body(self: Any, cmd: RemotingCommand, h: SendMessageRequestHeader, topic: str,
                         queue_id: int, batch_props: dict[str, str], conn: Connection) -> Any:
        """The batch without a MessageExt per message, when `LocalBroker.send_batch_body` takes it
        (None otherwise: nothing was stored). The answer is `_send_batch`'s."""
        send_body = getattr(self.local, "send_batch_body", None)
        if send_body is None or topic != h.topic:  # a retry topic turned into its %DLQ%
            return None
        args = (topic, queue_id, cmd.body, batch_props, h.sysFlag, h.bornTimestamp, conn.peer, h.reconsumeTimes or 0)
        if self.inline_store_calls:
            result = send_body(*args)
            return None if result is None else self._batch_body_done(cmd, topic, queue_id, batch_props, result)
        return Later(self._send_batch_body_async, cmd, h, topic, queue_id, batch_props, conn, args)

    async def _send_batch_body_async(self: Any, cmd: RemotingCommand, h: SendMessageRequestHeader, topic: str,
                                     queue_id: int, batch_props: dict[str, str], conn: Connection,
                                     args: tuple[Any, ...]) -> Any:
        result = await self.run(self.local.send_batch_body, *args)
        if result is not None:
            return self._batch_body_done(cmd, topic, queue_id, batch_props, result)
        r = self._send_batch(cmd, h, topic, queue_id, batch_props, conn, fast=False)
        if r is not None and not isinstance(r, RemotingCommand):
            r = await r
        return r

    def _batch_body_done(self: Any, cmd: RemotingCommand, topic: str, queue_id: int,
                         batch_props: dict[str, str], result: Any) -> RemotingCommand:
        n = len(result.wrote_offsets)
        self.stats["put"] += n
        self.put_msgs[topic] += n  # count_put(topic, n), folded in when the stats are read
        self.put_calls[topic] += 1
        name = status_name(result.status)
        if name != "PUT_OK":
            code = PUT_STATUS_CODES.get(name, ResponseCode.SYSTEM_ERROR)
            if code not in (ResponseCode.FLUSH_DISK_TIMEOUT, ResponseCode.FLUSH_SLAVE_TIMEOUT,
                            ResponseCode.SLAVE_NOT_AVAILABLE):
                return cmd.response(code, remark=self._put_failed_remark(name))
            first = result.offset_msg_ids().split(",", 1)[0]
            return self._send_ok(cmd, code, first, queue_id, result.queue_offset)
        uniq = batch_props.get(P.UNIQ_KEY)
        return self._send_ok(cmd, ResponseCode.SUCCESS, result.offset_msg_ids(), queue_id, result.queue_offset,
                             uniq, uniq)

    def stamp_region(self: Any, props: dict[str, str]) -> None:
        """`buildMsgContext`: every message sent is stored with the broker's MSG_REGION and TRACE_ON."""
        if self.region_id is not None:
            props["MSG_REGION"] = str(self.region_id)
        if self.trace_on is not None:
            props["TRACE_ON"] = str(self.trace_on)

    def _send_response(self: Any, cmd: RemotingCommand, result: Any, queue_id: int,
                       transaction_id: str | None = None) -> RemotingCommand:
        status = result.status
        if status is PutMessageStatus.PUT_OK:  # the usual answer, without the name lookups
            return self._send_ok(cmd, ResponseCode.SUCCESS, result.offset_msg_id, queue_id, result.queue_offset,
                                 transaction_id)
        name = status_name(status)
        code = PUT_STATUS_CODES.get(name, ResponseCode.SYSTEM_ERROR)
        if code not in (ResponseCode.SUCCESS, ResponseCode.FLUSH_DISK_TIMEOUT, ResponseCode.FLUSH_SLAVE_TIMEOUT,
                        ResponseCode.SLAVE_NOT_AVAILABLE):
            return cmd.response(code, remark=self._put_failed_remark(name))
        return self._send_ok(cmd, code, result.offset_msg_id, queue_id, result.queue_offset, transaction_id)

    def _put_failed_remark(self: Any, status: str) -> str:
        """`handlePutMessageResult`'s remarks for the statuses a full disk gives."""
        if status == "CREATE_MAPPED_FILE_FAILED":
            return "create mapped file failed, server is busy or broken."
        if status == "SERVICE_NOT_AVAILABLE":
            return ("service not available now. It may be caused by one of the following reasons: the broker's disk "
                    f"is full [{disk_util(self.local.store.root)}], messages are put to the slave, message store has "
                    "been shut down, etc.")
        return f"put message failed: {status}"

    def _send_ok(self: Any, cmd: RemotingCommand, code: int, msg_id: str, queue_id: int,
                 queue_offset: int, transaction_id: str | None = None,
                 batch_uniq_id: str | None = None) -> RemotingCommand:
        """`SendMessageResponseHeader` extFields, built directly (same keys, order and strings
        as `SendMessageResponseHeader(...).to_ext()`), without the generic header round trip.
        `transactionId` is the message's unique id (`MessageClientIDSetter.getUniqID`), as the
        5.x broker sets it on every send; Go's client reads it into SendResult.TransactionID."""
        ext = {"msgId": msg_id, "queueId": str(queue_id), "queueOffset": str(queue_offset)}
        if transaction_id is not None:
            ext["transactionId"] = transaction_id
        if batch_uniq_id is not None:
            ext["batchUniqId"] = batch_uniq_id
        if self.region_id is not None:
            ext["MSG_REGION"] = str(self.region_id)
        if self.trace_on is not None:
            ext["TRACE_ON"] = str(self.trace_on)
        return RemotingCommand(code, ext, b"", cmd.opaque, RESPONSE_FLAG)

    async def process_send_back(self: Any, cmd: RemotingCommand, conn: Connection) -> RemotingCommand:
        """`consumerSendMsgBack`: LocalBroker re-stores the message on %RETRY% (or %DLQ%)."""
        h = ConsumerSendMsgBackRequestHeader.from_ext(cmd.ext_fields)
        sub = self.group_config(h.group)
        if sub is None:
            return cmd.response(ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST,
                                remark=f"subscription group not exist, {h.group}")
        if sub.retry_queue_nums <= 0:
            return cmd.response()
        max_times = h.maxReconsumeTimes if cmd.version >= V3_4_9 and h.maxReconsumeTimes is not None else None
        try:
            result = await self.run(self.local.consumer_send_back, h.group, h.offset, h.delayLevel, max_times,
                                    h.originMsgId)
        except InvalidInput as e:
            return cmd.response(ResponseCode.SYSTEM_ERROR, remark=str(e))
        self.register_broker_all()
        if result is None:
            return cmd.response()
        code = PUT_STATUS_CODES.get(status_name(result.status), ResponseCode.SYSTEM_ERROR)
        if code != ResponseCode.SUCCESS:
            return cmd.response(ResponseCode.SYSTEM_ERROR, remark=status_name(result.status))
        return cmd.response()
