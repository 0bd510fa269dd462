"""`rmqtool replay`: send stored messages again (cli.md).

Sources: a group's dead letters (`--dlq GROUP`), a topic's messages in a queue-offset or time
window (`--topic T`), or JSON Lines exported by `consume` / `inspect` (`--jsonl FILE`, `-` for
stdin). They are read from `--from-store DIR` (read-only: a stopped broker's store or a copy of a
crashed one's), else from the target itself. The target is `--namesrv` (network) or `--store`.
One result line per message on stdout, a progress bar (terminals) and a summary on stderr.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from rmqtool.cli import common
from rmqtool.errors import InvalidInput

RESULT_COLUMNS = ["status", "topic", "queueId", "queueOffset", "msgId", "originMsgId"]


def replay(
    ctx: typer.Context,
    dlq: Annotated[str | None, typer.Option("--dlq", metavar="GROUP",
                                            help="A consumer group: its dead letters back to their topics.")] = None,
    topic: Annotated[str | None, typer.Option("--topic", "-t", metavar="TOPIC",
                                              help="A topic whose messages (in the window) are sent again.")] = None,
    jsonl: Annotated[str | None, typer.Option("--jsonl", metavar="FILE",
                                              help="JSON Lines from consume/inspect (- for stdin).")] = None,
    from_store: Annotated[Path | None, typer.Option("--from-store", metavar="DIR",
                                                    help="Read from this store directory (read-only).")] = None,
    to_topic: Annotated[str | None, typer.Option("--to-topic", metavar="TOPIC",
                                                 help="Send everything to this topic instead.")] = None,
    queue: common.QUEUE_OPT = None,
    begin_offset: Annotated[int | None, typer.Option("--begin-offset", metavar="N",
                                                     help="First queue offset (inclusive).")] = None,
    end_offset: Annotated[int | None, typer.Option("--end-offset", metavar="N",
                                                   help="Last queue offset (exclusive).")] = None,
    since: common.SINCE_OPT = None,
    until: common.UNTIL_OPT = None,
    dry_run: common.DRY_RUN_OPT = False,
    rate: Annotated[float | None, typer.Option("--rate", metavar="N", help="At most N messages per second.")] = None,
    group: common.group_opt("rmqtool_replay", "Producer group of the resent messages.") = "rmqtool_replay",
    json_out: common.JSON_OPT = False,
    store: common.STORE_OPT = None,
    namesrv: common.NAMESRV_OPT = None,
) -> None:
    """Send stored messages again.

    Dead letters back to their topics, a topic's messages in a window, or JSON Lines exported by
    consume/inspect. One result line per message; a summary on stderr.
    """
    from rmqtool.client import replay as R

    if sum(x is not None for x in (dlq, topic, jsonl)) != 1:
        raise InvalidInput("say what to replay: exactly one of --dlq GROUP, --topic TOPIC, --jsonl FILE")
    if rate is not None and rate <= 0:
        raise InvalidInput("--rate must be more than 0")
    window = R.Window(queue, begin_offset, end_offset, common.parse_time_ms(since) if since else None,
                      common.parse_time_ms(until) if until else None)
    network = common.network_mode(ctx, namesrv)
    warn = common.warn
    if jsonl is not None:
        if jsonl == "-":
            items = list(R.from_json_lines(sys.stdin, to_topic=to_topic, warn=warn))
        else:
            try:
                with open(jsonl, encoding="utf-8") as fh:
                    items = list(R.from_json_lines(fh, to_topic=to_topic, warn=warn))
            except OSError as e:
                raise InvalidInput(f"cannot read {jsonl}: {e.strerror or e}") from None
        items = [i for i in items if window.accepts(i.source)]
    elif from_store is not None:
        items = list(R.from_store(from_store, topic=topic, dlq_group=dlq, window=window, to_topic=to_topic,
                                  warn=warn))
    elif network:
        items = list(R.from_network_dlq(namesrv or "", dlq or "", to_topic=to_topic, window=window, warn=warn,
                                        topic=topic))
    else:
        items = list(R.from_store(common.store_dir(store), topic=topic, dlq_group=dlq, window=window,
                                  to_topic=to_topic, warn=warn))
    target: Any = None
    if not dry_run:
        target = R.NetworkTarget(namesrv, group) if network else R.StoreTarget(common.store_dir(store), common.store_config(common.store_dir(store)))
    fmt = common.choose_format(None, json_out)
    writer = common.JsonLinesWriter()
    rows: list[dict[str, Any]] = []
    on_result = writer.write_obj if fmt == "json" else rows.append
    progress = None
    task = None
    if common.is_tty(sys.stderr) and items and not dry_run:
        from rich.console import Console
        from rich.progress import Progress

        progress = Progress(console=Console(stderr=True), transient=True)
        progress.start()
        task = progress.add_task("replaying", total=len(items))

    def on_progress(n: int) -> None:
        if progress is not None and task is not None:
            progress.update(task, completed=n)

    def on_error(msg: Any, e: Exception) -> None:
        warn(f"{msg.topic}: {e}")

    try:
        summary = R.replay(items, target, dry_run=dry_run, rate=rate, on_result=on_result,
                           on_progress=on_progress, on_error=on_error)
    finally:
        if progress is not None:
            progress.stop()
        writer.flush()
        if target is not None:
            target.close()
    if rows:
        common.print_table(rows, RESULT_COLUMNS if not dry_run else ["status", "topic", "tags", "keys", "body"])
    per_topic = ", ".join(f"{t}: {n}" for t, n in sorted(summary.by_topic.items()))
    verb = "would send" if dry_run else "sent"
    print(f"rmqtool replay: {summary.selected} selected, {verb} {summary.sent if not dry_run else summary.selected}, "
          f"{summary.failed} failed in {summary.seconds:.2f}s" + (f" ({per_topic})" if per_topic else ""),
          file=sys.stderr)
    if summary.failed:
        raise typer.Exit(1)


def register(app: typer.Typer) -> None:
    app.command("replay")(replay)
