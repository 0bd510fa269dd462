"""Request-reply over RocketMQ (`DefaultMQProducer.request`, `MessageUtil.createReplyMessage`).

The requester's message carries CORRELATION_ID (a fresh UUID), REPLY_TO_CLIENT (its client id)
and TTL (the timeout in ms) and is sent as any message; a consumer answers it with
`create_reply_message(request, body)`, a message to `<cluster>_REPLY_TOPIC` with MSG_TYPE=reply,
which the producer sends with SEND_REPLY_MESSAGE_V2 (325); the broker pushes it to the requester
(PUSH_REPLY_MESSAGE_TO_CLIENT 326), whose client instance hands it to the waiting request by its
correlation id (`ClientRemotingProcessor.receiveReplyMessage`, `RequestFutureHolder`).
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from typing import Any

from rmqtool.client.exceptions import ClientError
from rmqtool.layouts import properties as P
from rmqtool.layouts.constants import COMPRESSED_FLAG, COMPRESSION_TYPE_COMPARATOR
from rmqtool.layouts.message import MessageExt, decompress_body
from rmqtool.layouts.net import Host
from rmqtool.remoting.codes import ResponseCode
from rmqtool.remoting.command import RemotingCommand

log = logging.getLogger("rmqtool.client")

CORRELATION_ID = "CORRELATION_ID"
REPLY_TO_CLIENT = "REPLY_TO_CLIENT"
MESSAGE_TTL = "TTL"
MESSAGE_TYPE = "MSG_TYPE"
REPLY_MESSAGE_FLAG = "reply"
REPLY_TOPIC_POSTFIX = "_REPLY_TOPIC"


class RequestTimeoutError(ClientError):
    """No reply within the request's timeout (Java's RequestTimeoutException)."""


def reply_topic(cluster: str) -> str:
    """`MixAll.getReplyTopic`."""
    return cluster + REPLY_TOPIC_POSTFIX


def is_reply(props: dict[str, str]) -> bool:
    return props.get(MESSAGE_TYPE) == REPLY_MESSAGE_FLAG


def create_reply_message(request: Any, body: bytes | str) -> Any:
    """`MessageUtil.createReplyMessage`: the answer to a received request message."""
    from rmqtool.client.message import Message

    props = getattr(request, "properties", {}) or {}
    cluster = props.get(P.CLUSTER)
    if cluster is None:
        raise ClientError(f"create reply message fail, requestMessage error, property[{P.CLUSTER}] is null.")
    reply_props = {MESSAGE_TYPE: REPLY_MESSAGE_FLAG}
    for key in (CORRELATION_ID, REPLY_TO_CLIENT, MESSAGE_TTL):
        if props.get(key) is not None:
            reply_props[key] = props[key]
    return Message(reply_topic(cluster), body, properties=reply_props)


class RequestFutures:
    """`RequestFutureHolder`: correlation id -> the future of its reply."""

    def __init__(self) -> None:
        self.table: dict[str, asyncio.Future[MessageExt]] = {}

    def prepare(self, msg: Any, client_id: str, timeout_s: float) -> tuple[str, asyncio.Future[MessageExt]]:
        """Mark `msg` as a request (`prepareSendRequest`) and register its future."""
        correlation = str(uuid.uuid4())
        msg.properties[CORRELATION_ID] = correlation
        msg.properties[REPLY_TO_CLIENT] = client_id
        msg.properties[MESSAGE_TTL] = str(int(timeout_s * 1000))
        fut: asyncio.Future[MessageExt] = asyncio.get_running_loop().create_future()
        self.table[correlation] = fut
        return correlation, fut

    def forget(self, correlation: str) -> None:
        self.table.pop(correlation, None)

    def receive(self, cmd: RemotingCommand) -> RemotingCommand:
        """PUSH_REPLY_MESSAGE_TO_CLIENT: the reply as a MessageExt, to its waiting request."""
        ext = cmd.ext_fields or {}
        try:
            msg = reply_from_push(cmd)
        except (ValueError, KeyError) as e:
            log.warning("bad reply push: %s", e)
            return cmd.response(ResponseCode.SYSTEM_ERROR, remark=str(e))
        correlation = msg.properties.get(CORRELATION_ID)
        fut = self.table.pop(correlation, None) if correlation is not None else None
        if fut is None:
            log.warning("receive reply message, but not matched any request, CorrelationId: %s, reply from host: %s",
                        correlation, ext.get("bornHost"))
        elif not fut.done():
            fut.set_result(msg)
        return cmd.response()


def _host(text: str | None) -> Host:
    if not text:
        return Host("127.0.0.1", 0)
    ip, _, port = text.rpartition(":")
    return Host(ip or text, int(port) if port.isdigit() else 0)


def reply_from_push(cmd: RemotingCommand) -> MessageExt:
    """The MessageExt `receiveReplyMessage` builds from the ReplyMessageRequestHeader and body."""
    ext = cmd.ext_fields or {}
    sys_flag = int(ext.get("sysFlag", "0") or 0)
    body = cmd.body or b""
    if sys_flag & COMPRESSED_FLAG:
        body = decompress_body(body, sys_flag)
        sys_flag &= ~(COMPRESSED_FLAG | COMPRESSION_TYPE_COMPARATOR)
    return MessageExt(
        topic=ext["topic"], body=body, queue_id=int(ext.get("queueId", "0") or 0), flag=int(ext.get("flag", "0") or 0),
        properties=P.decode_properties(ext.get("properties") or ""), sys_flag=sys_flag,
        born_timestamp=int(ext.get("bornTimestamp", "0") or 0), born_host=_host(ext.get("bornHost")),
        store_timestamp=int(ext.get("storeTimestamp", "0") or 0), store_host=_host(ext.get("storeHost")),
        reconsume_times=int(ext.get("reconsumeTimes", "0") or 0))
