"""Heartbeat, NotifyClientTermination and the Telemetry stream (`ClientActivity`).

Clients are registered with the broker the way a proxy registers them in cluster mode: a
HEART_BEAT carrying a producer group per published topic (the topic is the producer group of
a 5.x producer, so transaction check-backs find it) or the consumer group with its
subscriptions, on the client's `GrpcClientChannel`; UNREGISTER_CLIENT when it terminates.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from rmqtool.proxy.channel import GrpcClientChannel
from rmqtool.proxy.context import ProxyContext, ProxyCore
from rmqtool.proxy.pb import definition as d
from rmqtool.proxy.pb import service as s
from rmqtool.proxy.status import Code, ProxyError, ok, status
from rmqtool.proxy.validate import validate_consumer_group, validate_topic
from rmqtool.remoting import fastjson
from rmqtool.remoting.bodies import ConsumerData, HeartbeatData, ProducerData, SubscriptionData
from rmqtool.remoting.codes import RequestCode
from rmqtool.remoting.command import RemotingCommand
from rmqtool.remoting.headers import UnregisterClientRequestHeader

log = logging.getLogger("rmqtool.proxy")
_CONSUME_TYPE = {d.SIMPLE_CONSUMER: "CONSUME_ACTIVELY", d.PUSH_CONSUMER: "CONSUME_PASSIVELY"}


class TelemetryAbort(Exception):
    """Ends the Telemetry call with a gRPC status (INVALID_ARGUMENT or INTERNAL)."""

    def __init__(self, invalid: bool, details: str) -> None:
        super().__init__(details)
        self.invalid = invalid
        self.details = details


def subscription_data(entries: Any) -> list[SubscriptionData]:
    """`buildSubscriptionDataSet` via `FilterAPI.build`."""
    out = []
    for e in entries:
        etype = "SQL92" if e.expression.type == d.SQL else "TAG"
        try:
            out.append(SubscriptionData.build(e.topic.name, e.expression.expression, etype))
        except Exception as ex:
            raise ProxyError(Code.ILLEGAL_FILTER_EXPRESSION, "expression format is not correct") from ex
    return out


class ClientActivity:
    core: ProxyCore

    async def _heartbeat_broker(self, ctx: ProxyContext, channel: GrpcClientChannel, hb: HeartbeatData) -> None:
        cmd = RemotingCommand.request(RequestCode.HEART_BEAT, None, fastjson.dumpb(hb))
        cmd.language = ctx.language
        await self.core.invoke_ok(cmd, channel)

    async def register_producer(self, ctx: ProxyContext, topics: list[str]) -> GrpcClientChannel:
        channel = self.core.channel(ctx)
        await self._heartbeat_broker(ctx, channel, HeartbeatData(ctx.client_id, [ProducerData(t) for t in topics]))
        return channel

    async def register_consumer(self, ctx: ProxyContext, group: str, client_type: int,
                                entries: Any) -> GrpcClientChannel:
        channel = self.core.channel(ctx)
        cd = ConsumerData(group, _CONSUME_TYPE.get(client_type, "CONSUME_PASSIVELY"), "CLUSTERING",
                          "CONSUME_FROM_LAST_OFFSET", subscription_data(entries))
        await self._heartbeat_broker(ctx, channel, HeartbeatData(ctx.client_id, [], [cd]))
        return channel

    async def heartbeat(self, ctx: ProxyContext, req: Any) -> Any:
        settings = self.core.settings.get(ctx.client_id)
        if settings is None:
            return s.HeartbeatResponse(status=status(Code.UNRECOGNIZED_CLIENT_TYPE,
                                                     "cannot find client settings for this client"))
        ct = settings.client_type
        if ct == d.PRODUCER:
            await self.register_producer(ctx, [t.name for t in settings.publishing.topics])
        elif ct in (d.PUSH_CONSUMER, d.SIMPLE_CONSUMER):
            validate_consumer_group(req.group.name)
            await self.register_consumer(ctx, req.group.name, ct, settings.subscription.subscriptions)
        else:
            return s.HeartbeatResponse(status=status(Code.UNRECOGNIZED_CLIENT_TYPE, _client_type_name(ct)))
        return s.HeartbeatResponse(status=ok())

    async def notify_client_termination(self, ctx: ProxyContext, req: Any) -> Any:
        core = self.core
        settings = core.settings.remove(ctx.client_id)
        if settings is None:
            return s.NotifyClientTerminationResponse(status=status(
                Code.UNRECOGNIZED_CLIENT_TYPE, "cannot find client settings for this client"))
        ct = settings.client_type
        if ct == d.PRODUCER:
            groups = [("producerGroup", t.name) for t in settings.publishing.topics]
        elif ct in (d.PUSH_CONSUMER, d.SIMPLE_CONSUMER):
            validate_consumer_group(req.group.name)
            groups = [("consumerGroup", req.group.name)]
        else:
            return s.NotifyClientTerminationResponse(status=status(Code.UNRECOGNIZED_CLIENT_TYPE,
                                                                   _client_type_name(ct)))
        channel = core.channels.remove(ctx.client_id)
        if channel is not None:
            for kind, name in groups:
                h = UnregisterClientRequestHeader(ctx.client_id, **{kind: name})
                cmd = RemotingCommand.request(RequestCode.UNREGISTER_CLIENT, h.to_ext())
                cmd.language = ctx.language
                await core.invoke(cmd, channel)
            await channel.close()
        return s.NotifyClientTerminationResponse(status=ok())

    # ------------------------------------------------------------ telemetry
    async def telemetry_command(self, ctx: ProxyContext, command: Any, outbox: asyncio.Queue[Any]) -> None:
        """One command from the client's stream; answers go to `outbox` (the stream's writer)."""
        which = command.WhichOneof("command")
        try:
            if which == "settings":
                await self._client_settings(ctx, command.settings, outbox)
            elif which == "thread_stack_trace":
                self._answer(ctx, command.thread_stack_trace.nonce, command)
            elif which == "verify_message_result":
                self._answer(ctx, command.verify_message_result.nonce, command)
        except ProxyError as e:
            invalid = Code.BAD_REQUEST <= e.code < Code.INTERNAL_ERROR
            raise TelemetryAbort(invalid, f"process client telemetryCommand failed. {e.message}") from None

    def _answer(self, ctx: ProxyContext, nonce: str, command: Any) -> None:
        channel = self.core.channels.get(ctx.client_id)
        if channel is not None:
            result = command.thread_stack_trace if command.HasField("thread_stack_trace") \
                else command.verify_message_result
            channel.answer(nonce, command.status, result)

    async def _client_settings(self, ctx: ProxyContext, settings: Any, outbox: asyncio.Queue[Any]) -> None:
        """`processAndWriteClientSettings`. Java sets the channel's stream observer right after its
        registerProducer/registerConsumer return; here the stream is attached before the broker is
        told: our heartbeat may wait (a new group's retry topic is answered once on disk) after the
        broker already lists the client, and an admin request relayed in that wait (consumerStatus'
        jstack, consumeMessage) would otherwise find no stream and fail at once."""
        pubsub = settings.WhichOneof("pub_sub")
        if pubsub == "publishing":
            for t in settings.publishing.topics:
                validate_topic(t.name)
            self.core.channel(ctx).attach(outbox)
            await self.register_producer(ctx, [t.name for t in settings.publishing.topics])
        elif pubsub == "subscription":
            validate_consumer_group(settings.subscription.group.name)
            self.core.channel(ctx).attach(outbox)
            await self.register_consumer(ctx, settings.subscription.group.name, settings.client_type,
                                         settings.subscription.subscriptions)
        else:
            raise TelemetryAbort(True, "there is no publishing or subscription data in settings")
        self.core.settings.update(ctx.client_id, settings)
        outbox.put_nowait(s.TelemetryCommand(status=ok(), settings=self.core.settings.get(ctx.client_id)))


def _client_type_name(ct: int) -> str:
    try:
        return str(d.ClientType.Name(ct))
    except ValueError:
        return "UNRECOGNIZED"
