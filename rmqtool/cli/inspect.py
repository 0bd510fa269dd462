"""`rmqtool inspect KIND PATH`: dissect store files (read-only). Thin: parse, call, print."""

from __future__ import annotations

import os
import sys
from contextlib import contextmanager
from pathlib import Path

import typer

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
    kind: str = typer.Argument(..., help=f"What PATH holds: {', '.join(KINDS)}."),
    path: Path = typer.Argument(None, help="A file or a directory (default: --store / RMQ_STORE / ~/store)."),
    fmt: str = typer.Option(None, "--format", "-f", help="table, json (JSON Lines) or hex; default: table on a "
                            "terminal, json otherwise."),
    json_out: bool = typer.Option(False, "--json", help="Same as --format json."),
    offset: int = typer.Option(None, "--offset", help="Start at this CommitLog offset (commitlog), queue offset "
                               "(consumequeue, batchconsumequeue: the unit holding it), ext stream offset "
                               "(consumequeue_ext), entry number (index), TimerLog offset (timerlog) or slot "
                               "(timerwheel)."),
    limit: int = typer.Option(None, "--limit", "-n", help="Print at most N records."),
    topic: str = typer.Option(None, "--topic", "-t", help="Only this topic (REAL_TOPIC also matches)."),
    queue: int = typer.Option(None, "--queue", "-q", help="Only this queue id."),
    since: str = typer.Option(None, "--since", help="Only from this time (epoch ms or ISO-8601)."),
    until: str = typer.Option(None, "--until", help="Only before this time (epoch ms or ISO-8601)."),
    msg_id: str = typer.Option(None, "--msg-id", help="Only this message: an offset msgId or a UNIQ_KEY."),
    key: str = typer.Option(None, "--key", "-k", help="Only messages with this key (KEYS token or UNIQ_KEY)."),
    tag: str = typer.Option(None, "--tag", help="Only messages with this tag."),
    follow: bool = typer.Option(False, "--follow-links", "-L", help="Follow links: ConsumeQueue and "
                                "BatchConsumeQueue unit, index entry and TimerLog unit to the message, a ConsumeQueue "
                                "unit's ext address to its ConsumeQueueExt unit, wheel slot to its TimerLog chain, "
                                "msgIds decoded."),
    body_hex: bool = typer.Option(False, "--body-hex", help="Add bodyHex (the stored body bytes) to JSON."),
    store: Path = typer.Option(None, "--store", envvar="RMQ_STORE", help="Store root used when PATH is absent."),
) -> None:
    """Dissect a store file or directory: one row per record or unit, read-only.

    KIND is commitlog, consumequeue, batchconsumequeue (BatchCQ topics, under batchconsumequeue/),
    consumequeue_ext (enableConsumeQueueExt, under consumequeue_ext/), index, timerlog, timerwheel,
    checkpoint, timercheck, config, store (a summary of a whole store directory), revive (POP
    checkpoint and ack records, --tag ck|ack|bAck) or inflight (the messages POP consumer groups
    hold and until when, --tag GROUP).
    """
    fmt = "json" if json_out else (fmt or default_format())
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
