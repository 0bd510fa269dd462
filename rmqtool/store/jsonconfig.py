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

A broker does not write on the event loop: `serve` gives its managers a `ConfigWriter`, a
thread that writes each changed file (500 new groups are a handful of writes, not 500 fsyncs on
the loop). Java persists topics and groups in the request (`TopicConfigManager`,
`SubscriptionGroupManager`: the answer comes after the file is written) and offsets every
`flushConsumerOffsetInterval`. So does rmqtool: the broker's dispatch collects, in
`durable_waits`, a future for each topic or group write a request asks for, and answers once
the writer has put that change on disk (group commit: requests that arrive during a write share
the next one); other files (offsets) are written within the writer's batching window. The
writer's `stop` writes whatever is left. Without a writer (command-line tools) `persist` writes
at once, as before.
"""

from __future__ import annotations

import contextvars
import enum
import json
import logging
import os
import re
import shutil
import threading
import time
from concurrent.futures import Future
from pathlib import Path
from typing import Any

from rmqtool.errors import StoreError
from rmqtool.layouts.javahash import java_string_hash

log = logging.getLogger("rmqtool.store.config")

# Set by the broker's dispatch around a request: the writes of `durable_answer` managers the
# request asked for, each a future resolved (True: written, False: failed and retried later) by
# the writer thread once that change is on disk; the answer waits for them.
durable_waits: contextvars.ContextVar[list[Future[bool]] | None] = contextvars.ContextVar(
    "rmqtool_durable_waits", default=None)

class Bean(dict):
    """A Java bean: its properties are written alphabetically and null ones are left out."""


class Raw(str):
    """Text `dumps` already made (at the indentation where it goes): written as it is."""


class EntryCache:
    """The text of a big table (topics, groups), each entry made again only when it changed.

    A request answered once its topic or group is on disk means a write per request. Making
    the whole table each time (bean, text and Java hash bucket of 1000 entries: ~10 ms a
    file, more on a loaded machine) kept the writer thread holding the GIL the event loop
    needs, and the tuples it kept per entry filled the garbage collector's oldest generation
    (a full collection every few writes). Now an entry is compared with a copy of its fields
    taken when its text was made (a C-level dict comparison); only new or changed entries are
    written again, and the cache holds strings only, which the collector does not track.
    Entries come in the order of the Java map the broker writes (`ConcurrentHashMap` with
    `buckets` buckets, `javahash.hashmap_order`), each name's bucket hash computed once.
    """

    def __init__(self, buckets: int) -> None:
        self.buckets = buckets
        self._spread: dict[str, int] = {}  # name -> HashMap.hash(name.hashCode())
        self._fields: dict[str, Any] = {}  # name -> copy of the entry's fields its text was made from
        self._lines: dict[str, str] = {}  # name -> its line: NL, indentation, "name":{...}

    def render(self, table: dict[str, Any], indent: int) -> Raw:
        """`dumps` of `table` (values have `to_bean()`) whose entries are at `indent`, as `Raw`."""
        entries = list(table.items())  # one C call: a handler may change the table meanwhile
        if not entries:
            return Raw("{}")
        spread, fields_of, old = self._spread, self._fields, self._lines
        lines: dict[str, str] = {}
        pad = "\n" + "\t" * indent
        hashes = []
        for name, entry in entries:
            h = spread.get(name)
            if h is None:
                h = java_string_hash(name) & 0xFFFFFFFF
                h = spread[name] = h ^ (h >> 16)
            hashes.append(h)
            fields = getattr(entry, "__dict__", None)
            line = old.get(name)
            if line is None or fields is None or fields_of.get(name) != fields:
                try:
                    if fields is not None:  # copied first: a change made while the text is made shows next time
                        fields_of[name] = _copy_fields(fields)
                    line = f"{pad}{_string(name)}:{dumps(entry.to_bean(), indent)}"
                except BaseException:  # changed under us (the writer encodes again): no stale text kept
                    fields_of.pop(name, None)
                    raise
            lines[name] = line
        if len(fields_of) > len(lines):  # entries were deleted
            self._fields = {n: f for n, f in fields_of.items() if n in lines}
        self._lines = lines
        cap = 1
        while cap < self.buckets:
            cap <<= 1
        while len(entries) > cap * 3 // 4:
            cap <<= 1
        mask = cap - 1
        order = sorted(range(len(entries)), key=[h & mask for h in hashes].__getitem__)  # stable: insertion order in a bucket
        return Raw("{" + ",".join([lines[entries[i][0]] for i in order]) + "\n" + "\t" * (indent - 1) + "}")


def _copy_fields(value: Any) -> Any:
    """`value` with its containers copied (their contents may change in place later)."""
    if isinstance(value, dict):
        return {k: _copy_fields(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return type(value)(_copy_fields(v) for v in value)
    return value


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
    if type(value) is Raw:
        return value
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
    writer: ConfigWriter | None = None  # set by serve: persist() then only asks the writer thread
    durable_answer = False  # True: a request that changes this file is answered after the write

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
        """Write the file: now, or (with a `writer`) soon, from the writer's thread."""
        writer = self.writer
        if writer is not None:
            waits = durable_waits.get() if self.durable_answer else None
            done: Future[bool] | None = Future() if waits is not None else None
            if writer.request(self, done):
                if done is not None and waits is not None:
                    waits.append(done)
                return
        self.persist_now()

    def persist_now(self) -> None:
        write_file(self.path, self.to_text())


class ConfigWriter:
    """The thread that persists `ConfigManager`s off the event loop, batching requests.

    `request(manager)` marks the manager dirty and returns at once; the thread waits
    `batch_s` after the first request (more requests meanwhile are the same write), then
    encodes and writes every dirty manager. A request with a `done` future (a client waits for
    its answer) cuts the window short: the write starts at once, and requests that come while
    it runs are the next write; `done` is resolved when a write that began after the request
    has ended. The text is made on the writer thread while
    handlers may still change the tables: an encoder that meets a table changing under it
    (RuntimeError, KeyError) is simply run again. A write that fails (full disk) is logged once
    and retried every `retry_s` until it succeeds; the tables in memory stay authoritative.
    """

    def __init__(self, batch_s: float = 0.2, retry_s: float = 1.0) -> None:
        self.batch_s = batch_s
        self.retry_s = retry_s
        self.writes = 0  # files written, for tests and stats
        self._dirty: dict[int, ConfigManager] = {}
        self._waiters: dict[int, list[Future[bool]]] = {}  # futures to resolve when a manager is written
        self._cond = threading.Condition()
        self._thread: threading.Thread | None = None
        self._stopping = False
        self._failing: set[Path] = set()

    def attach(self, *managers: ConfigManager) -> None:
        for m in managers:
            m.writer = self

    def detach(self, *managers: ConfigManager) -> None:
        for m in managers:
            if m.writer is self:
                m.writer = None

    def start(self) -> None:
        with self._cond:
            if self._thread is not None:
                return
            self._stopping = False
            self._thread = threading.Thread(target=self._run, name="rmqtool-config-writer", daemon=True)
            self._thread.start()

    def request(self, manager: ConfigManager, done: Future[bool] | None = None) -> bool:
        """Queue a write of `manager` (`done` resolved once it is on disk); False when the writer
        is not running (write it yourself)."""
        with self._cond:
            if self._thread is None or self._stopping:
                return False
            self._dirty[id(manager)] = manager
            if done is not None:
                self._waiters.setdefault(id(manager), []).append(done)
            self._cond.notify()
            return True

    def stop(self) -> None:
        """Write what is pending and end the thread (a write that fails is left for the log)."""
        with self._cond:
            thread = self._thread
            self._stopping = True
            self._cond.notify()
        if thread is not None:
            thread.join()
        with self._cond:
            self._thread = None
        self._write_pending(final=True)

    def flush(self) -> None:
        """Write every pending manager now, on the caller's thread."""
        self._write_pending(final=False)

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._dirty and not self._stopping:
                    self._cond.wait()
                if self._stopping:
                    return
                # the batching window (later requests join this write), unless someone waits
                self._cond.wait_for(lambda: self._waiters or self._stopping, self.batch_s)
            if not self._write_pending(final=False):
                with self._cond:
                    self._cond.wait(self.retry_s)

    def _write_pending(self, *, final: bool) -> bool:
        with self._cond:
            batch = list(self._dirty.values())
            self._dirty.clear()
            waiters, self._waiters = self._waiters, {}  # each one's manager is in `batch`: both set together
        ok = True
        for manager in batch:
            written = False
            try:
                manager.persist_now() if final else self._write(manager)
                written = True
                self.writes += 1
                if manager.path in self._failing:
                    self._failing.discard(manager.path)
                    log.warning("%s written again", manager.path.name)
            except StoreError as e:
                ok = False
                if manager.path not in self._failing:
                    self._failing.add(manager.path)
                    log.warning("%s; kept in memory, written again when the disk lets it", e)
                if not final:
                    with self._cond:
                        self._dirty.setdefault(id(manager), manager)
            for done in waiters.pop(id(manager), ()):
                # a failed write answers too (as Java logs a failed persist and goes on); the
                # change stays in memory and is written again when the disk lets it
                if not done.done():
                    done.set_result(written)
        return ok

    @staticmethod
    def _write(manager: ConfigManager) -> None:
        for attempt in range(10):
            try:
                text = manager.to_text()
                break
            except (RuntimeError, KeyError):  # a table changed while it was being encoded
                if attempt == 9:
                    raise
                time.sleep(0.001)
        write_file(manager.path, text)


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
