"""One gRPC client as a broker channel (`GrpcClientChannel`, `GrpcChannelManager`).

The broker's client registry and its broker -> client requests speak to `Connection`s. A gRPC
client has no remoting connection; this object stands in for one: it carries the client's id
and address, and turns what the broker sends a client into Telemetry commands on the client's
stream, as Apache's proxy relays them:

- CHECK_TRANSACTION_STATE -> RecoverOrphanedTransactionCommand (and the transaction data an
  EndTransaction from the check needs, `ProxyClientRemotingProcessor.checkTransactionState`);
- GET_CONSUMER_RUNNING_INFO with jstack -> PrintThreadStackTraceCommand, answered by the
  client's ThreadStackTrace;
- CONSUME_MESSAGE_DIRECTLY -> VerifyMessageCommand, answered by VerifyMessageResult;
- NOTIFY_CONSUMER_IDS_CHANGED means nothing to a 5.x client and is dropped.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import uuid
from collections.abc import Callable
from typing import Any

from rmqtool.layouts.message import decode_record
from rmqtool.layouts.net import Host
from rmqtool.proxy.convert import build_message
from rmqtool.proxy.pb import service as s
from rmqtool.proxy.status import Code
from rmqtool.proxy.transaction import TransactionDataManager
from rmqtool.remoting import fastjson
from rmqtool.remoting.codes import RequestCode, ResponseCode
from rmqtool.remoting.command import RESPONSE_FLAG, RemotingCommand
from rmqtool.remoting.headers import CheckTransactionStateRequestHeader

log = logging.getLogger("rmqtool.proxy")
_ids = itertools.count(1)


def parse_peer(peer: str) -> Host:
    """grpc's `context.peer()` ("ipv4:127.0.0.1:5555", "ipv6:[::1]:5555") as a Host."""
    kind, _, rest = peer.partition(":")
    if kind in ("ipv4", "ipv6"):
        host, _, port = rest.rpartition(":")
        host = host.strip("[]")
        try:
            return Host(host, int(port))
        except ValueError:
            pass
    return Host("0.0.0.0", 0)


class GrpcClientChannel:
    """Looks like a remoting Connection to the broker; writes to the client's Telemetry stream."""

    def __init__(self, client_id: str, peer: Host, local: Host, transactions: TransactionDataManager,
                 on_close: Callable[[GrpcClientChannel], None] | None = None) -> None:
        self.client_id = client_id
        self.on_close = on_close
        self.peer = peer
        self.local = local
        self.attrs: dict[str, object] = {"client_id": client_id}
        self.closed = asyncio.Event()
        self.transactions = transactions
        self.outbox: asyncio.Queue[Any] | None = None  # the open Telemetry stream's writer
        self.pending: dict[str, asyncio.Future[Any]] = {}
        self.serial = next(_ids)

    def __hash__(self) -> int:
        return hash(("grpc", self.serial))

    def __eq__(self, other: object) -> bool:
        return self is other

    def __repr__(self) -> str:
        return f"GrpcClientChannel({self.client_id}, {self.peer})"

    # ------------------------------------------------------------ telemetry side
    def attach(self, outbox: asyncio.Queue[Any]) -> None:
        self.outbox = outbox

    def detach(self, outbox: asyncio.Queue[Any]) -> None:
        if self.outbox is outbox:
            self.outbox = None

    def write(self, command: Any) -> bool:
        if self.outbox is None:
            return False
        self.outbox.put_nowait(command)
        return True

    def answer(self, nonce: str, status: Any, result: Any) -> None:
        fut = self.pending.pop(nonce, None)
        if fut is not None and not fut.done():
            fut.set_result((status, result))

    # ------------------------------------------------------------ Connection side
    async def oneway(self, cmd: RemotingCommand) -> None:
        if cmd.code == RequestCode.CHECK_TRANSACTION_STATE:
            self._check_transaction(cmd)

    def _check_transaction(self, cmd: RemotingCommand) -> None:
        try:
            h = CheckTransactionStateRequestHeader.from_ext(cmd.ext_fields)
            m = decode_record(cmd.body, check_crc=False)
        except Exception as e:  # a broker request we cannot read: nothing to relay
            log.warning("cannot relay a transaction check to %s: %s", self.client_id, e)
            return
        group = m.properties.get("PGROUP", "")
        tid = h.transactionId or h.msgId or ""
        self.transactions.add(group, tid, h.bname or "", h.tranStateTableOffset, h.commitLogOffset)
        cmd_out = s.TelemetryCommand(recover_orphaned_transaction_command=s.RecoverOrphanedTransactionCommand(
            message=build_message(m), transaction_id=tid))
        if not self.write(cmd_out):
            log.info("client %s has no telemetry stream for transaction check %s", self.client_id, tid)

    async def request(self, cmd: RemotingCommand, timeout: float = 3.0) -> RemotingCommand:
        if cmd.code == RequestCode.GET_CONSUMER_RUNNING_INFO:
            return await self._thread_stack(cmd, timeout)
        if cmd.code == RequestCode.CONSUME_MESSAGE_DIRECTLY:
            return await self._verify_message(cmd, timeout)
        return cmd.response(ResponseCode.REQUEST_CODE_NOT_SUPPORTED, remark=f" request type {cmd.code} not supported")

    async def _relay(self, nonce: str, command: Any, timeout: float) -> tuple[Any, Any] | None:
        fut: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self.pending[nonce] = fut
        try:
            if not self.write(command):
                return None
            return await asyncio.wait_for(fut, timeout)
        except asyncio.TimeoutError:
            return None
        finally:
            self.pending.pop(nonce, None)

    async def _thread_stack(self, cmd: RemotingCommand, timeout: float) -> RemotingCommand:
        """`GrpcClientChannel.getConsumerRunningInfo`: the client's stack as ConsumerRunningInfo.jstack."""
        nonce = str(uuid.uuid4())
        got = await self._relay(nonce, s.TelemetryCommand(
            print_thread_stack_trace_command=s.PrintThreadStackTraceCommand(nonce=nonce)), timeout)
        if got is None:
            return _response(cmd, ResponseCode.SYSTEM_ERROR, "the gRPC client did not answer")
        status, result = got
        if status.code != Code.OK:
            return _response(cmd, ResponseCode.SYSTEM_ERROR, "verify message failed")
        body = fastjson.dumpb(fastjson.bean(jstack=result.thread_stack_trace, properties={},
                                            mqTable={}, statusTable={}, subscriptionSet=[]))
        return _response(cmd, ResponseCode.SUCCESS, None, body)

    async def _verify_message(self, cmd: RemotingCommand, timeout: float) -> RemotingCommand:
        """`consumeMessageDirectly`: the message to the client, its verdict as a CMResult."""
        try:
            m = decode_record(cmd.body, check_crc=False)
        except Exception as e:
            return _response(cmd, ResponseCode.SYSTEM_ERROR, f"cannot decode the message: {e}")
        nonce = str(uuid.uuid4())
        got = await self._relay(nonce, s.TelemetryCommand(
            verify_message_command=s.VerifyMessageCommand(nonce=nonce, message=build_message(m))), timeout)
        if got is None:
            return _response(cmd, ResponseCode.SYSTEM_ERROR, "the gRPC client did not answer")
        status, _result = got
        if status.code == Code.VERIFY_FIFO_MESSAGE_UNSUPPORTED:
            return _response(cmd, ResponseCode.NO_PERMISSION, "forbidden to verify message")
        verdict = {Code.OK: "CR_SUCCESS", Code.FAILED_TO_CONSUME_MESSAGE: "CR_LATER",
                   Code.MESSAGE_CORRUPTED: "CR_RETURN_NULL"}.get(status.code)
        body = fastjson.dumpb(fastjson.bean(autoCommit=True, consumeResult=verdict, order=False,
                                            remark="from gRPC client", spentTimeMills=0))
        return _response(cmd, ResponseCode.SUCCESS, None, body)

    async def close(self) -> None:
        """The broker dropped the client (no heartbeat for 120 s) or it terminated."""
        if self.closed.is_set():
            return
        self.closed.set()
        if self.on_close is not None:
            self.on_close(self)
        for fut in self.pending.values():
            if not fut.done():
                fut.cancel()
        self.pending.clear()

    async def run(self) -> None:
        await self.closed.wait()


def _response(cmd: RemotingCommand, code: int, remark: str | None, body: bytes = b"") -> RemotingCommand:
    return RemotingCommand(code, {}, body, cmd.opaque, RESPONSE_FLAG, remark)


class GrpcChannelManager:
    """Channels by client id (`GrpcChannelManager.createChannel` returns the existing one)."""

    def __init__(self, transactions: TransactionDataManager,
                 on_removed: Callable[[str], None] | None = None) -> None:
        self.channels: dict[str, GrpcClientChannel] = {}
        self.transactions = transactions
        self.on_removed = on_removed  # the client's settings go with its channel

    def create(self, client_id: str, peer: Host, local: Host) -> GrpcClientChannel:
        ch = self.channels.get(client_id)
        if ch is None or ch.closed.is_set():
            ch = self.channels[client_id] = GrpcClientChannel(client_id, peer, local, self.transactions, self._closed)
        return ch

    def _closed(self, ch: GrpcClientChannel) -> None:
        if self.channels.get(ch.client_id) is ch:
            del self.channels[ch.client_id]
            if self.on_removed is not None:
                self.on_removed(ch.client_id)

    def get(self, client_id: str) -> GrpcClientChannel | None:
        return self.channels.get(client_id)

    def remove(self, client_id: str) -> GrpcClientChannel | None:
        return self.channels.pop(client_id, None)

    async def close_all(self) -> None:
        for ch in list(self.channels.values()):
            with contextlib.suppress(Exception):
                await ch.close()
        self.channels.clear()


__all__ = ["GrpcChannelManager", "GrpcClientChannel", "parse_peer"]
