"""Pieces every command shares (cli.md "Everywhere"): where the data lives, times and durations,
output format selection and a fast JSON Lines writer.

`--store DIR` (env RMQ_STORE, default ~/store) is the embedded mode; `--namesrv` (env
NAMESRV_ADDR) the network mode. Output: a table on a terminal, JSON Lines otherwise or with
`--json`; `--format` picks explicitly.
"""

from __future__ import annotations

import importlib
import json
import sys
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import IO, Annotated, Any

import typer

from rmqtool.errors import RemotingError, StoreError
from rmqtool.timeparse import parse_duration_ms as parse_duration_ms  # re-exported for the commands
from rmqtool.timeparse import parse_time_ms as parse_time_ms

# -- the vocabulary: one long name, one short flag, one meaning in every command ------------------
# README.md "Options" holds the same table for users; tests/cli/test_vocabulary.py walks every
# command and fails when a name or a short flag means two things. Declare an option here when a
# second command needs it, and reuse these rather than spelling an option anew.
#
# Old spellings stay accepted but are not shown in help (HIDDEN_ALIASES): the help formatter in
# rmqtool/cli/helpfmt.py leaves them out.
HIDDEN_ALIASES = frozenset({"--limit", "--namesrv-addr"})

STORE_OPT = Annotated[
    Path | None,
    typer.Option("--store", envvar="RMQ_STORE", show_envvar=True, metavar="DIR", show_default="~/store",
                 help="Store directory (a broker's storePathRootDir): the embedded mode."),
]
NAMESRV_OPT = Annotated[
    str | None,
    typer.Option("--namesrv", "-n", envvar="NAMESRV_ADDR", show_envvar=True, metavar="HOST:PORT",
                 help="Name server(s), HOST:PORT[;HOST:PORT]: the network mode instead of opening a store."),
]
JSON_OPT = Annotated[bool, typer.Option("--json", help="JSON Lines output, also on a terminal.")]
TOPIC_OPT = Annotated[str | None, typer.Option("--topic", "-t", metavar="TOPIC", help="Only this topic.")]
QUEUE_OPT = Annotated[int | None, typer.Option("--queue", "-q", metavar="N", help="Only this queue id.")]
KEY_OPT = Annotated[str | None, typer.Option("--key", "-k", metavar="KEY", help="Only messages with this key.")]
TAG_OPT = Annotated[str | None, typer.Option("--tag", metavar="TAG", help="Only messages with this tag.")]
COUNT_OPT = Annotated[int | None, typer.Option("--count", "--limit", metavar="N",
                                                 help="Stop after N messages (records).")]
SINCE_OPT = Annotated[str | None, typer.Option("--since", metavar="TIME",
                                                 help="Stored at or after TIME (epoch ms or ISO-8601).")]
UNTIL_OPT = Annotated[str | None, typer.Option("--until", metavar="TIME",
                                                 help="Stored before TIME (epoch ms or ISO-8601).")]
DRY_RUN_OPT = Annotated[bool, typer.Option("--dry-run", help="Show what would be done; change nothing.")]
CONFIG_OPT = Annotated[Path | None, typer.Option("--config", "-c", metavar="FILE",
                                                   help="broker.conf with RocketMQ property names.")]
FLUSH_OPT = Annotated[str | None, typer.Option("--flush", metavar="sync|async", show_default="async",
                                                 help="Flush of the store (flushDiskType).")]
FOLLOW_OPT = Annotated[bool, typer.Option("--follow", help="Keep waiting for new messages.")]


def group_opt(default: str, help: str) -> Any:
    """`--group/-g GROUP`: producer or consumer group; the default differs per command."""
    return Annotated[str, typer.Option("--group", "-g", metavar="GROUP", show_default=default, help=help)]


def format_opt(values: str) -> Any:
    """`--format/-f FORMAT`; each command lists the values it takes (table, json, text, hex, TEMPLATE)."""
    return Annotated[str | None, typer.Option("--format", "-f", metavar="FORMAT", help=f"{values}.",
                                              show_default="table on a terminal, else json")]


# the names the commands were first written with
StoreOption = STORE_OPT
NamesrvOption = NAMESRV_OPT
JsonOption = JSON_OPT


def store_dir(value: Path | None) -> Path:
    """The store root: `--store`, else RMQ_STORE (typer reads it), else ~/store."""
    return (value if value is not None else Path.home() / "store").expanduser()


def network_mode(ctx: Any, namesrv: str | None) -> bool:
    """True when `--namesrv` was given, or NAMESRV_ADDR is set and `--store` was not given explicitly."""
    if not namesrv:
        return False
    if ctx is None:
        return True

    def from_command_line(param: str) -> bool:
        # compared by name: typer may use its own copy of click's ParameterSource enum
        return getattr(ctx.get_parameter_source(param), "name", None) == "COMMANDLINE"

    return from_command_line("namesrv") or not from_command_line("store")


def bridge(name: str) -> Callable[..., Any]:
    """`rmqtool.client.cli_bridge.<name>`, the network-mode implementation, or a clear exit-3 error."""
    try:
        mod = importlib.import_module("rmqtool.client.cli_bridge")
    except ModuleNotFoundError as e:
        if e.name not in ("rmqtool.client.cli_bridge", "rmqtool.client"):
            raise
        mod = None
    fn = getattr(mod, name, None) if mod is not None else None
    if fn is None:
        raise RemotingError("network mode not available (--namesrv/NAMESRV_ADDR); use --store for the embedded mode")
    return fn


def check_store_path(root: Path) -> None:
    """Refuse a store path that cannot be a directory before anything is created."""
    if root.exists() and not root.is_dir():
        raise StoreError(f"store path {root} is not a directory")
    parent = root
    while not parent.exists():
        parent = parent.parent
    if not parent.is_dir():
        raise StoreError(f"store path {root}: {parent} is not a directory")


def store_config(root: Path, **overrides: Any) -> Any:
    """A StoreConfig for an existing (or new) store, with the sizes it was written with.

    A broker refuses a store whose files differ from its configured sizes; a command opening a
    store someone else wrote (a `serve -c broker.conf` with other sizes, a test store) adopts
    them: from a `broker.conf` beside the store, else from the files, as `inspect` reads them
    (`load_layout_config`); a store written without a timer wheel stays without one. Index sizes that the files leave ambiguous are not guessed: the
    store then refuses to open rather than write into an index of the wrong shape.
    """
    from rmqtool.inspect.layoutconfig import load_layout_config
    from rmqtool.store.config import StoreConfig

    cfg = StoreConfig(store_path_root_dir=root)
    layout = load_layout_config(root) if root.is_dir() else None
    if layout is not None:
        cfg.mapped_file_size_commit_log = layout.commitlog_file_size
        cfg.mapped_file_size_consume_queue = layout.cq_file_size
        cfg.mapped_file_size_timer_log = layout.timerlog_file_size
        cfg.timer_precision_ms = layout.timer_precision_ms
        if layout.index_geometry_known:
            cfg.max_hash_slot_num, cfg.max_index_num = layout.hash_slot_num, layout.index_num
    if written_without_timer_wheel(root):
        cfg.timer_wheel_enable = False
    for k, v in overrides.items():
        setattr(cfg, k, v)
    return cfg


def written_without_timer_wheel(root: Path) -> bool:
    """A store with messages but no `timerwheel` nor `timerlog/`: a 4.x broker's (which has no
    timer wheel) or a 5.x one's with timerWheelEnable=false. A command writing into it does
    what that broker would: it creates no timer files (a 5.x broker creates them at its first
    start, so every store rmqtool or a default 5.x broker made has them)."""
    try:
        has_messages = any(p.is_file() for p in (root / "commitlog").iterdir())
    except OSError:
        return False
    return has_messages and not (root / "timerwheel").exists() and not (root / "timerlog").is_dir()


# -- output --------------------------------------------------------------------------------------
def is_tty(stream: IO[Any] | None = None) -> bool:
    stream = stream or sys.stdout
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


def choose_format(fmt: str | None, json_flag: bool = False, choices: Iterable[str] = ("table", "json")) -> str:
    """`--format` if given, else json with `--json` or when stdout is not a terminal, else table."""
    if fmt:
        return fmt
    if json_flag or not is_tty():
        return "json"
    return "table" if "table" in choices else "json"


_std_dumps = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), check_circular=False).encode
try:  # several times faster, same text for what we print (tests compare the two)
    import orjson

    def _dumps(obj: Any) -> str:
        try:
            return orjson.dumps(obj).decode("utf-8")
        except (TypeError, orjson.JSONEncodeError):  # ints over 64 bits, lone surrogates
            return _std_dumps(obj)
except ImportError:  # pragma: no cover - orjson is a dependency
    _dumps = _std_dumps


def json_line(obj: Any) -> str:
    """One compact JSON object, key order kept (the "stable key order" of cli.md)."""
    return _dumps(obj)


class JsonLinesWriter:
    """Writes JSON Lines to stdout in big chunks (a pipe write per line would dominate)."""

    def __init__(self, stream: IO[str] | None = None, *, buffer_lines: int = 512) -> None:
        self.stream = stream or sys.stdout
        self._buf: list[str] = []
        self._limit = buffer_lines

    def write_obj(self, obj: Any) -> None:
        self.write_line(_dumps(obj))

    def write_line(self, line: str) -> None:
        self._buf.append(line)
        if len(self._buf) >= self._limit:
            self.flush()

    def flush(self) -> None:
        if self._buf:
            self._buf.append("")
            self.stream.write("\n".join(self._buf))
            self._buf.clear()
        self.stream.flush()


def print_table(rows: list[dict[str, Any]], columns: list[str], title: str | None = None) -> None:
    """A Rich table on stdout (only used on terminals)."""
    from rich.console import Console
    from rich.table import Table

    table = Table(title=title)
    for c in columns:
        table.add_column(c)
    for r in rows:
        table.add_row(*["" if r.get(c) is None else str(r.get(c)) for c in columns])
    Console().print(table)


def warn(text: str) -> None:
    """A diagnostic line on stderr (stdout carries data only)."""
    print(f"rmqtool: {text}", file=sys.stderr)
