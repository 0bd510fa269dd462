"""stdin as a stream of message bodies for `rmqtool send`: bounded memory, batches on a timer.

`send` used to read all of stdin before sending anything: 488 MB RSS for 200,000 lines, and
`tail -f log | rmqtool send T` sent nothing at all. Here a reader thread reads stdin in chunks
as they come (a pipe returns what is there, so one line written by `tail -f` arrives at
once) and hands lists of lines to the sender through a small bounded queue: when sending is
slower than reading, the reader blocks and memory stays at a few chunks. `batches` groups the
lines into lists of at most `size` bodies and hands a list over as soon as it is full or
`flush_s` after its first line, whichever is first: a steady pipe is sent in full batches, a
trickle within `flush_s` of each line.

A read of short lines is queued QUEUE_LINES at a time, so that what is read ahead stays a few
MB of objects (a whole 1 MiB read of `seq` lines from a file is 150,000 of them) and a batch
is not cut from a list of that length (each cut copies the rest). A pipe is read at the size
it has: widened to 1 MiB (F_SETPIPE_SZ) it halved the context switches of a `cat | replay
--jsonl` but took 5-13% more CPU (1 MiB reads are parsed out of cache; 64 KiB ones in it).
"""

from __future__ import annotations

import os
import queue
import threading
import time
from collections.abc import Callable, Iterator
from typing import IO

from rmqtool.errors import InvalidMessage

READ_CHUNK = 1 << 20  # bytes per read(2)
QUEUE_CHUNKS = 8  # chunks read ahead of the sender at most
QUEUE_LINES = 4096  # lines per chunk at most: 1 MiB of `seq` is 150,000 bytes objects (7 MB)
FLUSH_S = 0.2  # a partial batch waits at most this long for more lines

_EOF = object()


class LineReader(threading.Thread):
    """Reads a binary stream in chunks, splits it into non-empty lines (\\n or \\r\\n ended)."""

    def __init__(self, stream: IO[bytes], max_line: int) -> None:
        super().__init__(name="stdin-reader", daemon=True)
        self.stream = stream
        self.max_line = max_line
        self.lines: queue.Queue[object] = queue.Queue(maxsize=QUEUE_CHUNKS)
        self.line_no = 0  # lines handed over so far, empty ones included
        self._fd: int | None = None  # the stream's file descriptor, once `run` has asked for it

    def _read(self) -> bytes:
        fd = self._fd
        if fd is None:  # not a real file (tests, wrappers)
            read1 = getattr(self.stream, "read1", None)
            return read1(READ_CHUNK) if read1 else self.stream.read(READ_CHUNK)
        return os.read(fd, READ_CHUNK)

    def run(self) -> None:
        tail = b""
        try:
            self._fd = self.stream.fileno()
        except (AttributeError, OSError, ValueError):  # not a real file (tests, wrappers)
            self._fd = None
        try:
            while True:
                data = self._read()
                if not data:
                    break
                parts = data.split(b"\n")  # the chunk itself: the held tail joins its first line only
                if tail:
                    parts[0] = tail + parts[0]
                tail = parts.pop()
                if len(parts) > QUEUE_LINES:  # short lines: a whole read would be ~7x its size in objects
                    for i in range(0, len(parts), QUEUE_LINES):
                        self.lines.put(parts[i:i + QUEUE_LINES])
                elif parts:
                    self.lines.put(parts)
                self.line_no += len(parts)
                if len(tail) > self.max_line:
                    raise InvalidMessage(f"stdin line {self.line_no + 1}: longer than {self.max_line} bytes "
                                         f"with no end of line")
            if tail:
                self.lines.put([tail])
            self.lines.put(_EOF)
        except BaseException as e:  # handed to the sender, which raises it after what came before
            self.lines.put(e)


def timed_batches(lines: queue.Queue, size: int, flush_s: float,
                  take: Callable[[list[bytes]], list[bytes]]) -> Iterator[list[bytes]]:
    """Lists of at most `size` items from a reader thread's queue of line chunks (`take` makes a
    chunk's items), each as soon as it is full or `flush_s` after its first item; a reader's
    error is raised after what came before it."""
    pending: list[bytes] = []
    due = 0.0
    while True:
        try:
            item = lines.get(timeout=max(0.0, due - time.monotonic()) if pending else None)
        except queue.Empty:
            yield pending
            pending = []
            continue
        if item is _EOF:
            break
        if isinstance(item, BaseException):
            if pending:
                yield pending
            raise item
        assert isinstance(item, list)
        items = take(item)
        if items and not pending:
            due = time.monotonic() + flush_s
        pending += items
        while len(pending) >= size:
            batch, pending = pending[:size], pending[size:]
            yield batch
            due = time.monotonic() + flush_s
    if pending:
        yield pending


def _bodies(chunk: list[bytes]) -> list[bytes]:
    """A chunk's non-empty lines, a trailing CR taken off."""
    return [b for b in (line[:-1] if line.endswith(b"\r") else line for line in chunk) if b]


def batches(stream: IO[bytes], size: int, *, max_line: int, flush_s: float = FLUSH_S) -> Iterator[list[bytes]]:
    """Lists of at most `size` bodies, each as soon as it is full or `flush_s` after its first line."""
    reader = LineReader(stream, max_line)
    reader.start()
    yield from timed_batches(reader.lines, size, flush_s, _bodies)
