"""SimpleConsumer over POP: receive with an invisible duration, ack, change the invisible duration.

The 5.x SDKs' SimpleConsumer, spoken in remoting straight to the brokers, as Apache's proxy
speaks it for them (`ConsumerProcessor.popMessage`, `ackMessage`, `changeInvisibleDuration`):
POP_MESSAGE on every queue of a broker (queueId -1) with long polling, ACK_MESSAGE and
CHANGE_MESSAGE_INVISIBLETIME with the receipt handle built as Java's `MQClientAPIImpl` builds it
(ExtraInfoUtil), and, like the proxy's PopMessageResultFilter, a message received more than
`max_attempts` times goes to the group's DLQ (CONSUMER_SEND_MSG_BACK, delay level -1) and is
acked instead of being handed out.

    with SimpleConsumer("group", "127.0.0.1:9876", {"TopicA": "*"}) as c:
        for m in c.receive(16, invisible_duration=30):
            ...
            c.ack(m)
"""

from __future__ import annotations

import contextlib
import time
from dataclasses import dataclass

from rmqtool.client.exceptions import BrokerError, ClientError
from rmqtool.client.instance import ClientConfig, ClientInstance, resolve_instance
from rmqtool.client.lifecycle import ClientLifecycle
from rmqtool.client.pull import decode_messages, unwrap_body
from rmqtool.client.route import subscribe_queues
from rmqtool.layouts.message import MessageExt
from rmqtool.layouts.pop import (
    FIRST_POP_TIME,
    POP_CK,
    build_extra_info,
    parse_extra_info,
    parse_offset_info,
    retry_flag,
)
from rmqtool.remoting.codes import RequestCode, ResponseCode
from rmqtool.remoting.command import RemotingCommand
from rmqtool.validators import check_group

DEFAULT_MAX_ATTEMPTS = 16  # SubscriptionGroupConfig.retryMaxTimes + 1, the proxy's default


@dataclass
class ReceivedMessage:
    """A received message with what acking it takes."""

    message: MessageExt
    topic: str  # the subscribed topic
    receipt_handle: str  # ExtraInfoUtil's extraInfo (POP_CK)
    broker_name: str
    broker_addr: str
    invisible_until: int  # epoch ms

    @property
    def body(self) -> bytes:
        return self.message.body

    @property
    def delivery_attempt(self) -> int:
        return self.message.reconsume_times + 1


def attach_receipt_handles(ext: dict[str, str], msgs: list[MessageExt], broker_name: str) -> list[str]:
    """`MQClientAPIImpl.processPopResponse`: each message's receipt handle from startOffsetInfo and
    msgOffsetInfo (a redelivered message brings its own POP_CK)."""
    start = {k: v[0] for k, v in parse_offset_info(ext.get("startOffsetInfo")).items()}
    pop_time, invisible, rqid = int(ext["popTime"]), int(ext["invisibleTime"]), int(ext["reviveQid"])
    out = []
    for m in msgs:
        handle = m.properties.get(POP_CK)
        if handle is None:
            key = f"{retry_flag(m.topic)}@{m.queue_id}"
            handle = build_extra_info(start.get(key, m.queue_offset), pop_time, invisible, rqid, m.topic, broker_name,
                                      m.queue_id, m.queue_offset)
            m.properties[POP_CK] = handle
        m.properties.setdefault(FIRST_POP_TIME, str(pop_time))
        out.append(handle)
    return out


class SimpleConsumer(ClientLifecycle):
    """Receive / ack / change invisible duration, the broker keeping what is in flight."""

    def __init__(self, group: str, namesrv: str | None = None, subscriptions: dict[str, str] | None = None, *,
                 await_duration: float = 20.0, max_attempts: int = DEFAULT_MAX_ATTEMPTS,
                 instance: ClientInstance | None = None, config: ClientConfig | None = None) -> None:
        check_group(group)
        self.group = group
        self.subscriptions: dict[str, tuple[str, str]] = {t: (e, "TAG") for t, e in (subscriptions or {}).items()}
        self.await_duration = await_duration
        self.max_attempts = max_attempts
        self.instance, self._own = resolve_instance(namesrv, instance, config)
        self._next = 0

    def subscribe(self, topic: str, expression: str = "*", expression_type: str = "TAG") -> SimpleConsumer:
        self.subscriptions[topic] = (expression, expression_type)
        return self

    def _start(self) -> None:
        self.instance.start()

    def _shutdown(self) -> None:
        self.instance.shutdown()

    # -- receive ---------------------------------------------------------------------------------
    def _targets(self) -> list[tuple[str, str, str]]:
        """(topic, broker name, address) for every subscribed topic's readable brokers."""
        out = []
        for topic in self.subscriptions:
            route = self.instance.run(self.instance.update_route(topic))
            if route is None:
                raise ClientError(f"Can not find Message Queue for this topic, {topic}")
            for name in sorted({q.broker_name for q in subscribe_queues(route, topic)}):
                addr = self.instance.master_addr(name) or self.instance.any_addr(name)
                if addr is not None:
                    out.append((topic, name, addr))
        if not out:
            raise ClientError(f"no readable broker for {sorted(self.subscriptions)}")
        return out

    def receive(self, max_messages: int = 16, invisible_duration: float = 30.0,
                await_duration: float | None = None) -> list[ReceivedMessage]:
        """Up to `max_messages` (at most 32) messages, each invisible to others for
        `invisible_duration` s unless acked; waits up to `await_duration` s for the first."""
        if not self._started:
            raise ClientError("the consumer is not started")
        if not 1 <= max_messages <= 32:
            raise ValueError("max_messages must be 1..32 (a broker refuses more)")
        wait = self.await_duration if await_duration is None else await_duration
        targets = self._targets()
        deadline = time.monotonic() + wait
        while True:
            topic, name, addr = targets[self._next % len(targets)]
            self._next += 1
            # with several brokers each gets a short hold, so one idle broker does not starve the rest
            hold = max(0.0, deadline - time.monotonic()) if len(targets) == 1 else min(1.0, wait)
            got = self._pop(topic, name, addr, max_messages, invisible_duration, hold)
            if got or time.monotonic() >= deadline:
                return got

    def _pop(self, topic: str, name: str, addr: str, max_messages: int, invisible: float,
             hold: float) -> list[ReceivedMessage]:
        expression, etype = self.subscriptions[topic]
        poll_ms = int(hold * 1000)
        ext = {"consumerGroup": self.group, "topic": topic, "queueId": -1, "maxMsgNums": max_messages,
               "invisibleTime": int(invisible * 1000), "pollTime": poll_ms, "bornTime": int(time.time() * 1000),
               "initMode": 0, "expType": etype, "exp": expression}
        cmd = RemotingCommand.request(RequestCode.POP_MESSAGE, ext)
        resp = self.instance.run(self.instance.invoke(addr, cmd, poll_ms / 1000 + 5))
        if resp.code in (ResponseCode.POLLING_TIMEOUT, ResponseCode.POLLING_FULL, ResponseCode.PULL_NOT_FOUND):
            return []
        if resp.code != ResponseCode.SUCCESS:
            raise BrokerError(resp.code, resp.remark, addr)
        msgs = decode_messages(resp.body)
        try:
            handles = attach_receipt_handles(resp.ext_fields, msgs, name)
        except (KeyError, ValueError) as e:
            raise BrokerError(resp.code, f"bad pop response header: {e}", addr) from None
        until = int(resp.ext_fields["popTime"]) + int(resp.ext_fields["invisibleTime"])
        out = []
        for m, h in zip(msgs, handles, strict=True):
            unwrap_body(m)
            r = ReceivedMessage(m, topic, h, name, addr, until)
            if m.reconsume_times >= self.max_attempts:
                self._to_dlq(r)
                continue
            out.append(r)
        return out

    def _to_dlq(self, m: ReceivedMessage) -> None:
        """`forwardMessageToDeadLetterQueue`: send back with delay level -1, then ack."""
        e = parse_extra_info(m.receipt_handle)
        ext = {"offset": m.message.commit_log_offset, "group": self.group, "delayLevel": -1,
               "originMsgId": m.message.msg_id, "originTopic": e.real_topic(m.topic, self.group),
               "unitMode": "false", "maxReconsumeTimes": 0}
        resp = self.instance.run(self.instance.invoke(m.broker_addr, RemotingCommand.request(
            RequestCode.CONSUMER_SEND_MSG_BACK, ext), 5))
        if resp.code == ResponseCode.SUCCESS:
            with contextlib.suppress(BrokerError):
                self.ack(m)

    # -- ack / change invisible duration -----------------------------------------------------------
    def _handle_fields(self, m: ReceivedMessage) -> dict[str, object]:
        e = parse_extra_info(m.receipt_handle)
        return {"consumerGroup": self.group, "topic": e.real_topic(m.topic, self.group), "queueId": e.queue_id,
                "extraInfo": m.receipt_handle, "offset": e.queue_offset}

    def ack(self, m: ReceivedMessage) -> None:
        """Done with `m`: it never comes back. BrokerError if the broker refuses the handle."""
        resp = self.instance.run(self.instance.invoke(m.broker_addr, RemotingCommand.request(
            RequestCode.ACK_MESSAGE, self._handle_fields(m)), 5))
        if resp.code != ResponseCode.SUCCESS:
            raise BrokerError(resp.code, resp.remark, m.broker_addr)

    def change_invisible_duration(self, m: ReceivedMessage, invisible_duration: float) -> None:
        """Make `m` invisible for `invisible_duration` s from now; its receipt handle changes."""
        ext = self._handle_fields(m)
        ext["invisibleTime"] = int(invisible_duration * 1000)
        resp = self.instance.run(self.instance.invoke(m.broker_addr, RemotingCommand.request(
            RequestCode.CHANGE_MESSAGE_INVISIBLETIME, ext), 5))
        if resp.code != ResponseCode.SUCCESS:
            raise BrokerError(resp.code, resp.remark, m.broker_addr)
        try:
            pop_time, invisible = int(resp.ext_fields["popTime"]), int(resp.ext_fields["invisibleTime"])
            rqid = int(resp.ext_fields["reviveQid"])
        except (KeyError, ValueError) as e:
            raise BrokerError(resp.code, f"bad change-invisible-time response header: {e}", m.broker_addr) from None
        e = parse_extra_info(m.receipt_handle)
        m.receipt_handle = build_extra_info(e.queue_offset, pop_time, invisible, rqid, str(ext["topic"]),
                                            m.broker_name, e.queue_id, e.queue_offset)
        m.message.properties[POP_CK] = m.receipt_handle
        m.invisible_until = pop_time + invisible
