"""The broker's `config/*.json` files: fastjson 1.x pretty text, lenient reading, `.bak` persistence.

A RocketMQ broker writes these with `JSON.toJSONString(obj, prettyFormat=true)` (fastjson 1.2.83,
formats.md §7.3). To stay byte-identical we reproduce the serializer's rules:

* a bean (`Bean`) writes its properties sorted by name and omits nulls;
* a map with String keys keeps its own (hash) order, one entry per line, TAB-indented;
* a map with Integer keys writes its entries **unquoted and inline** on the `{` line, then a
  newline and the indentation before `}` (`{0:250,1:251` NL TAB `}`), which is not valid JSON;
* collections (the sets of `groupTopicMap`) are written inline: `["a","b"]`;
* an empty map or bean is `{}`.

The reader accepts that text, plain JSON (quoted integer keys) and any whitespace. Persisting
follows the 5.x `ConfigManager` / `MixAll.string2File`: the old file is copied to `<f>.bak`, the
new text goes to `<f>.tmp`, is fsynced and renamed over `<f>`; loading falls back to `<f>.bak`
when `<f>` is missing, empty or unparsable.
"""

from __future__ import annotations

import enum
import json
import os
import re
import shutil
from pathlib import Path
from typing import Any

from rmqtool.errors import StoreError


class Bean(dict):
    """A Java bean: its properties are written alphabetically and null ones are left out."""


_ESCAPES = {
    '"': '\\"', "\\": "\\\\", "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r", "\t": "\\t",
}
_NEEDS_ESCAPE = re.compile(r'["\\\x00-\x1f]')


def _string(s: str) -> str:
    """fastjson's `SerializeWriter.writeStringWithDoubleQuote`: `/` and non-ASCII stay raw."""
    if not _NEEDS_ESCAPE.search(s):
        return f'"{s}"'
    return '"' + _NEEDS_ESCAPE.sub(lambda m: _ESCAPES.get(m.group(), f"\\u{ord(m.group()):04x}"), s) + '"'


def dumps(value: Any, indent: int = 0) -> str:
    """fastjson 1.x `toJSONString(value, prettyFormat=true)` for the value shapes configs use."""
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, enum.Enum):
        return _string(str(value.name))
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, str):
        return _string(value)
    if isinstance(value, dict):
        if isinstance(value, Bean):
            items = sorted((k, v) for k, v in value.items() if v is not None)
        else:
            items = [(k, v) for k, v in value.items() if v is not None]
        if not items:
            return "{}"
        close = "\n" + "\t" * indent + "}"
        if all(isinstance(k, int) and not isinstance(k, bool) for k, _ in items):
            # MapSerializer: non-String keys are written without quotes and without a newline
            return "{" + ",".join(f"{k}:{dumps(v, indent + 1)}" for k, v in items) + close
        pad = "\n" + "\t" * (indent + 1)
        return "{" + ",".join(f"{pad}{_string(str(k))}:{dumps(v, indent + 1)}" for k, v in items) + close
    if isinstance(value, (list, tuple, set, frozenset)):
        return "[" + ",".join(dumps(v, indent) for v in value) + "]"
    raise TypeError(f"cannot write {type(value).__name__} as fastjson")


# A string literal (kept as is) or an unquoted integer map key after `{` or `,`.
_LENIENT_KEY = re.compile(r'("(?:[^"\\]|\\.)*")|([{,]\s*)(-?\d+)(\s*:)', re.S)


def loads(text: str) -> Any:
    """Parse fastjson output (unquoted integer keys) or plain JSON; raise ValueError if neither."""

    def quote(m: re.Match[str]) -> str:
        if m.group(1) is not None:
            return m.group(1)
        return f'{m.group(2)}"{m.group(3)}"{m.group(4)}'

    return json.loads(_LENIENT_KEY.sub(quote, text))


def int_keys(table: dict[str, Any] | None) -> dict[int, Any]:
    """A map read back from JSON (string keys) with the Integer keys it had in Java."""
    return {int(k): v for k, v in (table or {}).items()}


def write_file(path: Path, text: str) -> None:
    """`MixAll.string2File` as 5.x: old content to `.bak`, new content via `.tmp` + fsync + rename."""
    path = Path(path)
    tmp = path.with_name(path.name + ".tmp")
    bak = path.with_name(path.name + ".bak")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        if path.exists() and path.stat().st_size > 0:
            shutil.copyfile(path, bak)
        os.replace(tmp, path)
        dir_fd = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)
    except OSError as e:
        raise StoreError(f"cannot write {path.name}: {e.strerror or e}") from None


def read_file(path: Path) -> Any | None:
    """The parsed content of `path`, else of `path.bak` (ConfigManager.load), else None."""
    path = Path(path)
    for candidate in (path, path.with_name(path.name + ".bak")):
        try:
            text = candidate.read_text(encoding="utf-8")
        except FileNotFoundError:
            continue
        except (OSError, UnicodeDecodeError):
            continue
        if not text.strip():
            continue
        try:
            return loads(text)
        except ValueError:
            continue
    return None


class ConfigManager:
    """RocketMQ's `ConfigManager`: one JSON file under `<store>/config`, loaded leniently, persisted safely."""

    file_name = ""

    def __init__(self, config_dir: Path) -> None:
        self.path = Path(config_dir) / self.file_name

    def encode(self) -> Any:
        """The object to write (Beans, maps); subclasses describe their Java class here."""
        raise NotImplementedError

    def decode(self, data: Any) -> None:
        """Take over what `load` read (the parsed JSON)."""
        raise NotImplementedError

    def to_text(self) -> str:
        return dumps(self.encode())

    def load(self) -> bool:
        """Load the file (or its `.bak`); False when neither exists or parses."""
        data = read_file(self.path)
        if not isinstance(data, dict):
            return False
        self.decode(data)
        return True

    def persist(self) -> None:
        write_file(self.path, self.to_text())


class DataVersion:
    """`DataVersion` (5.x JSON: counter, stateVersion, timestamp)."""

    __slots__ = ("counter", "state_version", "timestamp")

    def __init__(self, counter: int = 0, state_version: int = 0, timestamp: int = 0) -> None:
        self.counter = counter
        self.state_version = state_version
        self.timestamp = timestamp

    def next_version(self, now_ms: int, state_version: int = 0) -> None:
        """`nextVersion`: new timestamp, counter + 1."""
        self.timestamp = now_ms
        self.state_version = state_version
        self.counter += 1

    def to_bean(self) -> Bean:
        return Bean(counter=self.counter, stateVersion=self.state_version, timestamp=self.timestamp)

    @classmethod
    def from_json(cls, data: Any, default_ts: int = 0) -> DataVersion:
        if not isinstance(data, dict):
            return cls(timestamp=default_ts)
        return cls(int(data.get("counter", 0)), int(data.get("stateVersion", 0)),
                   int(data.get("timestamp", default_ts)))

    def __repr__(self) -> str:
        return f"DataVersion(counter={self.counter}, stateVersion={self.state_version}, timestamp={self.timestamp})"
