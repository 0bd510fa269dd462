"""`rmqtool replay`: send stored messages again (cli.md).

Sources: a group's dead letters (`--dlq GROUP`), a topic's messages in a queue-offset or time
window (`--topic T`), or JSON Lines exported by `consume` / `inspect` (`--jsonl FILE`, `-` for
stdin). They are read from `--from-store DIR` (read-only: a stopped broker's store or a copy of a
crashed one's), else from the target itself. The target is `--namesrv` (network) or `--store`.
One result line per message on stdout, a progress bar (terminals) and a summary on stderr.
"""

from __future__ import annotations

import gc
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
        _replay_jsonl(jsonl, window, to_topic=to_topic, dry_run=dry_run, rate=rate, group=group, json_out=json_out,
                      store=store, namesrv=namesrv, network=network)
        return
    if from_store is not None:
        items = list(R.from_store(from_store, topic=topic, dlq_group=dlq, window=window, to_topic=to_topic,
                                  warn=warn))
    elif network:
        items = list(R.from_network_dlq(namesrv or "", dlq or "", to_topic=to_topic, window=window, warn=warn,
                                        topic=topic))
    else:
        items = list(R.from_store(common.store_dir(store), topic=topic, dlq_group=dlq, window=window,
                                  to_topic=to_topic, warn=warn))
    target = None if dry_run else _target(network, namesrv, group, store)
    out = _Output(json_out, dry_run, bool(items), len(items))
    try:
        summary = R.replay(items, target, dry_run=dry_run, rate=rate, on_result=out.on_result,
                           on_progress=out.on_progress, on_error=out.on_error)
    finally:
        out.close()
        if target is not None:
            target.close()
    out.done(summary, dry_run)


def _target(network: bool, namesrv: str | None, group: str, store: Path | None) -> Any:
    from rmqtool.client import replay as R

    if network:
        return R.NetworkTarget(namesrv, group)
    root = common.store_dir(store)
    return R.StoreTarget(root, common.store_config(root))


def _replay_jsonl(path: str, window: Any, *, to_topic: str | None, dry_run: bool, rate: float | None, group: str,
                  json_out: bool, store: Path | None, namesrv: str | None, network: bool) -> None:
    """JSON Lines as a stream (cli/replaystream.py): each batch parsed, sent and its results
    printed as it comes. The target is opened once the first batch is parsed (a bad first line
    creates nothing); a bad line later stops the stream, exit 2, after the lines before it were
    sent and printed. Into the embedded store, a batch goes from its parsed fields
    (client/replaylines.py) unless a window is given."""
    from rmqtool.cli.replaystream import line_batches
    from rmqtool.client import replay as R
    from rmqtool.client.replaylines import parse_lines

    warn = common.warn
    if path == "-":
        stream: Any = getattr(sys.stdin, "buffer", sys.stdin)
        fh = None
    else:
        try:
            fh = stream = open(path, "rb")  # noqa: SIM115 - closed below
        except OSError as e:
            raise InvalidInput(f"cannot read {path}: {e.strerror or e}") from None
    out = _Output(json_out, dry_run, True, None)
    target: Any = None
    replayer: Any = None
    fields = window.everything()  # the window needs each line's source fields: MessageExts

    def start() -> Any:
        nonlocal target
        if not dry_run:
            target = _target(network, namesrv, group, store)
        # what start-up made (modules, the store's tables) lives as long as the command: frozen,
        # the collector's passes over a long stream's garbage no longer scan it (as `serve` does)
        gc.freeze()
        return R.Replayer(target, dry_run=dry_run, rate=rate, on_result=out.on_result,
                          on_lines=out.on_lines, on_progress=out.on_progress, on_error=out.on_error)

    try:
        for first, lines in line_batches(stream, R.REPLAY_BATCH):
            if fields:
                batch = parse_lines(lines, first, to_topic=to_topic, warn=warn)
                error = batch.error
            else:
                items: list[Any] = []
                error = None
                try:
                    for item in R.from_json_lines(lines, to_topic=to_topic, warn=warn, first_line=first):
                        if window.accepts(item.source):
                            items.append(item)
                except InvalidInput as e:
                    error = e
            if error is not None and replayer is None:
                raise error  # in the first batch: nothing sent, no store created
            replayer = replayer or start()
            if fields:
                replayer.send_lines(batch)  # raises its error after the lines before it
            else:
                replayer.send_messages([R.replay_message(i) for i in items])
                if error is not None:
                    raise error
            out.flush()
        replayer = replayer or start()
        summary = replayer.finish()
    finally:
        if fh is not None:
            fh.close()
        out.close()
        if target is not None:
            target.close()
    out.done(summary, dry_run)


class _Output:
    """Result lines on stdout (JSON Lines as each batch is done, or a table per batch on a
    terminal), a progress bar on a terminal's stderr, the summary line."""

    def __init__(self, json_out: bool, dry_run: bool, progress: bool, total: int | None) -> None:
        self.json = common.choose_format(None, json_out) == "json"
        self.writer = common.JsonLinesWriter()
        self.rows: list[dict[str, Any]] = []
        self.columns = RESULT_COLUMNS if not dry_run else ["status", "topic", "tags", "keys", "body"]
        self.on_result = self.writer.write_obj if self.json else self.rows.append
        self.on_lines = self._lines if self.json else None
        self.progress: Any = None
        self.task: Any = None
        if progress and not dry_run and common.is_tty(sys.stderr):
            from rich.console import Console
            from rich.progress import Progress

            self.progress = Progress(console=Console(stderr=True), transient=True)
            self.progress.start()
            self.task = self.progress.add_task("replaying", total=total)

    def _lines(self, text: str) -> None:
        self.writer.flush()
        self.writer.stream.write(text)

    def on_progress(self, n: int) -> None:
        if self.progress is not None:
            self.progress.update(self.task, completed=n)

    def on_error(self, msg: Any, e: Exception) -> None:
        common.warn(f"{msg.topic}: {e}")

    def flush(self) -> None:
        """What the batch gave, now (a `tail -f` pipe sees each result)."""
        if self.rows:
            common.print_table(self.rows, self.columns)
            self.rows.clear()
        self.writer.flush()

    def close(self) -> None:
        if self.progress is not None:
            self.progress.stop()
            self.progress = None
        self.flush()

    def done(self, summary: Any, dry_run: bool) -> None:
        per_topic = ", ".join(f"{t}: {n}" for t, n in sorted(summary.by_topic.items()))
        verb = "would send" if dry_run else "sent"
        print(f"rmqtool replay: {summary.selected} selected, {verb} "
              f"{summary.sent if not dry_run else summary.selected}, {summary.failed} failed in "
              f"{summary.seconds:.2f}s" + (f" ({per_topic})" if per_topic else ""), file=sys.stderr)
        if summary.failed:
            raise typer.Exit(1)


def register(app: typer.Typer) -> None:
    app.command("replay")(replay)
