"""`rmqtool serve`: name server + broker over a store directory (cli.md).

The ready line goes to stderr (diagnostics); with `--json` the same facts also go to stdout as
one JSON object, so a script can read the ports it got with `--namesrv-port 0`. On SIGINT or
SIGTERM the servers stop, the store is closed as a broker's shutdown closes it, and one line on
stderr says so: a user can tell a clean stop from a crash.
"""

from __future__ import annotations

import asyncio
import logging
import sys
from typing import Annotated, Any

import typer

from rmqtool.cli import common


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
) -> None:
    """Run a RocketMQ name server and broker until SIGINT/SIGTERM.

    Prints one ready line on stderr; real RocketMQ clients connect with NAMESRV_ADDR=HOST:PORT.
    On SIGINT/SIGTERM it stops, closes the store cleanly and says so on stderr.
    """
    from rmqtool.broker.server import ServeOptions, ready_line, serve_forever

    logging.basicConfig(stream=sys.stderr, level=getattr(logging, log_level.upper(), logging.WARNING),
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    opts = ServeOptions(store, host, namesrv_port, broker_port, flush, config, namesrv_addr)
    started: list[Any] = []

    def ready(info: Any) -> None:
        started.append(info)
        print(ready_line(info), file=sys.stderr, flush=True)
        if json_out:
            print(common.json_line(ready_json(info)), flush=True)

    try:
        asyncio.run(serve_forever(opts, ready))
    except KeyboardInterrupt:
        pass
    if started:
        print(f"rmqtool serve: stopped; store {started[0].store} closed cleanly", file=sys.stderr, flush=True)


def ready_json(info: Any) -> dict[str, Any]:
    """The ready line's facts: name server and broker addresses, broker name, store directory."""
    return {"namesrv": str(info.namesrv), "broker": str(info.broker), "brokerName": info.broker_name,
            "store": str(info.store), "vipPort": info.vip_port}
