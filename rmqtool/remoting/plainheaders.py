"""Header readers written out for each header class, for the headers Java clients send.

`headers._decode` walks a class's plan field by field, which is most of the cost of reading
the header of a send or a pull, read once per request. `plain_reader` turns the same plan into
a straight-line function (one `get`, one `int` per field, no per-field loop or dict of keyword
arguments) that takes only what is plainly valid: required fields present, numbers short
decimal text within their Java type. For anything else it returns None and the caller reads
the header with the plan as before, so the values accepted and the errors raised are the
generic reader's (`RemotingCommand.decodeCommandCustomHeader`'s, as headers.py follows it).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

_STR, _INT, _BOOL, _LONG = 0, 1, 2, 3  # headers.py's field kinds
_RANGES = {_INT: (-(2**31), 2**31 - 1), _LONG: (-(2**63), 2**63 - 1)}
_MAX_DIGITS = 20  # the generic reader hands anything from 24 characters on to its careful parse


def _parse_bool(v: str) -> bool:
    return v.strip().lower() == "true"  # Boolean.parseBoolean, as headers._parse_bool


def _never(ext: dict[str, str]) -> None:
    return None


def plain_reader(cls: type, plan: tuple[tuple[str | None, str, int, bool], ...]) -> Callable[[dict[str, str]], Any]:
    """`read(ext)`: an instance of `cls` when every field is plainly valid, else None."""
    fields = {f.name: f for f in dataclasses.fields(cls)}
    if any(not f.init for f in fields.values()) or [name for _k, name, _t, _r in plan] != list(fields):
        return _never  # not a plain dataclass header: always the generic reader
    ns: dict[str, Any] = {"cls": cls, "parse_bool": _parse_bool}
    lines = ["def read(ext):", "    get = ext.get"]
    names = []
    for i, (key, name, kind, required) in enumerate(plan):
        v = f"v{i}"
        names.append(v)
        f = fields[name]
        if not required:
            if f.default is dataclasses.MISSING:
                return _never  # a default_factory: left to the generic reader
            ns[f"d{i}"] = f.default
        if key is None:  # no extFields key reads this field (a V1 name without a V2 letter)
            if required:
                return _never
            lines.append(f"    {v} = d{i}")
            continue
        lines.append(f"    {v} = get({key!r})")
        missing = f"{v} is None" if kind == _STR else f"{v} is None or {v} == ''"
        lines.append(f"    if {missing}:")
        lines.append("        return None" if required else f"        {v} = d{i}")
        if kind == _STR:
            continue
        lines.append("    else:")
        if kind == _BOOL:
            lines.append(f"        {v} = parse_bool({v})")
            continue
        lo, hi = _RANGES[kind]
        lines += [
            "        try:",
            f"            if len({v}) > {_MAX_DIGITS}:",
            "                return None",
            f"            {v} = int({v})",
            "        except (TypeError, ValueError):",
            "            return None",
            f"        if not {lo} <= {v} <= {hi}:",
            "            return None",
        ]
    lines.append(f"    return cls({', '.join(names)})")
    exec(compile("\n".join(lines), f"<plain reader of {cls.__name__}>", "exec"), ns)  # noqa: S102 - our own text
    return ns["read"]
