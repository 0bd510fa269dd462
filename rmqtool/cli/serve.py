"""`rmqtool serve`: name server + broker over a store directory (cli.md).

The ready line goes to stderr (diagnostics); with `--json` the same facts also go to stdout as
one JSON object, so a script can read the ports it got with `--namesrv-port 0`. On SIGINT or
SIGTERM the servers stop, the store is closed as a broker's shutdown closes it, and one line on
stderr says so: a user can tell a clean stop from a crash.
"""

from __future__ import annotations

import logging
import sys
from typing import Annotated, Any

import typer

from rmqtool.broker.busypoll import DEFAULT_BUDGET_US
from rmqtool.cli import common


def opts_master(opts) -> str | None:  # type: ignore[no-untyped-def]
    """haMasterAddress from the broker.conf, if any (the ready line says whom a slave follows)."""
    from rmqtool.broker.server import read_properties

    return read_properties(opts.config_file).get("haMasterAddress") if opts.config_file else None


def register(app: typer.Typer) -> None:
    app.command("serve")(serve)


def serve(
    store: common.STORE_OPT = None,
    host: Annotated[str | None, typer.Option("--host", metavar="ADDR", show_default="127.0.0.1",
                                             help="Address to listen on (loopback unless told).")] = None,
    namesrv_port: Annotated[int, typer.Option("--namesrv-port", metavar="PORT",
                                              help="Name server port (0 = any free port).")] = 9876,
    broker_port: Annotated[int | None, typer.Option("--broker-port", metavar="PORT", show_default="10911",
                                                    help="Broker port, listenPort (0 = any free port).")] = None,
    flush: common.FLUSH_OPT = None,
    config: common.CONFIG_OPT = None,
    namesrv_addr: Annotated[str | None, typer.Option(
        "--namesrv", "-n", "--namesrv-addr", metavar="HOST:PORT",
        help="Also register the broker with these name servers (HOST:PORT[;HOST:PORT]), e.g. a real Apache "
             "cluster's; broker.conf: namesrvAddr.")] = None,
    log_level: Annotated[str, typer.Option("--log-level", metavar="LEVEL",
                                           help="Diagnostics on stderr: DEBUG, INFO, WARNING.")] = "WARNING",
    json_out: Annotated[bool, typer.Option("--json", help="Also print the ready line as JSON on stdout.")] = False,
    namesrv_only: Annotated[bool, typer.Option("--namesrv-only", help="Run the name server alone (as mqnamesrv).")] = False,
    broker_only: Annotated[bool, typer.Option(
        "--broker-only", help="Run the broker alone (as mqbroker); it registers with --namesrv. "
                              "Role and id from broker.conf: brokerRole, brokerId.")] = False,
    grpc_port: Annotated[int | None, typer.Option(
        "--grpc-port", metavar="PORT", show_default="8081",
        help="Port of the 5.x gRPC endpoint, as Apache's proxy (0 = any free port, -1 = off); the default "
             "port is dropped with a warning when taken.")] = None,
    busy_poll: Annotated[int, typer.Option(
        "--busy-poll", metavar="US",
        help="After a request, poll this many microseconds for the next before sleeping (0 = off): "
             "a synchronous client's next request is taken without a wake-up.")] = DEFAULT_BUDGET_US,
) -> None:
    """Run a RocketMQ name server and broker until SIGINT/SIGTERM.

    Prints one ready line on stderr; real RocketMQ clients connect with NAMESRV_ADDR=HOST:PORT,
    5.x SDKs (gRPC) with the endpoint the ready line names.
    On SIGINT/SIGTERM it stops, closes the store cleanly and says so on stderr.
    """
    from rmqtool.broker import eventloop
    from rmqtool.broker.server import ServeOptions, ready_line, replication_line, serve_forever

    if namesrv_only and broker_only:
        raise typer.BadParameter("--namesrv-only and --broker-only exclude each other")
    logging.basicConfig(stream=sys.stderr, level=getattr(logging, log_level.upper(), logging.WARNING),
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    if grpc_port is not None and grpc_port < -1:
        print(f"rmqtool serve: --grpc-port must be -1 (off), 0 (any) or a port, not {grpc_port}", file=sys.stderr)
        raise typer.Exit(2)
    if not 0 <= busy_poll <= 1_000_000:
        print(f"rmqtool serve: --busy-poll must be 0 (off) to 1000000 microseconds, not {busy_poll}", file=sys.stderr)
        raise typer.Exit(2)
    mode = "namesrv" if namesrv_only else "broker" if broker_only else "all"
    from rmqtool.proxy.launch import start_grpc

    opts = ServeOptions(store, host, namesrv_port, broker_port, flush, config, namesrv_addr, mode,
                        grpc_port=8081 if grpc_port is None else grpc_port, grpc_port_soft=grpc_port is None,
                        grpc_starter=start_grpc, busy_poll_us=busy_poll)
    started: list[Any] = []

    def ready(info: Any) -> None:
        started.append(info)
        print(ready_line(info), file=sys.stderr, flush=True)
        line = replication_line(info, opts_master(opts))
        if line is not None:
            print(line, file=sys.stderr, flush=True)
        if json_out:
            print(common.json_line(ready_json(info)), flush=True)

    try:
        eventloop.run(serve_forever(opts, ready))
    except KeyboardInterrupt:
        pass
    if started and started[0].store:
        print(f"rmqtool serve: stopped; store {started[0].store} closed cleanly", file=sys.stderr, flush=True)
    elif started:
        print("rmqtool serve: stopped", file=sys.stderr, flush=True)


def ready_json(info: Any) -> dict[str, Any]:
    """The ready line's facts: name server and broker addresses, broker name, store directory."""
    return {"namesrv": str(info.namesrv) if info.namesrv else None, "broker": str(info.broker) if info.broker else None, "brokerName": info.broker_name,
            "store": str(info.store) if info.store else None, "vipPort": info.vip_port,
            "grpc": str(info.grpc) if info.grpc else None}
