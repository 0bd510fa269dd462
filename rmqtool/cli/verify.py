"""`rmqtool verify STORE`: check a store; one JSON line per problem, exit 1 when any."""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Annotated

import typer

from rmqtool.cli import common
from rmqtool.cli.inspect import default_store, progress_bar


def verify(
    store: Annotated[Path | None, typer.Argument(metavar="STORE", show_default="--store",
                                                 help="The store root.")] = None,
    no_crc: Annotated[bool, typer.Option("--no-crc", help="Skip body CRCs (as ReputMessageService does).")] = False,
    jobs: Annotated[int | None, typer.Option("--jobs", "-j", metavar="N", show_default="the CPU count",
                                             help="Processes for the CommitLog scan (logs under 64 MiB are "
                                                  "scanned in one).")] = None,
    replica: Annotated[bool, typer.Option(
        "--replica", help="The store is a slave's (or a `replicate` copy): its consumer and delay offsets and the "
        "timer checkpoint's masterTimerQueueOffset are the master's, so ones outside this store's queues are not "
        "problems. Implied by brokerRole=SLAVE in the store's broker.conf.")] = False,
    json_out: common.JSON_OPT = False,
    store_opt: common.STORE_OPT = None,
) -> None:
    """Check a store as a broker's recovery would, and more.

    CRC, magic codes, sizes, physical offsets, blank and zero tails, gaps between files,
    ConsumeQueue units against their records, index entries, TimerLog units and wheel slots,
    checkpoints, config JSON, delay and consumer offsets. One JSON line per problem (file,
    path, pos, kind, detail) on stdout, also on a terminal (--json is the default and only
    format), a summary on stderr; exit status 1 when anything was found.
    """
    # imported here: every other command starts without the checkers
    from rmqtool.inspect.layoutconfig import load_layout_config
    from rmqtool.inspect.render import dumps
    from rmqtool.inspect.replica import is_slave_store
    from rmqtool.inspect.verify import VerifyState, check_store

    root = store or store_opt or default_store()
    st = VerifyState(load_layout_config(root) if root.is_dir() else None)  # type: ignore[arg-type]
    st.replica = replica or (root.is_dir() and is_slave_store(root))
    t0 = time.perf_counter()
    n = 0
    kinds: dict[str, int] = {}
    total = sum(p.stat().st_size for p in (root / "commitlog").iterdir()) if (root / "commitlog").is_dir() else 0
    with progress_bar(total) as progress:
        for p in check_store(root, check_crc=not no_crc, state=st, progress=progress, jobs=jobs):
            n += 1
            kinds[p.kind] = kinds.get(p.kind, 0) + 1
            sys.stdout.write(dumps(p.to_json()) + "\n")
    sys.stdout.flush()
    dt = time.perf_counter() - t0
    by_kind = ", ".join(f"{k} {v}" for k, v in sorted(kinds.items()))
    print(f"rmqtool verify: {n} problem(s){' (' + by_kind + ')' if by_kind else ''}; {st.scan.records} records, {st.scan.bytes_checked / 1e6:.1f} MB of "
          f"CommitLog in {dt:.2f}s; CommitLog [{st.scan.min_offset}, {st.scan.end_offset})", file=sys.stderr)
    if st.replica_skipped:
        print(f"rmqtool verify: replica: {st.replica_skipped} offset(s) copied from the master lie outside this "
              "store's queues (not problems)", file=sys.stderr)
    elif not st.replica and st.scan.min_offset > 0 and kinds.get("consumer-offset-below-min"):
        print("rmqtool verify: if this is a slave's store, its consumer offsets are its master's: --replica",
              file=sys.stderr)
    # sys.exit, not typer.Exit: main() runs click with standalone_mode=False, which turns Exit into a
    # return value that is not passed on as the process status
    sys.exit(1 if n else 0)


def register(app: typer.Typer) -> None:
    app.command("verify")(verify)
