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
from rmqtool.proxy.pb import service_grpc
from rmqtool.proxy.service import MessagingService

# ProxyConfig.grpcMaxInboundMessageSize: a body of maxMessageSize plus its properties fits
MAX_INBOUND_MESSAGE_SIZE = 130 * 1024 * 1024


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
        service_grpc.add_MessagingServiceServicer_to_server(MessagingService(self.core), server)
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
