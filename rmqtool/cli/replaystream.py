"""JSON Lines for `rmqtool replay --jsonl` as a stream of numbered batches (bounded memory).

`replay` used to read all its input before sending anything (issue #10's streaming rule: the
shell path streams). `send`'s reader thread (cli/sendstream.py `LineReader`) reads the file
or pipe in chunks as they come into a small bounded queue; here its lines are grouped into
batches of at most `size` lines, each handed over as soon as it is full or `flush_s` after its
first line, with the number of its first line (error messages name lines as the text reader
did). Line ends are those of Python's text mode: \\n, \\r\\n and a lone \\r.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import IO

from rmqtool.cli.sendstream import FLUSH_S, LineReader, timed_batches

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
    first = 1  # the number of the batch's first line
    for batch in timed_batches(reader.lines, size, flush_s, list):
        yield first, batch
        first += len(batch)
