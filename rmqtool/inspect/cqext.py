"""ConsumeQueueExt reading: the variable-length units of one queue's ext files, and address lookups.

Each file holds units back to back from position 0; an int16 size of -1 (`fullFillToEnd`) or 0
ends a file's data, and `ConsumeQueueExt.recover` then goes on with the next file. A ConsumeQueue
unit whose tagsCode `isExtAddr` points at the unit at `unDecorate(tagsCode)` of this stream.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from rmqtool.inspect.files import QueueFile, ReadOnlyFile, queue_files
from rmqtool.layouts.cqext import (
    CQ_EXT_HEAD,
    END_OF_FILE,
    MIN_EXT_UNIT_SIZE,
    decorate,
    is_ext_addr,
    undecorate,
)

CQ_EXT_DIR = "consumequeue_ext"  # StorePathConfigHelper.getStorePathConsumeQueueExt


@dataclass(frozen=True, slots=True)
class ExtEntry:
    file: QueueFile
    pos: int  # byte position in the file
    size: int
    tags_code: int = 0
    msg_store_time: int = 0
    bit_map_size: int = 0
    filter_bit_map: bytes = b""
    problem: str | None = None  # why the unit cannot be read (its fields are then partial)

    @property
    def offset(self) -> int:
        """Byte offset in the ext stream: what `unDecorate` of the CQ's address gives."""
        return self.file.base + self.pos

    @property
    def address(self) -> int:
        """The decorated address a ConsumeQueue unit stores for this unit."""
        return decorate(self.offset)

    @property
    def is_end_of_file(self) -> bool:
        return self.size == END_OF_FILE


def read_ext_unit(qf: QueueFile, buf, file_size: int, pos: int) -> ExtEntry | None:
    """The unit at `pos`, an end-of-file marker, a damaged unit (`problem` set), or None at the zero tail."""
    if pos + 2 > file_size:
        return None
    size = int.from_bytes(buf[pos : pos + 2], "big", signed=True)
    if size == 0:
        return None
    if size == END_OF_FILE:
        return ExtEntry(qf, pos, size)
    if size < MIN_EXT_UNIT_SIZE or pos + size > file_size:
        return ExtEntry(qf, pos, size, problem=f"unit size {size} is below {MIN_EXT_UNIT_SIZE} or runs past the "
                        f"file's end at {file_size}")
    _, tags, ts, bms = CQ_EXT_HEAD.unpack_from(buf, pos)
    if bms != size - MIN_EXT_UNIT_SIZE:  # CqExtUnit.write: size = MIN_EXT_UNIT_SIZE + bitMapSize
        return ExtEntry(qf, pos, size, tags, ts, bms, problem=f"bitMapSize {bms} but unit size {size} "
                        f"leaves {size - MIN_EXT_UNIT_SIZE} bytes for it")
    bitmap = bytes(buf[pos + MIN_EXT_UNIT_SIZE : pos + size])
    return ExtEntry(qf, pos, size, tags, ts, bms, bitmap)


def iter_ext_units(files: list[QueueFile]) -> Iterator[ExtEntry]:
    """Units (and end-of-file markers, and the first damaged unit of a file) in stream order."""
    for qf in files:
        with ReadOnlyFile(qf.path) as rof:
            pos = 0
            while True:
                e = read_ext_unit(qf, rof.buf, rof.size, pos)
                if e is None:
                    break
                yield e
                if e.problem is not None or e.is_end_of_file:
                    break
                pos += e.size


class ExtReader:
    """Looks units up by a CQ tagsCode address, as `ConsumeQueueExt.get` does; keeps files mapped."""

    def __init__(self, directory: Path) -> None:
        self.files = queue_files(directory)
        self._open: dict[int, ReadOnlyFile] = {}

    def get(self, address: int) -> ExtEntry | None:
        if not is_ext_addr(address):
            return None
        offset = undecorate(address)
        for qf in reversed(self.files):
            if qf.base <= offset:
                rof = self._open.get(qf.base)
                if rof is None:
                    rof = self._open[qf.base] = ReadOnlyFile(qf.path)
                if offset - qf.base >= rof.size:
                    return None
                e = read_ext_unit(qf, rof.buf, rof.size, offset - qf.base)
                return e if e is not None and not e.is_end_of_file else None
        return None

    def close(self) -> None:
        for rof in self._open.values():
            rof.close()
        self._open.clear()

    def __enter__(self) -> ExtReader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


@dataclass
class ExtRange:
    """The byte range of one queue's ext stream and how many units it holds."""

    min_offset: int = 0  # the first file's base (`ConsumeQueueExt.getMinAddress`, undecorated)
    max_offset: int = 0  # the last file's base + its units' end (`getMaxAddress`, undecorated)
    units: int = 0
    damaged: int = 0  # units that cannot be read (each ends its file's data)
    files: int = 0


def ext_range(directory: Path) -> ExtRange:
    files = queue_files(directory)
    r = ExtRange(files=len(files))
    if not files:
        return r
    r.min_offset, r.max_offset = files[0].base, files[-1].base
    for e in iter_ext_units(files):
        if e.problem is not None:
            r.damaged += 1
        elif not e.is_end_of_file:
            r.units += 1
            if e.file is files[-1]:
                r.max_offset = e.offset + e.size
    return r
