"""Remoting handlers of the POP request codes: headers in, `PopService` call, Java's answer out.

POP_MESSAGE (200050), ACK_MESSAGE (200051), BATCH_ACK_MESSAGE (200151),
CHANGE_MESSAGE_INVISIBLETIME (200053) and NOTIFICATION (200054), answered as Java 5.3.3's
processors answer them (response header fields, codes, remarks: a SUCCESS of
ChangeInvisibleTime or Notification keeps Java's "not set any response code" remark).
"""

from __future__ import annotations

from typing import Any

from rmqtool.layouts.pop import decode_batch_ack_body
from rmqtool.remoting.codes import RequestCode, ResponseCode
from rmqtool.remoting.command import RESPONSE_FLAG, RemotingCommand
from rmqtool.remoting.popheaders import (
    AckMessageRequestHeader,
    ChangeInvisibleTimeRequestHeader,
    NotificationRequestHeader,
    PopMessageRequestHeader,
)
from rmqtool.remoting.transport import Connection

from .service import NOT_SET, PopError, PopService

_POP_HEADER_ZERO = {"popTime": "0", "invisibleTime": "0", "reviveQid": "0", "restNum": "0"}
_CHANGE_HEADER_ZERO = {"popTime": "0", "invisibleTime": "0", "reviveQid": "0"}


def _refused(cmd: RemotingCommand, e: PopError, header: dict[str, str] | None) -> RemotingCommand:
    """Java's refusals carry the processor's response header (its fields at 0) unless an exception
    ended the processor."""
    return cmd.response(e.code, None if e.exception else header, remark=e.remark)


def _peer(conn: Connection) -> str:
    return f"/{conn.peer}" if getattr(conn, "peer", None) else "unknown"


class PopProcessor:
    """The handlers of one PopService, for BrokerController.handlers."""

    def __init__(self, service: PopService) -> None:
        self.service = service

    def handlers(self) -> dict[int, Any]:
        return {RequestCode.POP_MESSAGE: self.process_pop, RequestCode.ACK_MESSAGE: self.process_ack,
                RequestCode.BATCH_ACK_MESSAGE: self.process_batch_ack,
                RequestCode.CHANGE_MESSAGE_INVISIBLETIME: self.process_change_invisible_time,
                RequestCode.NOTIFICATION: self.process_notification}

    async def process_pop(self, cmd: RemotingCommand, conn: Connection) -> RemotingCommand:
        h = PopMessageRequestHeader.from_ext(cmd.ext_fields)
        try:
            r = await self.service.pop(h.consumerGroup, h.topic, h.queue_id, h.maxMsgNums, h.invisibleTime,
                                       h.pollTime, h.exp, h.expType, h.order, h.initMode, h.attemptId, h.bornTime,
                                       _peer(conn))
        except PopError as e:
            return _refused(cmd, e, _POP_HEADER_ZERO)
        return RemotingCommand(r.code, r.header(), r.body() if r.found else b"", cmd.opaque, RESPONSE_FLAG, r.remark)

    async def process_ack(self, cmd: RemotingCommand, conn: Connection) -> RemotingCommand:
        h = AckMessageRequestHeader.from_ext(cmd.ext_fields)
        try:
            await self.service.ack_message(h.consumerGroup, h.topic, h.queueId, h.extraInfo, h.offset, _peer(conn))
        except PopError as e:
            return cmd.response(e.code, remark=e.remark)
        return cmd.response(ResponseCode.SUCCESS)

    async def process_batch_ack(self, cmd: RemotingCommand, conn: Connection) -> RemotingCommand:
        acks = []
        broker_name = None
        if cmd.body:
            try:
                broker_name, acks = decode_batch_ack_body(cmd.body)
            except ValueError as e:
                return cmd.response(ResponseCode.SYSTEM_ERROR, remark=f"com.alibaba.fastjson.JSONException: {e}")
        try:
            await self.service.batch_ack(acks, broker_name, _peer(conn))
        except PopError as e:
            return cmd.response(e.code, remark=e.remark)
        return cmd.response(ResponseCode.SUCCESS)

    async def process_change_invisible_time(self, cmd: RemotingCommand, conn: Connection) -> RemotingCommand:
        h = ChangeInvisibleTimeRequestHeader.from_ext(cmd.ext_fields)
        try:
            r = await self.service.change_invisible_time_message(h.consumerGroup, h.topic, h.queueId, h.extraInfo,
                                                                 h.offset, h.invisibleTime, _peer(conn))
        except PopError as e:
            return _refused(cmd, e, _CHANGE_HEADER_ZERO)
        ext = {"popTime": r.pop_time, "invisibleTime": r.invisible_time, "reviveQid": r.revive_qid}
        return cmd.response(ResponseCode.SUCCESS, ext, remark=NOT_SET)

    async def process_notification(self, cmd: RemotingCommand, conn: Connection) -> RemotingCommand:
        h = NotificationRequestHeader.from_ext(cmd.ext_fields)
        try:
            has_msg, full = await self.service.notification(h.consumerGroup, h.topic, h.queueId, h.pollTime,
                                                            h.bornTime, h.order, h.attemptId, _peer(conn))
        except PopError as e:
            return _refused(cmd, e, {"hasMsg": "false", "pollingFull": "false"})
        return cmd.response(ResponseCode.SUCCESS, {"hasMsg": "true" if has_msg else "false",
                                                   "pollingFull": "true" if full else "false"}, remark=NOT_SET)
