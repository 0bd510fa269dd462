"""GET_CONSUMER_RUNNING_INFO (307) and CONSUME_MESSAGE_DIRECTLY (309): admin requests the broker
passes on to one consumer (`AdminBrokerProcessor.callConsumer` of the Java broker).

mqadmin's consumerStatus (with jstack) and consumeMessage ask the broker; the broker finds the
client's channel in the group and asks it in turn, answering with the client's response. For a
5.x client on serve's gRPC endpoint the channel is a GrpcClientChannel, which puts the question
to the client on its Telemetry stream (PrintThreadStackTraceCommand, VerifyMessageCommand).
"""

from __future__ import annotations

from typing import Any

from rmqtool.errors import RemotingError
from rmqtool.layouts.msgid import decode_offset_msg_id
from rmqtool.remoting.codes import RequestCode, ResponseCode
from rmqtool.remoting.command import RemotingCommand

V3_1_8_SNAPSHOT = 77  # MQVersion.Version ordinal: older clients cannot answer
CALL_CLIENT_TIMEOUT_S = 10.0  # Broker2Client.callClient


# RemotingHelper.exceptionSimpleDesc of what decodeMessageId throws for an id too short (JDK 17)
DECODE_MSG_ID_FAILED = "java.nio.BufferUnderflowException, java.base/java.nio.HeapByteBuffer.get(HeapByteBuffer.java:183)"


class ConsumerRelayProcessor:
    def __init__(self, controller: Any) -> None:
        self.controller = controller

    def handlers(self) -> dict[int, Any]:
        return {RequestCode.GET_CONSUMER_RUNNING_INFO: self.process_get_consumer_running_info,
                RequestCode.CONSUME_MESSAGE_DIRECTLY: self.process_consume_message_directly}

    async def process_get_consumer_running_info(self, cmd: RemotingCommand, conn: Any) -> RemotingCommand:
        ext = cmd.ext_fields
        return await self._call_consumer(cmd, ext.get("consumerGroup", ""), ext.get("clientId", ""), cmd.body)

    async def process_consume_message_directly(self, cmd: RemotingCommand, conn: Any) -> RemotingCommand:
        """The message named by its offset msgId goes along as the body, as Java sends it."""
        ctl = self.controller
        ext = cmd.ext_fields
        ext["brokerName"] = ctl.broker_name
        topic, group = ext.get("topic"), ext.get("consumerGroup", "")
        tc = ctl.local.topics.select(topic) if topic else None
        if tc is not None:
            ext["topicSysFlag"] = str(tc.topic_sys_flag)
        sub = ctl.local.subscriptions.find(group) if group else None
        if sub is not None:
            ext["groupSysFlag"] = str(sub.group_sys_flag)
        body = cmd.body
        try:
            offset = decode_offset_msg_id(ext.get("msgId", "")).commit_log_offset
        except ValueError:  # MessageDecoder.decodeMessageId reads past its few bytes; the request fails
            return cmd.response(ResponseCode.SYSTEM_ERROR, remark=DECODE_MSG_ID_FAILED)
        if offset >= 0:
            from rmqtool.broker.admin.queries import _record_bytes

            raw = await ctl.run(_record_bytes, ctl.store, offset)
            if raw:
                body = raw
        return await self._call_consumer(cmd, group, ext.get("clientId", ""), body)

    async def _call_consumer(self, cmd: RemotingCommand, group: str, client_id: str, body: bytes) -> RemotingCommand:
        info = self._find_channel(group, client_id)
        if info is None:
            return cmd.response(ResponseCode.SYSTEM_ERROR, remark=f"The Consumer <{group}> <{client_id}> not online")
        if info.version < V3_1_8_SNAPSHOT:
            return cmd.response(ResponseCode.SYSTEM_ERROR, remark=f"The Consumer <{client_id}> Version <{info.version}> "
                                                                   "too low to finish, please upgrade it to V3_1_8_SNAPSHOT")
        request = RemotingCommand.request(cmd.code, dict(cmd.ext_fields), body)
        try:
            answer = await info.conn.request(request, CALL_CLIENT_TIMEOUT_S)
        except RemotingError as e:
            text = str(e)
            if "no response" in text:
                return cmd.response(ResponseCode.CONSUME_MSG_TIMEOUT,
                                    remark=f"consumer <{group}> <{client_id}> Timeout: {text}")
            return cmd.response(ResponseCode.SYSTEM_ERROR,
                                remark=f"invoke consumer <{group}> <{client_id}> Exception: {text}")
        return RemotingCommand(answer.code, dict(answer.ext_fields), answer.body, cmd.opaque, answer.flag, answer.remark)

    def _find_channel(self, group: str, client_id: str) -> Any:
        g = self.controller.clients.consumers.get(group)
        if g is None:
            return None
        for info in g.channels.values():
            if info.client_id == client_id:
                return info
        return None
