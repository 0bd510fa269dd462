"""The broker's JSON configs, read leniently: fastjson writes integer map keys unquoted.

`{"offsetTable":{1:12,2:0}}` is not JSON; RocketMQ's fastjson accepts it and so do we, by quoting
bare integer keys (outside strings) before `json.loads`.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

_BARE_KEY = re.compile(r'("(?:[^"\\]|\\.)*")|([{,]\s*)(-?\d+)(\s*:)')


def quote_int_keys(text: str) -> str:
    def fix(m: re.Match[str]) -> str:
        if m.group(1) is not None:
            return m.group(1)
        return f'{m.group(2)}"{m.group(3)}"{m.group(4)}'

    return _BARE_KEY.sub(fix, text)


def is_config_file(path: Path) -> bool:
    """A broker JSON config in `config/`: the `*.json` files and `timermetrics` (no suffix)."""
    return path.is_file() and (path.suffix == ".json" or path.name == "timermetrics")


class ConfigError(ValueError):
    def __init__(self, pos: int, detail: str) -> None:
        super().__init__(detail)
        self.pos = pos
        self.detail = detail


def parse_config_text(text: str) -> Any:
    """Parse fastjson output; ConfigError(pos, detail) with the byte-ish position of the error."""
    if not text.strip():
        raise ConfigError(0, "empty file (a broker loads the .bak copy instead)")
    fixed = quote_int_keys(text)
    try:
        return json.loads(fixed)
    except json.JSONDecodeError as e:
        # map the position back: quoting only adds characters before the error point
        added = len(quote_int_keys(text[: e.pos])) - e.pos if e.pos <= len(text) else 0
        pos = max(0, min(len(text), e.pos - max(added, 0)))
        raise ConfigError(pos, f"{e.msg} at line {e.lineno} column {e.colno}") from None


def load_config(path: Path) -> Any:
    try:
        raw = path.read_bytes()
    except OSError as e:
        raise ConfigError(0, f"cannot read: {e.strerror or e}") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise ConfigError(e.start, f"not UTF-8: {e.reason}") from None
    return parse_config_text(text)


def int_keyed(d: Any) -> dict[int, int]:
    """A Map<Integer, Long> as parsed: keys back to int, non-numeric entries dropped."""
    out: dict[int, int] = {}
    if isinstance(d, dict):
        for k, v in d.items():
            try:
                out[int(k)] = int(v)
            except (TypeError, ValueError):
                continue
    return out
