"""`rmqtool inspect KIND PATH`: dissect store files (read-only). Thin: parse, call, print."""

from __future__ import annotations

import os
import sys
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated

import typer

from rmqtool.cli import common
from rmqtool.errors import InvalidInput
from rmqtool.inspect.dissect import KINDS, dissect
from rmqtool.inspect.model import Filters
from rmqtool.inspect.render import default_format, write_hex, write_json, write_table
from rmqtool.inspect.timeparse import parse_time


def default_store() -> Path:
    return Path(os.environ.get("RMQ_STORE") or Path.home() / "store")


@contextmanager
def progress_bar(total: int):
    """A byte progress bar on stderr, only when stderr is a terminal."""
    if not sys.stderr.isatty() or total <= 0:
        yield None
        return
    from rich.console import Console
    from rich.progress import BarColumn, DownloadColumn, Progress, TransferSpeedColumn

    with Progress("[progress.description]{task.description}", BarColumn(), DownloadColumn(), TransferSpeedColumn(),
                  console=Console(file=sys.stderr), transient=True) as p:
        task = p.add_task("reading", total=total)
        yield lambda n: p.advance(task, n)


def _total_bytes(path: Path) -> int:
    if path.is_file():
        return path.stat().st_size
    d = path / "commitlog" if (path / "commitlog").is_dir() else path
    try:
        return sum(p.stat().st_size for p in d.iterdir() if p.is_file())
    except OSError:
        return 0


def inspect(
    kind: Annotated[str, typer.Argument(metavar="KIND", help=f"What PATH holds: {', '.join(KINDS)}.")],
    path: Annotated[Path | None, typer.Argument(metavar="PATH", show_default="--store",
                                                help="A file or a directory.")] = None,
    fmt: common.format_opt("table, json (JSON Lines) or hex") = None,
    json_out: common.JSON_OPT = False,
    offset: Annotated[int | None, typer.Option(
        "--offset", metavar="N", help="Start at this CommitLog offset (commitlog), queue offset (consumequeue, "
        "batchconsumequeue: the unit holding it), ext stream offset (consumequeue_ext), entry number (index), "
        "TimerLog offset (timerlog) or slot (timerwheel).")] = None,
    limit: common.COUNT_OPT = None,
    topic: Annotated[str | None, typer.Option("--topic", "-t", metavar="TOPIC",
                                              help="Only this topic (REAL_TOPIC also matches).")] = None,
    queue: common.QUEUE_OPT = None,
    since: common.SINCE_OPT = None,
    until: common.UNTIL_OPT = None,
    msg_id: Annotated[str | None, typer.Option("--msg-id", metavar="ID",
                                               help="Only this message: an offset msgId or a UNIQ_KEY.")] = None,
    key: Annotated[str | None, typer.Option("--key", "-k", metavar="KEY",
                                            help="Only messages with this key (KEYS token or UNIQ_KEY).")] = None,
    tag: common.TAG_OPT = None,
    follow: Annotated[bool, typer.Option(
        "--follow-links", "-L", help="Follow links: ConsumeQueue and BatchConsumeQueue unit, index entry and "
        "TimerLog unit to the message, a ConsumeQueue unit's ext address to its ConsumeQueueExt unit, wheel slot "
        "to its TimerLog chain, msgIds decoded.")] = False,
    body_hex: Annotated[bool, typer.Option("--body-hex", help="Add bodyHex (the stored body bytes) to JSON.")] = False,
    store: common.STORE_OPT = None,
    master: Annotated[str | None, typer.Option(
        "--master", metavar="HOST:PORT",
        help="store only: the master of this replica (its broker address, or a name server listing it) to show "
             "the replica's lag against; a store whose broker.conf says brokerRole=SLAVE asks its namesrvAddr.")] = None,
) -> None:
    """Dissect a store file or directory, read-only.

    One row per record or unit. KIND is commitlog, consumequeue, batchconsumequeue (BatchCQ topics, under batchconsumequeue/),
    consumequeue_ext (enableConsumeQueueExt, under consumequeue_ext/), index, timerlog, timerwheel,
    checkpoint, timercheck, config, store (a summary of a whole store directory), revive (POP
    checkpoint and ack records, --tag ck|ack|bAck) or inflight (the messages POP consumer groups
    hold and until when, --tag GROUP). On a replica (a slave's store: brokerRole=SLAVE in its
    broker.conf, or --master) `store` adds the lag behind the master, per queue too; an
    unreachable master is said on stderr and the store's own figures are still shown.
    """
    fmt = "json" if json_out else (fmt or default_format())
    if master is not None and kind != "store":
        raise InvalidInput("--master is for `inspect store` (a replica's lag)")
    if fmt not in ("table", "json", "hex"):
        raise InvalidInput(f"--format must be table, json or hex, not {fmt!r}")
    if path is None:
        path = store or default_store()
    if kind == "commitlog" and (path / "commitlog").is_dir():
        path = path / "commitlog"
    f = Filters(offset=offset, limit=limit, topic=topic, queue=queue,
                since=parse_time(since) if since else None, until=parse_time(until) if until else None,
                msg_id=msg_id, key=key, tag=tag, follow=follow, body_hex=body_hex, raw=fmt == "hex")
    with progress_bar(_total_bytes(path) if kind in ("commitlog", "store") else 0) as progress:
        items = dissect(kind, path, f, progress)
        if kind == "store":
            from rmqtool.client.masterstate import master_state
            from rmqtool.inspect.replica import with_replica

            items = with_replica(items, path, master, f, master_state, common.warn)
        out = sys.stdout
        if fmt == "json":
            write_json(items, out)
        elif fmt == "hex":
            write_hex(items, out)
        else:
            write_table(items, out)
        out.flush()


def register(app: typer.Typer) -> None:
    app.command("inspect")(inspect)
