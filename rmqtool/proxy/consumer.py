"""ReceiveMessage, AckMessage, ChangeInvisibleDuration, ForwardMessageToDeadLetterQueue
(`ReceiveMessageActivity`, `ReceiveMessageResponseStreamWriter`, `AckMessageActivity`,
`ChangeInvisibleDurationActivity`, `ForwardMessageToDLQActivity`, `ConsumerProcessor`).

Over the broker's in-process POP API (`controller.pop`, rmqtool.broker.pop). The receipt handle
a client holds is the broker's extraInfo plus the message's CommitLog offset, as the proxy's
`createHandle` makes it; acks and invisibility changes decode it as `ReceiptHandle.decode` does.
A received message past the group's max attempts goes to the DLQ instead of the client, one
whose tag does not match is acked (`PopMessageResultFilterImpl`).

`auto_renew` receives get the proxy's default invisible time and are renewed in the background
while the client holds them (renew.py); acks and changes then use the renewed handle.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import AsyncIterator
from typing import Any

from rmqtool.layouts.message import decode_record
from rmqtool.proxy.context import ProxyContext, ProxyCore
from rmqtool.proxy.convert import POP_CK, build_message, duration_ms, timestamp_of
from rmqtool.proxy.handle import ReceiptHandle, create_handle
from rmqtool.proxy.pb import definition as d
from rmqtool.proxy.pb import service as s
from rmqtool.proxy.status import (
    Code,
    ProxyError,
    code_of_remoting,
    code_of_remoting_plain,
    ok,
    proxy_exception,
    status,
)
from rmqtool.proxy.validate import validate_consumer_group, validate_invisible_time, validate_topic
from rmqtool.remoting.bodies import SubscriptionData
from rmqtool.remoting.codes import RequestCode, ResponseCode
from rmqtool.remoting.command import RemotingCommand
from rmqtool.remoting.headers import ConsumerSendMsgBackRequestHeader

FIRST_POP_TIME = "1ST_POP_TIME"
MAX_MSG_NUMS_FOR_POP_REQUEST = 32  # ProxyUtils
ILLEGAL_POLLING_TIME_INTRODUCED_CLIENT_VERSION = "5.0.3"
CONSUME_INIT_MODE_MAX = 1  # ConsumeInitMode.MAX, what the proxy pops with
NACK_INVISIBLE_TIME = 1000  # ReceiveMessageResponseStreamWriter: a message that could not be written


def _validate_handle(h: ReceiptHandle) -> None:
    """`AbstractProcessor.validateReceiptHandle`."""
    if h.expired:
        raise proxy_exception(Code.INVALID_RECEIPT_HANDLE, "receipt handle is expired")


def _pop_error_status(e: Exception) -> ProxyError:
    code = getattr(e, "code", ResponseCode.SYSTEM_ERROR)
    return ProxyError(code_of_remoting(code), str(e))


class ConsumerActivity:
    core: ProxyCore

    @property
    def pop(self) -> Any:
        pop = getattr(self.core.controller, "pop", None)
        if pop is None:
            raise ProxyError(Code.NOT_IMPLEMENTED, "this broker has no POP consumption")
        return pop

    # ------------------------------------------------------------ receive
    async def receive_message(self, ctx: ProxyContext, req: Any, remaining_ms: int | None) -> AsyncIterator[Any]:
        """The responses of one ReceiveMessage call: a status, the messages, a delivery timestamp."""
        try:
            async for r in self._receive(ctx, req, remaining_ms):
                yield r
        except ProxyError as e:
            yield s.ReceiveMessageResponse(status=status(e.code, e.message))
        yield s.ReceiveMessageResponse(delivery_timestamp=timestamp_of(int(time.time() * 1000)))

    async def _receive(self, ctx: ProxyContext, req: Any, remaining_ms: int | None) -> AsyncIterator[Any]:
        core, cfg = self.core, self.core.config
        settings = core.settings.get(ctx.client_id)
        if settings is None:  # Java dereferences the missing settings: its NullPointerException, in its words
            raise ProxyError(Code.INTERNAL_SERVER_ERROR,
                             'Cannot invoke "apache.rocketmq.v2.Settings.getSubscription()" because "settings" is null. '
                             "NullPointerException. org.apache.rocketmq.proxy.grpc.v2.consumer.ReceiveMessageActivity"
                             ".receiveMessage(ReceiveMessageActivity.java:63)")
        fifo = settings.subscription.fifo
        max_attempts = settings.backoff_policy.max_attempts
        time_remaining = remaining_ms if remaining_ms is not None else 1 << 40
        if req.HasField("long_polling_timeout"):
            polling = duration_ms(req.long_polling_timeout)
        else:
            polling = time_remaining - duration_ms(settings.request_timeout) // 2
        polling = max(polling, cfg.grpc_client_consumer_min_long_polling_timeout_millis)
        polling = min(polling, cfg.grpc_client_consumer_max_long_polling_timeout_millis)
        if polling > time_remaining:
            if time_remaining >= cfg.grpc_client_consumer_min_long_polling_timeout_millis:
                polling = time_remaining
            else:
                version = ctx.client_version
                code = Code.BAD_REQUEST if not version or version < ILLEGAL_POLLING_TIME_INTRODUCED_CLIENT_VERSION \
                    else Code.ILLEGAL_POLLING_TIME
                raise ProxyError(code, "The deadline time remaining is not enough for polling, please check network "
                                       "condition")
        validate_topic(req.message_queue.topic.name)
        validate_consumer_group(req.group.name)
        topic, group = req.message_queue.topic.name, req.group.name
        invisible = duration_ms(req.invisible_duration)
        auto_renew = cfg.enable_proxy_auto_renew and req.auto_renew
        if auto_renew:
            invisible = cfg.default_invisible_time_mills
        else:
            validate_invisible_time(invisible, cfg.min_invisible_time_mills_for_recv, cfg.max_invisible_time_mills)
        etype = "SQL92" if req.filter_expression.type == d.SQL else "TAG"
        try:
            sub = SubscriptionData.build(topic, req.filter_expression.expression, etype)
        except Exception as e:
            raise ProxyError(Code.ILLEGAL_FILTER_EXPRESSION, str(e)) from None
        if not self._read_queues(topic):
            raise proxy_exception(Code.FORBIDDEN, "no readable queue")
        try:
            result = await self.pop.pop(group, topic, -1, min(req.batch_size, MAX_MSG_NUMS_FOR_POP_REQUEST), invisible,
                                        polling, sub.subString, sub.expressionType, fifo, CONSUME_INIT_MODE_MAX,
                                        req.attempt_id if req.HasField("attempt_id") else None,
                                        peer=ctx.remote_address)
        except ProxyError:
            raise
        except Exception as e:
            if hasattr(e, "code"):
                raise _pop_error_status(e) from None
            raise
        if result.code == ResponseCode.POLLING_FULL:
            yield s.ReceiveMessageResponse(status=status(Code.TOO_MANY_REQUESTS, "polling full"))
            return
        if result.code != ResponseCode.SUCCESS:
            yield s.ReceiveMessageResponse(status=status(Code.MESSAGE_NOT_FOUND, "no new message"))
            return
        found = []
        for pm in result.messages:
            m = decode_record(pm.raw, check_crc=False)
            handle = create_handle(pm.extra_info, m.commit_log_offset)
            m.properties[POP_CK] = handle
            m.properties.setdefault(FIRST_POP_TIME, str(result.pop_time))
            m.topic = topic
            verdict = _filter(sub, m, max_attempts)
            if verdict == "NO_MATCH":
                await self._ack_quietly(ctx, ReceiptHandle.decode(handle), group, topic)
            elif verdict == "TO_DLQ":
                await self._forward_quietly(ctx, ReceiptHandle.decode(handle), m.msg_id, group, topic)
            else:
                found.append(m)
        if not found:
            yield s.ReceiveMessageResponse(status=status(Code.MESSAGE_NOT_FOUND, "no match message"))
            return
        if auto_renew:
            if core.channels.get(ctx.client_id) is None:
                for m in found:  # processThrowableWhenWriteMessage: back soon, not after 60 s
                    await self._nack(ctx, m, group, topic)
                raise ProxyError(Code.MESSAGE_NOT_FOUND, f"The client [{ctx.client_id}] is disconnected.")
            for m in found:
                core.renew.add(ctx.client_id, group, topic, m.msg_id, m.properties[POP_CK], m.reconsume_times)
        yield s.ReceiveMessageResponse(status=ok())
        for m in found:
            yield s.ReceiveMessageResponse(message=build_message(m))

    async def _nack(self, ctx: ProxyContext, m: Any, group: str, topic: str) -> None:
        with contextlib.suppress(Exception):
            h = ReceiptHandle.decode(m.properties[POP_CK])
            await self.pop.change_invisible_time_message(group, h.real_topic(topic, group), h.queue_id, h.text,
                                                         h.offset, NACK_INVISIBLE_TIME, peer=ctx.remote_address)

    def _handle(self, ctx: ProxyContext, group: str, msg_id: str, handle: str) -> str:
        """`removeReceiptHandle`: the renewed handle of an auto-renewed message, else the client's."""
        return self.core.renew.remove(ctx.client_id, group, msg_id, handle) or handle

    def _read_queues(self, topic: str) -> list[int]:
        queues = self._queue_datas(topic)  # type: ignore[attr-defined]
        return [i for qd in queues if qd.perm & 4 for i in range(qd.readQueueNums)]

    async def _ack_quietly(self, ctx: ProxyContext, h: ReceiptHandle, group: str, topic: str) -> None:
        try:
            await self._ack(ctx, h, group, topic)
        except Exception:
            pass

    async def _forward_quietly(self, ctx: ProxyContext, h: ReceiptHandle, msg_id: str, group: str, topic: str) -> None:
        try:
            await self._forward(ctx, h, msg_id, group, topic)
        except Exception:
            pass

    # ------------------------------------------------------------ ack
    async def _ack(self, ctx: ProxyContext, h: ReceiptHandle, group: str, topic: str) -> bool:
        """`ConsumerProcessor.ackMessage`: True for AckStatus.OK, False for NO_EXIST."""
        _validate_handle(h)
        rt = h.real_topic(topic, group)
        try:
            await self.pop.ack_message(group, rt, h.queue_id, h.text, h.offset, peer=ctx.remote_address)
        except Exception as e:
            if hasattr(e, "code"):
                return False
            raise
        return True

    async def ack_message(self, ctx: ProxyContext, req: Any) -> Any:
        validate_topic(req.topic.name)
        validate_consumer_group(req.group.name)
        group, topic = req.group.name, req.topic.name
        entries = []
        for e in req.entries:
            try:
                handle = self._handle(ctx, group, e.message_id, e.receipt_handle)
                done = await self._ack(ctx, ReceiptHandle.decode(handle), group, topic)
                st = ok() if done else status(Code.INTERNAL_SERVER_ERROR, "ack failed: status is abnormal")
            except ProxyError as pe:
                st = status(pe.code, pe.message)
            entries.append(s.AckMessageResultEntry(message_id=e.message_id, receipt_handle=e.receipt_handle, status=st))
        return s.AckMessageResponse(status=_combined(entries, "ack message result is empty"), entries=entries)

    # ------------------------------------------------------------ invisible duration
    async def change_invisible_duration(self, ctx: ProxyContext, req: Any) -> Any:
        validate_topic(req.topic.name)
        validate_consumer_group(req.group.name)
        ms = duration_ms(req.invisible_duration)
        validate_invisible_time(ms, 0, self.core.config.max_invisible_time_mills)
        group, topic = req.group.name, req.topic.name
        ReceiptHandle.decode(req.receipt_handle)
        h = ReceiptHandle.decode(self._handle(ctx, group, req.message_id, req.receipt_handle))
        _validate_handle(h)
        rt = h.real_topic(topic, group)
        try:
            c = await self.pop.change_invisible_time_message(group, rt, h.queue_id, h.text, h.offset, ms,
                                                             peer=ctx.remote_address)
        except Exception as e:
            if hasattr(e, "code"):
                return s.ChangeInvisibleDurationResponse(status=status(
                    Code.INTERNAL_SERVER_ERROR, "changeInvisibleDuration failed: status is abnormal"))
            raise
        handle = create_handle(c.extra_info, h.commit_log_offset)
        return s.ChangeInvisibleDurationResponse(status=ok(), receipt_handle=handle)

    # ------------------------------------------------------------ dead letters
    async def _forward(self, ctx: ProxyContext, h: ReceiptHandle, msg_id: str, group: str, topic: str) -> RemotingCommand:
        """`ProducerProcessor.forwardMessageToDeadLetterQueue`: CONSUMER_SEND_MSG_BACK with delay
        level -1 (straight to %DLQ%), then the message is acked."""
        if h.commit_log_offset < 0:
            raise proxy_exception(Code.INVALID_RECEIPT_HANDLE, "commit log offset is empty")
        hdr = ConsumerSendMsgBackRequestHeader(h.commit_log_offset, group, -1, msg_id, h.real_topic(topic, group),
                                               False, 0)
        cmd = RemotingCommand.request(RequestCode.CONSUMER_SEND_MSG_BACK, hdr.to_ext())
        cmd.language = ctx.language
        r = await self.core.invoke(cmd, self.core.channel(ctx))
        if r.code == ResponseCode.SUCCESS:
            await self._ack_quietly(ctx, h, group, topic)
        return r

    async def forward_message_to_dead_letter_queue(self, ctx: ProxyContext, req: Any) -> Any:
        validate_topic(req.topic.name)
        validate_consumer_group(req.group.name)
        h = ReceiptHandle.decode(self._handle(ctx, req.group.name, req.message_id, req.receipt_handle))
        r = await self._forward(ctx, h, req.message_id, req.group.name, req.topic.name)
        remark = r.remark if r.remark is not None else str(r.code)
        return s.ForwardMessageToDeadLetterQueueResponse(status=status(code_of_remoting_plain(r.code), remark))


def _combined(entries: list[Any], empty: str) -> Any:
    codes = {e.status.code for e in entries}
    if len(codes) > 1:
        return status(Code.MULTIPLE_RESULTS, "MULTIPLE_RESULTS")
    if len(codes) == 1:
        c = codes.pop()
        return status(c, Code.Name(c))
    return status(Code.INTERNAL_SERVER_ERROR, empty)


def _filter(sub: SubscriptionData, m: Any, max_attempts: int) -> str:
    """`PopMessageResultFilterImpl.filterMessage`."""
    if sub.expressionType == "TAG" and not sub.is_all and (m.tags or "") not in sub.tagsSet:
        return "NO_MATCH"
    if m.reconsume_times >= max_attempts:
        return "TO_DLQ"
    return "MATCH"
