"""`rmqtool serve`: name server + broker over a store directory (cli.md)."""

from __future__ import annotations

import asyncio
import logging
import sys
from pathlib import Path

import typer


def opts_master(opts) -> str | None:  # type: ignore[no-untyped-def]
    """haMasterAddress from the broker.conf, if any (the ready line says whom a slave follows)."""
    from rmqtool.broker.server import read_properties

    return read_properties(opts.config_file).get("haMasterAddress") if opts.config_file else None


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
    log_level: str = typer.Option("WARNING", "--log-level", help="Diagnostics on stderr: DEBUG, INFO, WARNING."),
    namesrv_only: bool = typer.Option(False, "--namesrv-only", help="Run the name server alone (as mqnamesrv)."),
    broker_only: bool = typer.Option(False, "--broker-only",
                                     help="Run the broker alone (as mqbroker); it registers with --namesrv-addr."
                                          " Role and id from broker.conf: brokerRole, brokerId."),
) -> None:
    """Run a RocketMQ name server and broker in one process until SIGINT/SIGTERM.

    Prints one ready line on stderr; real RocketMQ clients connect with NAMESRV_ADDR=HOST:PORT.
    """
    from rmqtool.broker.server import ServeOptions, ready_line, replication_line, serve_forever

    if namesrv_only and broker_only:
        raise typer.BadParameter("--namesrv-only and --broker-only exclude each other")
    logging.basicConfig(stream=sys.stderr, level=getattr(logging, log_level.upper(), logging.WARNING),
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    mode = "namesrv" if namesrv_only else "broker" if broker_only else "all"
    opts = ServeOptions(store, host, namesrv_port, broker_port, flush, config, namesrv_addr, mode)

    def ready(info) -> None:  # type: ignore[no-untyped-def]
        print(ready_line(info), file=sys.stderr, flush=True)
        line = replication_line(info, opts_master(opts))
        if line is not None:
            print(line, file=sys.stderr, flush=True)

    try:
        asyncio.run(serve_forever(opts, ready))
    except KeyboardInterrupt:
        pass
