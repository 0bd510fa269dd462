"""Per-call context (`ProxyContext`, `ContextInitPipeline`) and what the activities share."""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from typing import Any

from rmqtool.layouts.net import Host
from rmqtool.proxy.channel import GrpcChannelManager, GrpcClientChannel, parse_peer
from rmqtool.proxy.config import ProxyConfig
from rmqtool.proxy.renew import ReceiptHandleManager
from rmqtool.proxy.settings import ClientSettingsManager
from rmqtool.proxy.status import Code, ProxyError, remoting_error
from rmqtool.proxy.transaction import TransactionDataManager
from rmqtool.remoting.command import RemotingCommand

log = logging.getLogger("rmqtool.proxy")

# GrpcConstants: the metadata keys the 5.x SDKs send with every call
CLIENT_ID = "x-mq-client-id"
LANGUAGE = "x-mq-language"
CLIENT_VERSION = "x-mq-client-version"
NAMESPACE = "x-mq-namespace"


@dataclass
class ProxyContext:
    client_id: str
    language: str
    client_version: str
    peer: Host
    namespace: str = ""

    @property
    def remote_address(self) -> str:
        return f"{self.peer.ip}:{self.peer.port}"

    @classmethod
    def from_grpc(cls, context: Any) -> ProxyContext:
        md: dict[str, str] = {}
        for item in context.invocation_metadata() or ():
            key, value = item[0], item[1]
            if isinstance(value, bytes):
                continue
            md[key.lower()] = value
        return cls(md.get(CLIENT_ID, ""), md.get(LANGUAGE, "JAVA") or "JAVA", md.get(CLIENT_VERSION, ""),
                   parse_peer(context.peer() or ""), md.get(NAMESPACE, ""))

    def require_client_id(self) -> None:
        """`validateContext`."""
        if not self.client_id.strip():
            raise ProxyError(Code.CLIENT_ID_REQUIRED, "client id cannot be empty")


class ProxyCore:
    """The broker, the configuration and the per-client state the activities work with."""

    def __init__(self, controller: Any, config: ProxyConfig | None = None) -> None:
        self.controller = controller
        self.config = config or ProxyConfig()
        self.transactions = TransactionDataManager(self.config.transaction_data_expire_millis,
                                                   self.config.transaction_data_max_num)
        self.settings = ClientSettingsManager(self)
        self.channels = GrpcChannelManager(self.transactions, lambda cid: self.settings.table.pop(cid, None))
        self.renew = ReceiptHandleManager(self)
        self.local_host = Host("127.0.0.1", 0)
        self.grpc_port = self.config.grpc_server_port

    @property
    def broker_name(self) -> str:
        return str(self.controller.broker_name)

    def channel(self, ctx: ProxyContext) -> GrpcClientChannel:
        return self.channels.create(ctx.client_id, ctx.peer, self.local_host)

    async def invoke(self, cmd: RemotingCommand, channel: Any) -> RemotingCommand:
        """One remoting request to the broker of this process, as the proxy sends it over TCP."""
        r = self.controller.handle(cmd, channel)
        if r is not None and not isinstance(r, RemotingCommand):
            r = await r
        if r is None:
            raise ProxyError(Code.INTERNAL_SERVER_ERROR, f"no answer to request code {cmd.code}")
        return r

    async def invoke_oneway(self, cmd: RemotingCommand, channel: Any) -> None:
        """A oneway request: the broker's answer, if it makes one, goes nowhere."""
        r = self.controller.handle(cmd, channel)
        if r is not None and not isinstance(r, RemotingCommand):
            await r

    async def invoke_ok(self, cmd: RemotingCommand, channel: Any) -> RemotingCommand:
        r = await self.invoke(cmd, channel)
        if r.code != 0:
            raise remoting_error(r.code, r.remark)
        return r

    def topic_config(self, topic: str) -> Any:
        return self.controller.local.topics.select(topic)

    def topic_message_type(self, topic: str) -> str:
        """`getTopicMessageType`: the topic's `message.type` attribute, NORMAL without one,
        UNSPECIFIED for a topic the broker does not have."""
        tc = self.topic_config(topic)
        if tc is None:
            return "UNSPECIFIED"
        attrs = getattr(tc, "attributes", None) or {}
        value = attrs.get("message.type") or attrs.get("+message.type")
        return str(value).upper() if value else "NORMAL"

    def group_config(self, group: str) -> Any:
        return self.controller.local.subscriptions.find(group)

    async def close(self) -> None:
        await self.renew.stop()
        await self.channels.close_all()


def loop_time_ms() -> int:
    return int(asyncio.get_running_loop().time() * 1000)
