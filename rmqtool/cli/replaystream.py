"""JSON Lines for `rmqtool replay --jsonl` as a stream of numbered batches (bounded memory).

`replay` used to read all its input before sending anything (issue #10's streaming rule: the
shell path streams). `send`'s reader thread (cli/sendstream.py `LineReader`) reads the file
or pipe in chunks as they come into a small bounded queue; here its lines are grouped into
batches of at most `size` lines, each handed over as soon as it is full or `flush_s` after its
first line, with the number of its first line (error messages name lines as the text reader
did). Line ends are those of Python's text mode: \\n, \\r\\n and a lone \\r.
"""

from __future__ import annotations

import queue
import time
from collections.abc import Iterator
from typing import IO

from rmqtool.cli.sendstream import _EOF, FLUSH_S, LineReader

NO_LIMIT = 1 << 62  # a JSON line is as long as its message makes it, as with the text reader


class JsonLineReader(LineReader):
    """`LineReader` with universal newlines: a \\r (alone or before \\n) ends a line too."""

    def __init__(self, stream: IO[bytes]) -> None:
        super().__init__(stream, NO_LIMIT)
        self._held_cr = False

    def _read(self) -> bytes:
        while True:
            raw = super()._read()
            data = b"\r" + raw if self._held_cr else raw
            self._held_cr = False
            if b"\r" not in data:
                return data
            if raw and data.endswith(b"\r"):  # may be the first half of a \r\n: kept for the next read
                data = data[:-1]
                self._held_cr = True
                if not data:
                    continue  # an empty read would mean the end of input
            return data.replace(b"\r\n", b"\n").replace(b"\r", b"\n")


def line_batches(stream: IO[bytes], size: int, *, flush_s: float = FLUSH_S) -> Iterator[tuple[int, list[bytes]]]:
    """(number of the first line, lines) of at most `size` lines, empty ones included."""
    reader = JsonLineReader(stream)
    reader.start()
    pending: list[bytes] = []
    first = 1  # the number of pending[0]
    due = 0.0
    while True:
        try:
            item = reader.lines.get(timeout=max(0.0, due - time.monotonic()) if pending else None)
        except queue.Empty:
            yield first, pending
            first += len(pending)
            pending = []
            continue
        if item is _EOF:
            break
        if isinstance(item, BaseException):
            if pending:
                yield first, pending
            raise item
        assert isinstance(item, list)
        if not pending:
            due = time.monotonic() + flush_s
        pending += item
        while len(pending) >= size:
            batch, pending = pending[:size], pending[size:]
            yield first, batch
            first += size
            due = time.monotonic() + flush_s
    if pending:
        yield first, pending
