"""`rmqtool serve`: name server + broker over a store directory (cli.md)."""

from __future__ import annotations

import asyncio
import logging
import sys
from pathlib import Path

import typer


def register(app: typer.Typer) -> None:
    app.command("serve")(serve)


def serve(
    store: Path = typer.Option(None, "--store", envvar="RMQ_STORE",
                               help="Store directory (storePathRootDir); default ~/store or the config's."),
    host: str = typer.Option(None, "--host", help="Address to listen on (default 127.0.0.1, loopback only)."),
    namesrv_port: int = typer.Option(9876, "--namesrv-port", help="Name server port (0 = any free port)."),
    broker_port: int = typer.Option(None, "--broker-port",
                                    help="Broker port, listenPort (default 10911; 0 = any free port)."),
    flush: str = typer.Option(None, "--flush", help="sync or async (flushDiskType); default async."),
    config: Path = typer.Option(None, "-c", "--config", help="broker.conf with RocketMQ property names."),
    namesrv_addr: str = typer.Option(None, "--namesrv-addr",
                                     help="Also register the broker with these name servers (host:port;host:port),"
                                          " e.g. a real Apache cluster's; broker.conf: namesrvAddr."),
    grpc_port: int = typer.Option(None, "--grpc-port",
                                  help="Port of the 5.x gRPC endpoint (default 8081 as Apache's proxy; 0 = any free"
                                       " port, -1 = off). The default is dropped with a warning when taken."),
    log_level: str = typer.Option("WARNING", "--log-level", help="Diagnostics on stderr: DEBUG, INFO, WARNING."),
) -> None:
    """Run a RocketMQ name server and broker in one process until SIGINT/SIGTERM.

    Prints one ready line on stderr; real RocketMQ clients connect with NAMESRV_ADDR=HOST:PORT,
    5.x SDKs (gRPC) with the endpoint the ready line names.
    """
    from rmqtool.broker.server import ServeOptions, ready_line, serve_forever

    logging.basicConfig(stream=sys.stderr, level=getattr(logging, log_level.upper(), logging.WARNING),
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    if grpc_port is not None and grpc_port < -1:
        print(f"rmqtool serve: --grpc-port must be -1 (off), 0 (any) or a port, not {grpc_port}", file=sys.stderr)
        raise typer.Exit(2)
    opts = ServeOptions(store, host, namesrv_port, broker_port, flush, config, namesrv_addr,
                        grpc_port=8081 if grpc_port is None else grpc_port, grpc_port_soft=grpc_port is None)

    def ready(info) -> None:  # type: ignore[no-untyped-def]
        print(ready_line(info), file=sys.stderr, flush=True)

    try:
        asyncio.run(serve_forever(opts, ready))
    except KeyboardInterrupt:
        pass
