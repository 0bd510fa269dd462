"""The gRPC server of `rmqtool serve` (`GrpcServer` of Apache's proxy), on serve's event loop."""

from __future__ import annotations

import contextlib
import socket
from typing import Any

import grpc

from rmqtool.errors import RemotingError
from rmqtool.layouts.net import Host
from rmqtool.proxy.config import ProxyConfig
from rmqtool.proxy.context import ProxyCore
from rmqtool.proxy.pb import SERVICE_NAME
from rmqtool.proxy.pb import service as s
from rmqtool.proxy.service import BAD_REQUEST, MessagingService

# ProxyConfig.grpcMaxInboundMessageSize: a body of maxMessageSize plus its properties fits
MAX_INBOUND_MESSAGE_SIZE = 130 * 1024 * 1024


_UNARY = {
    "QueryRoute": s.QueryRouteRequest, "Heartbeat": s.HeartbeatRequest, "SendMessage": s.SendMessageRequest,
    "QueryAssignment": s.QueryAssignmentRequest, "AckMessage": s.AckMessageRequest,
    "ForwardMessageToDeadLetterQueue": s.ForwardMessageToDeadLetterQueueRequest,
    "EndTransaction": s.EndTransactionRequest, "NotifyClientTermination": s.NotifyClientTerminationRequest,
    "ChangeInvisibleDuration": s.ChangeInvisibleDurationRequest, "RecallMessage": s.RecallMessageRequest,
}


def _deserializer(cls: Any) -> Any:
    """Bytes that are not a `cls` become BAD_REQUEST, answered by the servicer, instead of an
    exception inside grpc (which would log a traceback for every malformed request)."""
    def parse(data: bytes) -> Any:
        try:
            return cls.FromString(data)
        except Exception:
            return BAD_REQUEST
    return parse


def _serialize(message: Any) -> bytes:
    return message.SerializeToString()


def method_handlers(servicer: MessagingService) -> Any:
    """The service's handlers (the generated `add_..._to_server` minus its raising parser). The
    RPCs not here (PullMessage, offsets, lite topics) answer UNIMPLEMENTED."""
    handlers = {name: grpc.unary_unary_rpc_method_handler(getattr(servicer, name), _deserializer(cls), _serialize)
                for name, cls in _UNARY.items()}
    handlers["ReceiveMessage"] = grpc.unary_stream_rpc_method_handler(
        servicer.ReceiveMessage, _deserializer(s.ReceiveMessageRequest), _serialize)
    handlers["Telemetry"] = grpc.stream_stream_rpc_method_handler(
        servicer.Telemetry, _deserializer(s.TelemetryCommand), _serialize)
    return grpc.method_handlers_generic_handler(SERVICE_NAME, handlers)


class GrpcServer:
    def __init__(self, controller: Any, host: str, port: int, config: ProxyConfig | None = None) -> None:
        self.core = ProxyCore(controller, config)
        self.host = host
        self.port = port
        self.server: Any = None

    async def start(self) -> int:
        """Bind and start; returns the port (an ephemeral one for port 0)."""
        server = grpc.aio.server(options=[
            ("grpc.max_receive_message_length", MAX_INBOUND_MESSAGE_SIZE),
            ("grpc.max_send_message_length", MAX_INBOUND_MESSAGE_SIZE),
            ("grpc.so_reuseport", 0),
        ])
        server.add_generic_rpc_handlers((method_handlers(MessagingService(self.core)),))
        target = f"[{self.host}]:{self.port}" if ":" in self.host else f"{self.host}:{self.port}"
        if self.port:
            _probe(self.host, self.port, target)  # a clear error, before grpc logs its own to stderr
        try:
            port = server.add_insecure_port(target)
        except RuntimeError as e:
            raise RemotingError(f"cannot listen for gRPC on {target}: {e}") from None
        if port == 0:
            raise RemotingError(f"cannot listen for gRPC on {target}: address in use or not available")
        await server.start()
        self.core.renew.start()
        self.server = server
        self.port = port
        self.core.grpc_port = port
        self.core.local_host = Host(self.host, port)
        return port

    async def stop(self, grace: float = 1.0) -> None:
        if self.server is not None:
            with contextlib.suppress(Exception):
                await self.server.stop(grace)
            self.server = None
        await self.core.close()


def _probe(host: str, port: int, target: str) -> None:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as grpc binds: only a listener blocks
        try:
            sock.bind((host, port))
        except OSError as e:
            raise RemotingError(f"cannot listen for gRPC on {target}: {e.strerror or e}") from None
