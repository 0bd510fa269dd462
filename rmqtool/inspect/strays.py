"""verify's `bad-file-name`: files in a store directory that are not named as the broker names them.

A broker opens every mapped-file queue (commitlog/, each consumequeue/<topic>/<queueId>/,
batchconsumequeue/..., consumequeue_ext/..., timerlog/) with `MappedFileQueue.doLoad`, which
takes *every* file of the directory, sorted by name, not just the offset-named ones: an empty
file that sorts last is deleted, any other file of the wrong size fails the load, and one of the
right size whose name `Long.parseLong` rejects throws. Either failure makes `DefaultMessageStore.load`
(or `TimerMessageStore.load`) return false and the broker refuses to start; rmqtool's own open
(`store.mappedfile.load_listing`) refuses the same store. `IndexService.load` instead skips a
file whose name is not a number, opens any numeric name as an index file, and fails on a
subdirectory, which it cannot open.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

from rmqtool.inspect.files import INDEX_NAME, OFFSET_NAME, relpath
from rmqtool.inspect.problems import Problem

_JAVA_LONG = re.compile(r"[+-]?\d+")  # Long.parseLong: a sign, then decimal digits (Character.digit)


def _java_long(name: str) -> int | None:
    if not _JAVA_LONG.fullmatch(name):
        return None
    v = int(name)
    return v if -(1 << 63) <= v < (1 << 63) else None


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0  # a dangling link: Java's File.length() is 0


def check_queue_names(directory: Path, root: Path, file_size: int, *, what: str, when: str = "",
                      engine: bool = True) -> Iterator[Problem]:
    """`bad-file-name` for each file of a mapped-file queue's directory without a 20-digit name.

    `file_size` is the size the queue's files must have (`mappedFileSize...`); `what` names the
    queue in the detail, `when` the broker setting that makes it load the directory at all, and
    `engine` whether rmqtool's own store opens this directory (it has no BatchConsumeQueue or ext).
    """
    if not directory.is_dir():
        return
    entries = sorted(directory.iterdir(), key=lambda p: p.name)  # doLoad's order; dirs count for "last"
    for i, path in enumerate(entries):
        if path.is_dir() or OFFSET_NAME.match(path.name):
            continue
        size = _size(path)
        ours = "; rmqtool will not open the store either" if engine else ""
        refuse = f"{when}a broker refuses to start"
        if size == 0 and i == len(entries) - 1:
            fate = "it is empty and sorts last, so a broker's MappedFileQueue.load deletes it"
        elif size != file_size:
            fate = f"{refuse}: MappedFileQueue.load takes every file and this one is {size} bytes, not {file_size}{ours}"
        elif (offset := _java_long(path.name)) is None:
            fate = f"{refuse}: MappedFileQueue.load takes every file and Long.parseLong fails on this name{ours}"
        else:
            fate = f"{when}a broker loads it as the {what} file at offset {offset}{ours}"
        yield Problem(relpath(path, root), 0, "bad-file-name",
                      f"{what} files are named by the 20-digit offset of their first byte "
                      f"(00000000000000000000, ...); {fate}")


def queue_file_size(files, configured: int, from_conf: bool) -> int:
    """The size a queue directory's files must have: broker.conf's, else its first file's, else the default."""
    if not from_conf:
        for f in files[:1]:
            size = _size(f.path)
            if size:
                return size
    return configured


def check_index_names(directory: Path, root: Path, index_file_size: int) -> Iterator[Problem]:
    """`bad-file-name` for each entry of index/ that is not a 17-digit yyyyMMddHHmmssSSS file."""
    if not directory.is_dir():
        return
    for path in sorted(directory.iterdir(), key=lambda p: p.name):
        if path.is_dir():
            fate = "it is a directory: a broker's IndexService.load cannot open it and the broker refuses to start"
        elif INDEX_NAME.match(path.name):
            continue
        elif _java_long(path.name) is None:
            fate = "a broker's IndexService.load skips it (its name is not a number)"
        else:
            fate = (f"a broker's IndexService.load opens it as an index file anyway (mapping it to "
                    f"{index_file_size} bytes grows a shorter file); rmqtool skips it")
        yield Problem(relpath(path, root), 0, "bad-file-name",
                      f"index files are named by their creation time, yyyyMMddHHmmssSSS (17 digits); {fate}")
