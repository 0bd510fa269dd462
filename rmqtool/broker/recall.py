"""RECALL_MESSAGE 370: take back a timer (delay) message before it is delivered
(`RecallMessageProcessor`, `RecallMessageHandle` of Apache RocketMQ 5.3+).

A send of a timer message answers with a recall handle (`SendMessageProcessor.attachRecallHandle`):
URL-safe base64 of "v1 <topic> <brokerName> <TIMER_OUT_MS + 1> <UNIQ_KEY>". Recalling it puts a
small marker message on the topic with TIMER_DEL_UNIQKEY = "<topic>+<UNIQ_KEY>" and the same
delivery time: the put hook parks it on the timer wheel in the same slot, and the timer store
drops the message that key names when the slot fires (store/timer: delete markers), so it is
never delivered. Off unless broker.conf says `recallMessageEnable=true`, as in Apache's broker.
"""

from __future__ import annotations

import base64
import binascii
import time
from typing import Any

from rmqtool.broker.confvalues import conf_flag
from rmqtool.layouts import properties as P
from rmqtool.layouts.message import MessageExt
from rmqtool.remoting.codes import ResponseCode
from rmqtool.remoting.command import RemotingCommand
from rmqtool.remoting.headers import HeaderError, RecallMessageRequestHeader
from rmqtool.remoting.transport import Connection
from rmqtool.store.timer.timerstore import build_delete_key
from rmqtool.validators import RETRY_GROUP_TOPIC_PREFIX

RECALL_MESSAGE_TAG = "_RECALL_TAG_"
HANDLE_VERSION = "v1"


def build_recall_handle(topic: str, broker_name: str, timestamp: str, msg_id: str) -> str:
    """`RecallMessageHandle.HandleV1.buildHandle` (no checks, as in Java)."""
    raw = " ".join((HANDLE_VERSION, topic, broker_name, timestamp, msg_id))
    return base64.urlsafe_b64encode(raw.encode("utf-8")).decode("ascii")


def decode_recall_handle(handle: str | None) -> tuple[str, str, str, str]:
    """`RecallMessageHandle.decodeHandle`: (topic, brokerName, timestamp, messageId); ValueError
    with Java's DecoderException message for anything else."""
    if not handle:
        raise ValueError("recall handle is invalid")
    try:
        raw = base64.urlsafe_b64decode(_padded(handle).encode("utf-8")).decode("utf-8", "replace")
    except (binascii.Error, ValueError):
        raise ValueError("recall handle is invalid") from None
    items = raw.split(" ")
    if items[0] != HANDLE_VERSION or len(items) < 5:
        raise ValueError("recall handle is invalid")
    return items[1], items[2], items[3], items[4]


def _padded(text: str) -> str:
    """Java's URL decoder takes a handle with or without its '=' padding."""
    if any(c not in "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_=" for c in text):
        raise ValueError("recall handle is invalid")
    return text + "=" * (-len(text) % 4)


def recall_handle_of(msg: MessageExt, broker_name: str) -> str | None:
    """`attachRecallHandle`: a handle for a message the put hook parked on the timer wheel."""
    out = msg.properties.get(P.TIMER_OUT_MS)
    real = msg.properties.get(P.REAL_TOPIC)
    if out is None or real is None or real.startswith(RETRY_GROUP_TOPIC_PREFIX):
        return None
    try:
        stamp = str(int(out) + 1)  # "consider of floor"
    except ValueError:
        return None
    return build_recall_handle(real, broker_name, stamp, msg.properties.get(P.UNIQ_KEY, ""))


class RecallProcessor:
    async def process_recall_message(self: Any, cmd: RemotingCommand, conn: Connection) -> RemotingCommand:
        def refuse(code: int, remark: str) -> RemotingCommand:
            r = cmd.response(code, remark=remark)
            r.ext_fields["MSG_REGION"] = str(self.region_id or "DefaultRegion")
            return r

        try:
            h = RecallMessageRequestHeader.from_ext(cmd.ext_fields)
        except HeaderError as e:
            return refuse(ResponseCode.SYSTEM_ERROR, str(e))
        if not conf_flag(self.config.extra, "recallMessageEnable", False):
            return refuse(ResponseCode.NO_PERMISSION, "recall failed, operation is forbidden")
        if self.config.is_slave:
            return refuse(ResponseCode.SLAVE_NOT_AVAILABLE, "recall failed, broker service not available")
        if self.local.topics.select(h.topic) is None:
            return refuse(ResponseCode.TOPIC_NOT_EXIST, f"recall failed, the topic[{h.topic}] not exist")
        try:
            topic, broker_name, stamp, msg_id = decode_recall_handle(h.recallHandle)
        except ValueError as e:
            return refuse(ResponseCode.ILLEGAL_OPERATION, str(e))
        if h.topic != topic:
            return refuse(ResponseCode.ILLEGAL_OPERATION, "recall failed, topic not match")
        if broker_name != self.broker_name:
            return refuse(ResponseCode.ILLEGAL_OPERATION, "recall failed, broker service not available")
        try:
            timestamp = int(stamp)
        except ValueError:
            timestamp = -1
        left = timestamp - int(time.time() * 1000)
        if left <= 0 or left >= self.store.config.timer_max_delay_sec * 1000:
            return refuse(ResponseCode.ILLEGAL_OPERATION, "recall failed, timestamp invalid")
        marker = self._recall_marker(h.producerGroup, topic, stamp, msg_id, conn)
        try:
            result = await self.run(self.store.put_message, marker)
        except Exception:
            result = None
        status = str(getattr(getattr(result, "status", None), "name", getattr(result, "status", "")))
        if status not in ("PUT_OK", "FLUSH_DISK_TIMEOUT", "FLUSH_SLAVE_TIMEOUT", "SLAVE_NOT_AVAILABLE"):
            return refuse(ResponseCode.SYSTEM_ERROR, "recall failed, execute error")
        if status == "PUT_OK":
            self.count_put(marker.topic, 1)
        r = cmd.response()
        r.ext_fields.update({"msgId": msg_id, "MSG_REGION": str(self.region_id or "DefaultRegion")})
        return r

    def _recall_marker(self: Any, group: str | None, topic: str, stamp: str, msg_id: str,
                       conn: Connection) -> MessageExt:
        """`RecallMessageProcessor.buildMessage`."""
        now = int(time.time() * 1000)
        props = {P.TIMER_DEL_UNIQKEY: build_delete_key(topic, msg_id), P.UNIQ_KEY: msg_id,
                 P.TIMER_DELIVER_MS: stamp, P.BORN_TIMESTAMP: str(now), P.TRACE_CONTEXT: "", P.TAGS: RECALL_MESSAGE_TAG}
        if group is not None:
            props[P.PGROUP] = group
        return MessageExt(topic=topic, body=b"0", queue_id=0, properties=P.broker_order(props), born_timestamp=now,
                          born_host=conn.peer, store_host=self.local.store_host)
