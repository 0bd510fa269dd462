"""Help text in the usual Unix form, for every command (git's and kcat's, not Typer's own).

Typer renders `send [OPTIONS] {topic} [body]` and `--json <bool>`; a user expects
`send [OPTIONS] TOPIC [BODY]`, flags without a value placeholder, a metavar that says what a
value is (`--count N`, `--store DIR`), defaults always as `[default: ...]` and old spellings
(`common.HIDDEN_ALIASES`) left out. `RmqGroup` is the Typer group class of `rmqtool`: it applies
this to every command registered on the app, whichever module registers it, so a new command
gets the same help without doing anything.
"""

from __future__ import annotations

import types
from typing import Any

from typer.core import TyperGroup

from rmqtool.cli.common import HIDDEN_ALIASES


def _is_flag(p: Any) -> bool:
    return bool(getattr(p, "is_flag", False) or getattr(p, "count", False))


def _metavar(p: Any) -> str:
    return p.metavar or (p.name or "value").upper()


def default_text(p: Any) -> str | None:
    """The `[default: ...]` text: an explicit show_default string, else a plain non-empty default."""
    if p.show_default is False:
        return None
    if isinstance(p.show_default, str):
        return p.show_default
    if _is_flag(p):
        return None
    d = p.default
    if d is None or d == () or d == [] or callable(d):
        return None
    return str(getattr(d, "value", d))


def option_names(p: Any) -> list[str]:
    """The spellings shown for an option: short first, hidden aliases left out."""
    names = [o for o in p.opts if o not in HIDDEN_ALIASES]
    return sorted(names, key=lambda o: (o.startswith("--"), o))


def option_help_record(p: Any, ctx: Any) -> tuple[str, str] | None:
    if p.hidden:
        return None
    names = ", ".join(option_names(p))
    if p.secondary_opts:
        names += " / " + ", ".join(p.secondary_opts)
    if not _is_flag(p):
        names += f" {_metavar(p)}" + ("..." if p.nargs != 1 else "")
    extra = []
    if p.show_envvar and p.envvar:
        extra.append("env var: " + (p.envvar if isinstance(p.envvar, str) else ", ".join(p.envvar)))
    default = default_text(p)
    if default:
        extra.append(f"default: {default}")
    if p.required:
        extra.append("required")
    text = p.help or ""
    if extra:
        text = f"{text}  [{'; '.join(extra)}]" if text else f"[{'; '.join(extra)}]"
    return names, text


def argument_name(p: Any) -> str:
    return (p.metavar or p.name or "ARG").upper()


def argument_help_record(p: Any, ctx: Any) -> tuple[str, str] | None:
    if getattr(p, "hidden", False):
        return None
    extra = []
    default = default_text(p)
    if default and not p.required:
        extra.append(f"default: {default}")
    text = p.help or ""
    if extra:
        text = f"{text}  [{'; '.join(extra)}]"
    return argument_name(p), text


def argument_usage(p: Any) -> str:
    name = argument_name(p)
    name = name if p.required else f"[{name}]"
    return name + ("..." if p.nargs != 1 else "")


def apply(cmd: Any) -> None:
    """Give every parameter of `cmd` (and of its subcommands) the help above."""
    for p in cmd.params:
        if p.param_type_name == "option":
            p.get_help_record = types.MethodType(option_help_record, p)
            if not _is_flag(p) and p.metavar is None:
                p.metavar = _metavar(p)
        elif p.param_type_name == "argument":
            p.get_help_record = types.MethodType(argument_help_record, p)
            p.get_usage_pieces = types.MethodType(lambda self, ctx: [argument_usage(self)], p)
            p.metavar = argument_name(p)
    complete = cmd.shell_complete

    def shell_complete(ctx: Any, incomplete: str) -> list[Any]:
        """Shell completion offers the spellings help shows, not the old ones."""
        return [item for item in complete(ctx, incomplete) if getattr(item, "value", None) not in HIDDEN_ALIASES]

    cmd.shell_complete = shell_complete
    for sub in getattr(cmd, "commands", {}).values():
        apply(sub)


def summary_of(cmd: Any) -> str:
    """The first paragraph of a command's help, whole (click's short help cuts it at 45 characters)."""
    if cmd.short_help:
        return str(cmd.short_help)
    first = (cmd.help or "").strip().split("\n\n")[0]
    return " ".join(first.split())


class RmqGroup(TyperGroup):
    """The `rmqtool` group: commands in the order they were registered, help as above, and each
    command's summary whole in the list (wrapped, never cut with "...")."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        apply(self)

    def list_commands(self, ctx: Any) -> list[str]:
        return list(self.commands)

    def format_commands(self, ctx: Any, formatter: Any) -> None:
        rows = [(name, summary_of(cmd)) for name, cmd in self.commands.items() if not cmd.hidden]
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)
