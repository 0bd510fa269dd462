"""`rmqtool replicate --master HOST:HAPORT --store DIR`: a live, byte-exact replica of a master."""

from __future__ import annotations

import signal
import sys
import threading
from typing import Annotated

import typer

from rmqtool.cli.common import (
    JsonOption,
    StoreOption,
    check_store_path,
    is_tty,
    json_line,
    store_config,
    store_dir,
)
from rmqtool.errors import InvalidInput, StoreError


def register(app: typer.Typer) -> None:
    app.command("replicate")(replicate)


def replicate(
    master: Annotated[str, typer.Option("--master", metavar="HOST:HAPORT",
                                        help="The master's HA address (haListenPort, by default its "
                                             "listenPort + 1).")],
    store: StoreOption = None,
    commitlog_file_size: Annotated[int | None, typer.Option(
        "--commitlog-file-size", metavar="BYTES", show_default="the store's files, else 1073741824",
        help="mappedFileSizeCommitLog of the master; a replica's files are the master's.")] = None,
    broker: Annotated[str | None, typer.Option(
        "--broker", metavar="HOST:PORT",
        help="The master's broker address: its max offset (GET_BROKER_RUNTIME_INFO) makes the lag exact.")] = None,
    json_flag: JsonOption = False,
    interval: Annotated[float, typer.Option("--interval", metavar="SECONDS",
                                            help="Seconds between progress lines.")] = 1.0,
) -> None:
    """Follow a master as a slave broker would, into a store that is a live byte-exact copy.

    Any classic-HA master (Apache RocketMQ 4.x/5.x or rmqtool serve) sends its CommitLog from its
    newest file on (or from where the store ends); the store is locked while this runs, and
    `rmqtool inspect` / `rmqtool verify` read it meanwhile. Progress (offset, lag, MB/s) on
    stderr on a terminal, or as JSON Lines on stdout with --json. Stops cleanly on SIGINT or
    SIGTERM; exit 3 when the store does not continue the master's data (nothing is overwritten).
    """
    from rmqtool.store.ha.client import parse_host_port
    from rmqtool.store.ha.follow import Follower

    try:
        parse_host_port(master)
        if broker:
            parse_host_port(broker)
    except ValueError as e:
        raise InvalidInput(f"--master/--broker: {e}") from None
    if interval <= 0:
        raise InvalidInput("--interval must be positive")
    root = store_dir(store)
    check_store_path(root)
    cfg = store_config(root)
    has_files = (root / "commitlog").is_dir() and any((root / "commitlog").iterdir())
    if commitlog_file_size is not None:
        if has_files and commitlog_file_size != cfg.mapped_file_size_commit_log:
            raise InvalidInput(f"--commitlog-file-size {commitlog_file_size}: the store's files are "
                               f"{cfg.mapped_file_size_commit_log} bytes")
        cfg.mapped_file_size_commit_log = commitlog_file_size
    elif not has_files:
        cfg.mapped_file_size_commit_log = 1073741824
    max_offset = None
    if broker:
        from rmqtool.client.brokerinfo import commitlog_max_offset

        def max_offset() -> int | None:
            return commitlog_max_offset(broker)

    follower = Follower(root, master, cfg, master_max_offset=max_offset)
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    follower.start()
    tty = is_tty(sys.stderr)
    print(f"rmqtool replicate: following {master} into {root}", file=sys.stderr, flush=True)
    try:
        while not stop.wait(interval):
            if follower.error:
                break
            p = follower.progress()
            if json_flag:
                sys.stdout.write(json_line(p.to_json()) + "\n")
                sys.stdout.flush()
            elif tty:
                sys.stderr.write("\r\x1b[K" + p.line(master))
                sys.stderr.flush()
    finally:
        final = follower.progress()
        follower.stop()
    if tty and not json_flag:
        sys.stderr.write("\n")
    if follower.error:
        raise StoreError(f"replication stopped: {follower.error}")
    print(f"rmqtool replicate: stopped at offset {final.offset} ({final.records} records this run)", file=sys.stderr)
