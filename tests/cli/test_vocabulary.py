"""One command-line language: every command's options walked through click's own tree.

A long name or a short flag that means two things, a data-printing command without `--json`,
or a short flag missing from README.md's vocabulary table fails here. Commands added later are
walked too: the test needs no list of them.
"""

from __future__ import annotations

import re
from collections import defaultdict
from pathlib import Path

import pytest
from typer.main import get_command

from rmqtool.cli.common import HIDDEN_ALIASES
from rmqtool.cli.main import app

README = Path(__file__).resolve().parents[2] / "README.md"
# commands that print no data of their own: `man` prints a manual page
NO_DATA = {"man"}


def _commands():
    group = get_command(app)
    out = [("rmqtool", group)]
    stack = [("rmqtool " + n, c) for n, c in group.commands.items()]
    while stack:
        name, cmd = stack.pop()
        out.append((name, cmd))
        stack += [(f"{name} {n}", c) for n, c in getattr(cmd, "commands", {}).items()]
    return out


def _options(cmd):
    return [p for p in cmd.params if p.param_type_name == "option"]


def _long(p):
    """The option's visible long name: its first `--` spelling that is not a hidden alias."""
    longs = [o for o in p.opts if o.startswith("--") and o not in HIDDEN_ALIASES]
    return longs[0] if longs else None


def _shorts(p):
    return [o for o in p.opts if not o.startswith("--")]


def _readme_vocabulary() -> dict[str, str]:
    """short flag -> long name, from README.md's "Options: one vocabulary" table."""
    text = README.read_text(encoding="utf-8")
    section = text.split("### Options: one vocabulary", 1)[1].split("\n#", 1)[0]
    table = {}
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) >= 3 and cells[1].startswith("`-"):
            long = re.match(r"`(--[a-z-]+)", cells[0])
            assert long, line
            table[cells[1].strip("`")] = long.group(1)
    return table


def test_every_command_is_walked():
    names = {n for n, _ in _commands()}
    assert {"rmqtool send", "rmqtool consume", "rmqtool inspect", "rmqtool verify", "rmqtool repair",
            "rmqtool serve", "rmqtool replay"} <= names


def test_a_short_flag_means_one_long_option_everywhere():
    meaning: dict[str, set[str]] = defaultdict(set)
    where: dict[str, list[str]] = defaultdict(list)
    for name, cmd in _commands():
        for p in _options(cmd):
            for s in _shorts(p):
                meaning[s].add(_long(p) or s)
                where[s].append(f"{name} {_long(p)}")
    clashes = {s: sorted(where[s]) for s, longs in meaning.items() if len(longs) > 1}
    assert not clashes, f"short flags with two meanings: {clashes}"


def test_a_long_option_has_one_short_flag_and_one_kind_everywhere():
    shorts: dict[str, set[tuple[str, ...]]] = defaultdict(set)
    kinds: dict[str, set[str]] = defaultdict(set)
    where: dict[str, list[str]] = defaultdict(list)
    for name, cmd in _commands():
        for p in _options(cmd):
            long = _long(p)
            if long is None or long in ("--help",):
                continue
            shorts[long].add(tuple(sorted(_shorts(p))))
            kinds[long].add("flag" if p.is_flag else "value")
            where[long].append(name)
    two_shorts = {k: sorted(v) for k, v in shorts.items() if len(v) > 1}
    assert not two_shorts, f"long options spelt with different short flags: {two_shorts}"
    two_kinds = {k: sorted(where[k]) for k, v in kinds.items() if len(v) > 1}
    assert not two_kinds, f"long options that are a flag in one command and take a value in another: {two_kinds}"


def test_a_hidden_alias_is_one_option_s_second_name():
    for name, cmd in _commands():
        for p in _options(cmd):
            hidden = [o for o in p.opts if o in HIDDEN_ALIASES]
            assert not hidden or _long(p), (name, p.opts)


def test_every_short_flag_is_in_the_readme_vocabulary():
    table = _readme_vocabulary()
    assert table.get("-n") == "--namesrv" and table.get("-h") == "--help"
    for name, cmd in _commands():
        for p in _options(cmd):
            for s in _shorts(p):
                assert table.get(s) == _long(p), f"{name}: {s} is {_long(p)}; README's table says {table.get(s)}"


@pytest.mark.parametrize("name,cmd", [c for c in _commands() if c[0] != "rmqtool"], ids=lambda x: str(x))
def test_every_data_printing_command_takes_json(name, cmd):
    if getattr(cmd, "commands", None) or name.split()[-1] in NO_DATA:
        pytest.skip("prints no data")
    assert "--json" in {o for p in _options(cmd) for o in p.opts}, f"{name} has no --json"


def test_the_vocabulary_names_the_same_ideas_the_same_way():
    """The spellings that issue #16 found split: one of each is left."""
    seen: dict[str, set[str]] = defaultdict(set)
    for name, cmd in _commands():
        for p in _options(cmd):
            for o in p.opts:
                seen[o].add(name.split()[-1])
    assert "--namesrv" in {o for p in _options(get_command(app).commands["serve"]) for o in p.opts}
    assert "consume" in seen["--count"] and "inspect" in seen["--count"]
    assert "consume" in seen["--since"] and "inspect" in seen["--since"] and "replay" in seen["--since"]
    assert "consume" in seen["--format"] and "inspect" in seen["--format"]
