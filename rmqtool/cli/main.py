"""The `rmqtool` Typer application: commands are registered here, each lives in its own module.

Errors of our own (`rmqtool.errors.RmqError`) become one line on stderr and the exit code of
cli.md here, in one place; `--debug` lets the traceback through.

`main()` imports only the module of the command it runs (`rmqtool send` has no use for the
dissectors `inspect` loads): a shell pipe pays the start-up of each process. `app`, as
imported by the tests and the man pages, has every command.
"""

from __future__ import annotations

import importlib
import sys

import typer

from rmqtool import __version__
from rmqtool.cli.helpfmt import RmqGroup
from rmqtool.errors import RmqError, StoreLocked

_app = typer.Typer(
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


@_app.callback()
def _root(
    version: bool = typer.Option(False, "--version", callback=_version, is_eager=True,
                                 help="Print the version and exit."),
    debug: bool = typer.Option(False, "--debug", help="Show tracebacks of errors."),
) -> None:
    """Run and dissect Apache RocketMQ 5.x message stores and brokers."""
    global _debug
    _debug = debug


# module -> the commands and groups its `register` added
_registered: dict[str, tuple[list[object], list[object]]] = {}


def _register(names: list[str]) -> None:
    """Import and register the commands `names`; the app lists them in COMMANDS order whatever
    the order of the calls (the root help prints them so)."""
    for name in names:
        if name in _registered:
            continue
        _registered[name] = ([], [])
        try:
            mod = importlib.import_module(f"rmqtool.cli.{name}")
        except ModuleNotFoundError as e:  # a command still being built
            if e.name != f"rmqtool.cli.{name}":
                raise
            continue
        commands, groups = len(_app.registered_commands), len(_app.registered_groups)
        mod.register(_app)
        _registered[name] = (_app.registered_commands[commands:], _app.registered_groups[groups:])
    _app.registered_commands[:] = [c for n in COMMANDS if n in _registered for c in _registered[n][0]]
    _app.registered_groups[:] = [g for n in COMMANDS if n in _registered for g in _registered[n][1]]


def __getattr__(name: str) -> typer.Typer:
    """`app` with every command (module attribute made at first use)."""
    if name == "app":
        _register(COMMANDS)
        return _app
    raise AttributeError(name)


def _command_named(argv: list[str]) -> str | None:
    """The command of a command line (the first word that is not a root option), if one we know."""
    for arg in argv:
        if not arg.startswith("-"):
            return arg if arg in COMMANDS else None
    return None


def main() -> None:
    command = _command_named(sys.argv[1:])
    _register([command] if command else COMMANDS)
    try:
        # non-standalone click returns typer.Exit's code instead of raising it
        rc = _app(standalone_mode=False, prog_name="rmqtool")
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
