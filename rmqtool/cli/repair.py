"""`rmqtool repair STORE`: rebuild derived files and cut torn tails, as a broker's recovery would."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from rmqtool.cli import common
from rmqtool.cli.inspect import default_store


def repair(
    store: Annotated[Path | None, typer.Argument(metavar="STORE", show_default="--store",
                                                 help="The store root.")] = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Print the plan; change nothing.")] = False,
    json_out: common.JSON_OPT = False,
    store_opt: common.STORE_OPT = None,
) -> None:
    """Repair a store: cut torn tails, rebuild what is derived.

    Cuts the CommitLog and TimerLog where recovery would stop, sets later files aside, rebuilds
    ConsumeQueues, index files and the timer wheel and pulls checkpoints back to the data.

    Topics marked queue.type=BatchCQ in config/topics.json, or with a batchconsumequeue/ directory,
    get their BatchConsumeQueues rebuilt instead of ConsumeQueues, and their consumer offsets are
    checked against them. ConsumeQueueExt files are kept; a rebuilt unit keeps its ext address
    only while the ext unit still matches its record.

    Nothing is dropped: every cut byte range and replaced file goes to STORE/repair-<time>/
    (with plan.json). Refuses a store whose lock is held (a running broker). Prints one JSON
    line per action (--json is the default and only format).
    """
    from rmqtool.inspect.render import dumps  # here: every other command starts without them
    from rmqtool.inspect.repair import repair as do_repair

    root = store or store_opt or default_store()
    plan = do_repair(root, dry_run=dry_run)
    for a in plan.actions:
        sys.stdout.write(dumps(a.to_json()) + "\n")
    sys.stdout.flush()
    where = "" if dry_run else f"; cut bytes and replaced files are in {plan.side_dir}"
    print(f"rmqtool repair: {len(plan.actions)} action(s){' planned (dry run)' if dry_run else ' done'}{where}",
          file=sys.stderr)


def register(app: typer.Typer) -> None:
    app.command("repair")(repair)
