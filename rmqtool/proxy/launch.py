"""Start the gRPC front of `rmqtool serve` over a running BrokerController.

The broker layer composes name server and broker but may not import the proxy above it; the
CLI hands `start_grpc` to it as `ServeOptions.grpc_starter` (as Apache's proxy runs beside the
broker in its own layer, ProxyStartup over BrokerController in local mode).
"""

from __future__ import annotations

import logging
from typing import Any

from rmqtool.errors import RemotingError
from rmqtool.layouts.net import Host

log = logging.getLogger("rmqtool.proxy")


async def start_grpc(controller: Any, listen_host: str, port: int, soft: bool,
                     props: dict[str, str]) -> tuple[Any, Host | None, str | None]:
    """The GrpcServer on `port` (0 = any free one): (server, its address, None), or with `soft`
    (the CLI's default port) (None, None, why) when the messages are missing or the port is taken."""
    from rmqtool.proxy import pb

    if not pb.available():
        if soft:
            return None, None, "rocketmq-python-client not installed"
        raise RemotingError(f"no gRPC endpoint without its messages: {pb.IMPORT_ERROR}")
    from rmqtool.proxy.config import ProxyConfig
    from rmqtool.proxy.server import GrpcServer

    grpc = GrpcServer(controller, listen_host, port, ProxyConfig.from_properties(props))
    try:
        bound = await grpc.start()
    except RemotingError as e:
        if soft:  # the default port is taken: serve on, and say so
            log.info("gRPC endpoint off: %s", e)
            return None, None, f"port {port} in use"
        raise
    return grpc, Host(listen_host, bound), None
