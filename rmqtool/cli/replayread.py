"""`replay --jsonl` input read on the main thread and parsed a chunk at a time (issue #15).

Why: `line_batches` (cli/replaystream.py) has a reader thread split each 1 MiB chunk into
line objects that are parsed one `orjson.loads` call each; a stream of 1 KiB messages then
pays a thread hand-over per chunk, a copy of every line and a parser call per line. Here the
file or pipe is read with os.read on the caller's thread (poll(2) waits for the rest of a
partial batch at most `flush_s`, as the reader's queue did), and a chunk's complete lines
are parsed as one JSON array: the newlines become commas in one copy, one `orjson.loads`
gives every line's value. The lines themselves are only split out of the chunk when a batch
needs them (another shape of line, a window, a bad line).

That array has one value per line, exactly as parsing each line would give, when: it parses,
it has as many values as the chunk has lines, every value is an object, and no line holds
`}` , `{` (with JSON whitespace between): a line cannot then hold two values, so each of the
commas put in for the newlines separates two values and no value spans a newline. A chunk
that fails any of these (a blank line, a \\r, a bad line) is split into lines as the reader
thread splits it, and its batches take the line path with its own errors.
"""

from __future__ import annotations

import re
import select
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import IO, Any

import orjson

from rmqtool.cli.replaystream import FLUSH_S, JsonLineReader, line_batches

_TWO_VALUES = re.compile(rb"\}\s*,\s*\{")  # how a line holding two objects joins them
_DICT = dict


class _Chunk:
    """The complete lines of one read: their parsed values (`objs`), or their text only."""

    __slots__ = ("head", "text", "start", "stop", "objs", "_lines")

    def __init__(self, head: bytes, text: bytes, start: int, stop: int) -> None:
        self.head = head  # the first line: the held tail and the read up to its first \n
        # the other lines: text[start:stop] (one empty line when start == stop, none when stop < start)
        self.text, self.start, self.stop = text, start, stop
        self.objs: list[Any] | None = None
        self._lines: list[bytes] | None = None

    def lines(self) -> list[bytes]:
        """The lines as the reader thread splits them."""
        if self._lines is None:
            rest = self.text[self.start:self.stop].split(b"\n") if self.stop >= self.start else []
            self._lines = [self.head, *rest]
        return self._lines

    def count(self) -> int:
        if self.objs is not None:
            return len(self.objs)
        return len(self.lines())

    def parse(self) -> None:
        """`objs` when the array of its lines is one value per line (module docstring)."""
        try:
            first = orjson.loads(self.head)
        except orjson.JSONDecodeError:
            return
        if type(first) is not _DICT:
            return
        if self.stop < self.start:
            self.objs = [first]
            return
        text, start, stop = self.text, self.start, self.stop
        if _TWO_VALUES.search(text, start, stop) is not None:
            return
        joined = bytearray(text).replace(b"\n", b",")  # same length: the \n before and after the lines
        joined[start - 1] = 0x5B  # [
        joined[stop] = 0x5D  # ]
        try:
            rest = orjson.loads(memoryview(joined)[start - 1:stop + 1])
        except orjson.JSONDecodeError:
            return
        if (type(rest) is not list or len(rest) != text.count(b"\n", start, stop) + 1
                or list(map(type, rest)).count(_DICT) != len(rest)):
            return
        rest.insert(0, first)
        self.objs = rest


@dataclass(slots=True)
class JsonBatch:
    """A batch of at most `size` lines, numbered from `first`: ranges of chunks' lines."""

    first: int
    ranges: list[tuple[_Chunk, int, int]]

    def objs(self) -> list[Any] | None:
        """Every line's parsed value, or None when a line is in a chunk that did not parse."""
        out: list[Any] = []
        for chunk, a, b in self.ranges:
            if chunk.objs is None:
                return None
            out += chunk.objs[a:b]
        return out

    def lines(self) -> list[bytes]:
        out: list[bytes] = []
        for chunk, a, b in self.ranges:
            out += chunk.lines()[a:b]
        return out

    def __len__(self) -> int:
        return sum(b - a for _, a, b in self.ranges)


def json_batches(stream: IO[bytes], size: int, *, flush_s: float = FLUSH_S) -> Iterator[JsonBatch]:
    """`line_batches`' batches (the same lines, numbers and timing rule), read on this thread."""
    try:
        fd = stream.fileno()
    except (AttributeError, OSError, ValueError):  # not a real file (tests, wrappers): the reader thread
        for first, lines in line_batches(stream, size, flush_s=flush_s):
            chunk = _Chunk(b"", b"", 1, 0)
            chunk._lines = lines
            yield JsonBatch(first, [(chunk, 0, len(lines))])
        return
    reader = JsonLineReader(stream)  # for its reads (\r\n and a lone \r made \n), not started
    poller = select.poll()
    poller.register(fd, select.POLLIN | select.POLLHUP | select.POLLERR)
    pending: list[tuple[_Chunk, int, int]] = []
    count = 0  # lines in pending
    first = 1
    due = 0.0
    tail = b""
    while True:
        if count:
            left = due - time.monotonic()
            if left <= 0 or not poller.poll(max(1, int(left * 1000 + 0.999))):
                yield JsonBatch(first, pending)
                first += count
                pending, count = [], 0
                continue
        data = reader._read()
        if not data:
            break
        f = data.find(b"\n")
        if f < 0:
            tail += data
            continue
        last = data.rfind(b"\n")
        chunk = _Chunk(tail + data[:f], data, f + 1, last)
        tail = data[last + 1:]
        chunk.parse()
        n = chunk.count()
        if not count:
            due = time.monotonic() + flush_s
        pending.append((chunk, 0, n))
        count += n
        while count >= size:
            batch, pending, count = _cut(pending, size)
            yield JsonBatch(first, batch)
            first += size
            due = time.monotonic() + flush_s
    if tail:
        chunk = _Chunk(tail, b"", 1, 0)
        chunk.parse()
        pending.append((chunk, 0, 1))
        count += 1
    if count:
        yield JsonBatch(first, pending)


def _cut(pending: list[tuple[_Chunk, int, int]], size: int
         ) -> tuple[list[tuple[_Chunk, int, int]], list[tuple[_Chunk, int, int]], int]:
    """The first `size` lines of `pending`, the rest and its number of lines."""
    batch: list[tuple[_Chunk, int, int]] = []
    need = size
    i = 0
    while need:
        chunk, a, b = pending[i]
        if b - a <= need:
            batch.append((chunk, a, b))
            need -= b - a
            i += 1
        else:
            batch.append((chunk, a, a + need))
            pending = [(chunk, a + need, b), *pending[i + 1:]]
            return batch, pending, sum(y - x for _, x, y in pending)
    rest = pending[i:]
    return batch, rest, sum(y - x for _, x, y in rest)
