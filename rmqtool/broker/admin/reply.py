"""Request-reply: SEND_REPLY_MESSAGE 324 / _V2 325 in, PUSH_REPLY_MESSAGE_TO_CLIENT 326 out.

`ReplyMessageProcessor` of the Java broker. A requester's message carries REPLY_TO_CLIENT (its
client id) and CORRELATION_ID; the replier sends its answer (MSG_TYPE=reply, on the cluster's
`<cluster>_REPLY_TOPIC`) with SEND_REPLY_MESSAGE; the broker pushes it at once to the channel of
the producer whose client id REPLY_TO_CLIENT names, with PUSH_REPLY_TIME added, and answers the
replier with the push's outcome: SUCCESS (msgId "0", queue offset 0) or SYSTEM_ERROR with Java's
remark. As with Java's `storeReplyMessageEnable` (on by default) the reply is also stored, and a
stored reply's answer carries its offset msgId and queue offset.
"""

from __future__ import annotations

import logging
import random
from typing import Any

from rmqtool.errors import RemotingError
from rmqtool.layouts import properties as P
from rmqtool.layouts.message import MessageExt
from rmqtool.remoting.codes import RequestCode, ResponseCode
from rmqtool.remoting.command import RemotingCommand
from rmqtool.remoting.headers import send_header_from_ext
from rmqtool.remoting.transport import Connection

log = logging.getLogger("rmqtool.broker")

REPLY_TO_CLIENT = "REPLY_TO_CLIENT"
PUSH_REPLY_TIME = "PUSH_REPLY_TIME"
PUSH_TIMEOUT_S = 10.0  # Broker2Client.callClient


class ReplyProcessor:
    def find_producer_channel(self: Any, client_id: str) -> Connection | None:
        """`ProducerManager.findChannel(clientId)`."""
        for chans in self.clients.producers.values():
            for conn, info in chans.items():
                if info.client_id == client_id and not conn.closed.is_set():
                    return conn
        return None

    async def process_send_reply(self: Any, cmd: RemotingCommand, conn: Connection) -> RemotingCommand:
        # V1 names with 324, V2 letters with 325 (`parseRequestHeader`)
        h = send_header_from_ext(10 if cmd.code == RequestCode.SEND_REPLY_MESSAGE else 310, cmd.ext_fields)
        err = self._msg_check(cmd, h)
        if err is not None:
            return err
        tc = self.local.topics.select(h.topic)
        queue_id = h.queueId if h.queueId >= 0 else random.randrange(max(1, tc.write_queue_nums))
        props = P.decode_properties(h.properties or "")
        self.stamp_region(props)
        pushed, remark = await self._push_reply(cmd, h, props, conn)
        ext: dict[str, str] = {"MSG_REGION": str(self.region_id), "TRACE_ON": str(self.trace_on)}
        if not pushed:
            return cmd.response(ResponseCode.SYSTEM_ERROR, ext, remark=remark)
        ext.update({"msgId": "0", "queueId": str(queue_id), "queueOffset": "0"})
        msg = MessageExt(h.topic, cmd.body, queue_id, h.flag, props, h.sysFlag, h.bornTimestamp, conn.peer,
                         reconsume_times=h.reconsumeTimes or 0)
        try:
            result = await self.run(self.local.send, msg)
        except Exception as e:  # noqa: BLE001 - Java logs a failed put of a pushed reply and answers the push
            log.warning("storing reply on %s failed: %s", h.topic, e)
            return cmd.response(ResponseCode.SUCCESS, ext)
        if getattr(getattr(result, "status", None), "name", str(getattr(result, "status", ""))) == "PUT_OK":
            self.stats["put"] += 1
            ext.update({"msgId": result.offset_msg_id, "queueOffset": str(result.queue_offset)})
        return cmd.response(ResponseCode.SUCCESS, ext)

    async def _push_reply(self: Any, cmd: RemotingCommand, h: Any, props: dict[str, str],
                          conn: Connection) -> tuple[bool, str | None]:
        sender = props.get(REPLY_TO_CLIENT)
        if sender is None:
            return False, f"reply message properties[{REPLY_TO_CLIENT}] is null"
        target = self.find_producer_channel(sender)
        if target is None:
            return False, f"push reply message fail, channel of <{sender}> not found."
        props[PUSH_REPLY_TIME] = str(self.clock())
        peer = conn.peer
        header = {
            "producerGroup": h.producerGroup, "topic": h.topic, "defaultTopic": h.defaultTopic,
            "defaultTopicQueueNums": h.defaultTopicQueueNums, "queueId": h.queueId, "sysFlag": h.sysFlag,
            "bornTimestamp": h.bornTimestamp, "flag": h.flag, "properties": P.encode_properties(props),
            "reconsumeTimes": h.reconsumeTimes, "unitMode": "true" if h.unitMode else "false",
            "bornHost": f"{peer.ip}:{peer.port}" if hasattr(peer, "ip") else str(peer),
            "storeHost": self.broker_addr, "storeTimestamp": self.clock(),
        }
        push = RemotingCommand.request(RequestCode.PUSH_REPLY_MESSAGE_TO_CLIENT, header, cmd.body)
        try:
            r = await target.request(push, PUSH_TIMEOUT_S)
        except RemotingError:
            return False, f"push reply message to {sender}fail."
        if r.code != ResponseCode.SUCCESS:
            return False, f"push reply message to {sender}fail."
        return True, None
