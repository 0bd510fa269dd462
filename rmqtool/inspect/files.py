"""Read-only access to store files: mapped-file queues, mmap views and zero checks.

Inspect never writes: every file is opened `rb` and mapped `ACCESS_READ`, so it works on a
read-only copy and beside a live broker. Files of a live broker are preallocated, so their
length does not move; their tail of zeros does, and readers treat a zero record as the end.
"""

from __future__ import annotations

import mmap
import os
import re
from collections.abc import Iterator
from pathlib import Path

from rmqtool.errors import InvalidInput, StoreError

# The offset-named files of a mapped-file queue: the store's one listing (`MappedFileQueue.load`'s
# filter), under the names inspect has always used.
from rmqtool.store.diskspace import map_read_only
from rmqtool.store.mappedfile import OFFSET_NAME
from rmqtool.store.mappedfile import OffsetFile as QueueFile
from rmqtool.store.mappedfile import offset_files as queue_files

INDEX_NAME = re.compile(r"^\d{17}$")
_CHUNK = 1 << 20
_ZEROS = bytes(_CHUNK)


class ReadOnlyFile:
    """A file mapped read-only; `buf` supports slicing, `struct.unpack_from` and `zlib.crc32`.

    An empty file maps to `b""`. Use as a context manager; `close()` releases the mapping.
    """

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        try:
            self._fh = open(self.path, "rb")  # noqa: SIM115 - closed in close()
        except OSError as e:
            raise StoreError(f"cannot open {self.path}: {e.strerror or e}") from None
        self.size = os.fstat(self._fh.fileno()).st_size
        self._mm: mmap.mmap | None = None
        if self.size:
            try:
                self._mm = map_read_only(self._fh.fileno(), self.size)
            except (OSError, ValueError) as e:
                self._fh.close()
                raise StoreError(f"cannot map {self.path}: {e}") from None
            self.buf: memoryview | bytes = memoryview(self._mm)
        else:
            self.buf = b""

    def fileno(self) -> int:
        return self._fh.fileno()

    @property
    def mapping(self) -> mmap.mmap | bytes:
        """The mmap itself: slicing it copies bytes, which for a small range is cheaper than the
        memoryview slice `buf` makes (the CommitLog scan's CRC)."""
        return self._mm if self._mm is not None else b""

    def first_nonzero(self, start: int, end: int | None = None) -> int:
        """`first_nonzero` over this file, skipping the holes of a sparse file."""
        return first_nonzero(self.buf, start, self.size if end is None else end, self._fh.fileno())

    def close(self) -> None:
        if isinstance(self.buf, memoryview):
            self.buf.release()
        self.buf = b""
        if self._mm is not None:
            self._mm.close()
            self._mm = None
        self._fh.close()

    def __enter__(self) -> ReadOnlyFile:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def first_nonzero(buf: memoryview | bytes, start: int, end: int, fd: int | None = None) -> int:
    """Position of the first non-zero byte in [start, end), or -1; constant memory.

    With the file's descriptor, holes of a sparse file (a fresh 1 GiB CommitLog is one) are
    skipped with SEEK_DATA/SEEK_HOLE instead of being read: they hold zeros by definition.
    Data regions are copied 1 MiB at a time out of the mapping (a memcpy) and compared in C:
    far faster than comparing memoryviews, which Python does element by element.
    """
    pos = start
    while pos < end:
        region_end = end
        if fd is not None:
            try:
                data = os.lseek(fd, pos, os.SEEK_DATA)
                region_end = min(end, os.lseek(fd, data, os.SEEK_HOLE))
            except OSError:  # ENXIO: only a hole from pos on; other errors: read it all
                if not _seek_unsupported(fd):
                    return -1
                data, region_end = pos, end
            if data >= end:
                return -1
            pos = max(pos, data)
        while pos < region_end:
            n = min(region_end - pos, _CHUNK)
            raw = bytes(buf[pos : pos + n])
            if raw != (_ZEROS if n == _CHUNK else _ZEROS[:n]):  # memcmp
                return pos + n - len(raw.lstrip(b"\0"))
            pos += n
    return -1


def _seek_unsupported(fd: int) -> bool:
    """True when the file system does not do SEEK_DATA (then the data must be read)."""
    try:
        os.lseek(fd, 0, os.SEEK_DATA)
        return False
    except OSError as e:
        import errno

        return e.errno != errno.ENXIO


def as_queue_files(path: Path) -> list[QueueFile]:
    """PATH as given on the command line: one offset-named file, or a directory of them."""
    path = Path(path)
    if path.is_dir():
        return queue_files(path)
    if path.is_file():
        base = int(path.name) if OFFSET_NAME.match(path.name) else 0
        return [QueueFile(path, base)]
    raise InvalidInput(f"{path}: no such file or directory")


def relpath(path: Path, root: Path | None) -> str:
    """`path` relative to `root` with `/` separators, or just its name."""
    if root is not None:
        try:
            return Path(path).relative_to(root).as_posix()
        except ValueError:
            pass
    return Path(path).name


def find_store_root(path: Path) -> Path | None:
    """The store root containing `path` (a directory holding commitlog/), if any."""
    p = Path(path).resolve()
    for cand in [p, *p.parents]:
        if (cand / "commitlog").is_dir():
            return cand
    return None


def walk_files(root: Path) -> Iterator[Path]:
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames.sort()
        for f in sorted(filenames):
            yield Path(dirpath) / f
