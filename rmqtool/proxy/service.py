"""The `MessagingService` servicer: context, errors -> statuses, and the Telemetry stream.

As `GrpcMessagingApplication`: each unary call gets a ProxyContext from the metadata, needs a
client id (CLIENT_ID_REQUIRED otherwise), and answers every failure inside its response message
with the status `ResponseBuilder` gives; an unexpected error is INTERNAL_SERVER_ERROR, logged,
never a broken call. RPCs not listed here answer gRPC UNIMPLEMENTED (the generated base).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import grpc

from rmqtool.proxy.client import ClientActivity, TelemetryAbort
from rmqtool.proxy.consumer import ConsumerActivity
from rmqtool.proxy.context import ProxyContext, ProxyCore
from rmqtool.proxy.pb import service as s
from rmqtool.proxy.producer import ProducerActivity
from rmqtool.proxy.recall import RecallActivity
from rmqtool.proxy.route import RouteActivity
from rmqtool.proxy.status import Code, ProxyError, status

log = logging.getLogger("rmqtool.proxy")
_END = object()
BAD_REQUEST = object()  # what a request that does not parse becomes (server.py)
INVALID_PROTOBUF = "Invalid protobuf byte sequence"  # grpc-java's status for it: INTERNAL


class MessagingService(RouteActivity, ProducerActivity, RecallActivity, ConsumerActivity, ClientActivity):
    def __init__(self, core: ProxyCore) -> None:
        self.core = core

    async def _unary(self, request: Any, context: Any, response_type: Any,
                     fn: Callable[[ProxyContext, Any], Any]) -> Any:
        if request is BAD_REQUEST:
            await context.abort(grpc.StatusCode.INTERNAL, INVALID_PROTOBUF)
        try:
            ctx = ProxyContext.from_grpc(context)
            ctx.require_client_id()
            r = fn(ctx, request)
            if isinstance(r, Awaitable):
                r = await r
            return r
        except ProxyError as e:
            return response_type(status=status(e.code, e.message))
        except asyncio.CancelledError:
            raise
        except Exception as e:
            log.exception("internal server error in %s", response_type.__name__)
            return response_type(status=status(Code.INTERNAL_SERVER_ERROR, f"{type(e).__name__}: {e}"))

    async def QueryRoute(self, request: Any, context: Any) -> Any:  # noqa: N802 - gRPC names
        return await self._unary(request, context, s.QueryRouteResponse, self.query_route)

    async def Heartbeat(self, request: Any, context: Any) -> Any:  # noqa: N802
        return await self._unary(request, context, s.HeartbeatResponse, self.heartbeat)

    async def SendMessage(self, request: Any, context: Any) -> Any:  # noqa: N802
        return await self._unary(request, context, s.SendMessageResponse, self.send_message)

    async def QueryAssignment(self, request: Any, context: Any) -> Any:  # noqa: N802
        return await self._unary(request, context, s.QueryAssignmentResponse, self.query_assignment)

    async def EndTransaction(self, request: Any, context: Any) -> Any:  # noqa: N802
        return await self._unary(request, context, s.EndTransactionResponse, self.end_transaction)

    async def RecallMessage(self, request: Any, context: Any) -> Any:  # noqa: N802
        return await self._unary(request, context, s.RecallMessageResponse, self.recall_message)

    async def NotifyClientTermination(self, request: Any, context: Any) -> Any:  # noqa: N802
        return await self._unary(request, context, s.NotifyClientTerminationResponse, self.notify_client_termination)

    async def AckMessage(self, request: Any, context: Any) -> Any:  # noqa: N802
        return await self._unary(request, context, s.AckMessageResponse, self.ack_message)

    async def ChangeInvisibleDuration(self, request: Any, context: Any) -> Any:  # noqa: N802
        return await self._unary(request, context, s.ChangeInvisibleDurationResponse, self.change_invisible_duration)

    async def ForwardMessageToDeadLetterQueue(self, request: Any, context: Any) -> Any:  # noqa: N802
        return await self._unary(request, context, s.ForwardMessageToDeadLetterQueueResponse,
                                 self.forward_message_to_dead_letter_queue)

    async def ReceiveMessage(self, request: Any, context: Any) -> AsyncIterator[Any]:  # noqa: N802
        """Server streaming: a status, the messages, then the delivery timestamp, as the proxy's
        ReceiveMessageResponseStreamWriter writes them; every failure is a status on the stream."""
        if request is BAD_REQUEST:
            await context.abort(grpc.StatusCode.INTERNAL, INVALID_PROTOBUF)
        try:
            ctx = ProxyContext.from_grpc(context)
            ctx.require_client_id()
        except ProxyError as e:
            yield s.ReceiveMessageResponse(status=status(e.code, e.message))
            return
        remaining = context.time_remaining()
        remaining_ms = None if remaining is None else int(remaining * 1000)
        try:
            async for r in self.receive_message(ctx, request, remaining_ms):
                yield r
        except asyncio.CancelledError:
            raise
        except Exception as e:
            log.exception("internal server error in ReceiveMessage")
            yield s.ReceiveMessageResponse(status=status(Code.INTERNAL_SERVER_ERROR, f"{type(e).__name__}: {e}"))

    async def Telemetry(self, request_iterator: Any, context: Any) -> AsyncIterator[Any]:  # noqa: N802
        """Commands in, answers out, concurrently: the broker may write (a transaction check)
        while the client is silent. A bad command ends the call with INVALID_ARGUMENT/INTERNAL."""
        ctx = ProxyContext.from_grpc(context)
        outbox: asyncio.Queue[Any] = asyncio.Queue()
        failure: list[TelemetryAbort] = []

        async def read() -> None:
            try:
                async for command in request_iterator:
                    if command is BAD_REQUEST:
                        failure.append(TelemetryAbort(False, INVALID_PROTOBUF))
                        break
                    if not ctx.client_id.strip():  # validateContext, answered as writeResponse does
                        outbox.put_nowait(s.TelemetryCommand(status=status(Code.CLIENT_ID_REQUIRED,
                                                                           "client id cannot be empty")))
                        break
                    await self.telemetry_command(ctx, command, outbox)
            except TelemetryAbort as e:
                failure.append(e)
            except (asyncio.CancelledError, grpc.RpcError):
                pass
            except Exception as e:
                log.warning("process client telemetryCommand failed: %s", e, exc_info=True)
                failure.append(TelemetryAbort(False, f"process client telemetryCommand failed. {e}"))
            finally:
                outbox.put_nowait(_END)

        reader = asyncio.ensure_future(read())
        try:
            while True:
                item = await outbox.get()
                if item is _END:
                    break
                yield item
            if failure:
                code = grpc.StatusCode.INVALID_ARGUMENT if failure[0].invalid else grpc.StatusCode.INTERNAL
                await context.abort(code, failure[0].details)
        finally:
            reader.cancel()
            with contextlib.suppress(BaseException):
                await reader
            channel = self.core.channels.get(ctx.client_id)
            if channel is not None:
                channel.detach(outbox)
