"""The `rmqtool` Typer application: commands are registered here, each lives in its own module.

Errors of our own (`rmqtool.errors.RmqError`) become one line on stderr and the exit code of
cli.md here, in one place; `--debug` lets the traceback through.
"""

from __future__ import annotations

import importlib
import sys

import typer

from rmqtool import __version__
from rmqtool.cli.helpfmt import RmqGroup
from rmqtool.errors import RmqError, StoreLocked

app = typer.Typer(
    name="rmqtool",
    help="Run and dissect Apache RocketMQ 5.x message stores and brokers.",
    no_args_is_help=True,
    cls=RmqGroup,
    rich_markup_mode=None,  # plain help, as git and kcat print it (cli/helpfmt.py)
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)

# command name -> module under rmqtool.cli defining `register(app)`
COMMANDS = ["serve", "send", "consume", "replay", "inspect", "verify", "repair", "replicate", "man"]

_debug = False
# the next step for a store that a running broker holds: go through that broker
LOCKED_HINT = "; it is held by a broker: use --namesrv HOST:PORT to reach it, or stop it first"


def _version(value: bool) -> None:
    if value:
        typer.echo(f"rmqtool {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: bool = typer.Option(False, "--version", callback=_version, is_eager=True,
                                 help="Print the version and exit."),
    debug: bool = typer.Option(False, "--debug", help="Show tracebacks of errors."),
) -> None:
    """Run and dissect Apache RocketMQ 5.x message stores and brokers."""
    global _debug
    _debug = debug


for _name in COMMANDS:
    try:
        _mod = importlib.import_module(f"rmqtool.cli.{_name}")
    except ModuleNotFoundError as _e:  # a command still being built
        if _e.name != f"rmqtool.cli.{_name}":
            raise
        continue
    _mod.register(app)


def main() -> None:
    try:
        # non-standalone click returns typer.Exit's code instead of raising it
        rc = app(standalone_mode=False, prog_name="rmqtool")
        sys.exit(rc if isinstance(rc, int) else 0)
    except RmqError as e:
        if _debug:
            raise
        hint = LOCKED_HINT if isinstance(e, StoreLocked) else ""
        print(f"rmqtool: {e}{hint}", file=sys.stderr)
        sys.exit(e.exit_code)
    except typer.Exit as e:
        sys.exit(e.exit_code)
    except typer.Abort:
        print("rmqtool: aborted", file=sys.stderr)
        sys.exit(130)
    except KeyboardInterrupt:
        sys.exit(130)
    except BrokenPipeError:
        sys.exit(0)
    except Exception as e:
        # usage errors (Typer's bundled click raises its own ClickException classes)
        if hasattr(e, "show") and isinstance(getattr(e, "exit_code", None), int):
            e.show()
            sys.exit(e.exit_code)
        if _debug:
            raise
        print(f"rmqtool: internal error: {e.__class__.__name__}: {e} (run with --debug for details)",
              file=sys.stderr)
        sys.exit(3)
