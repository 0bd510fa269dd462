"""Write a CommitLog directory with `rmqtool.layouts.message.encode_record` alone (no store engine).

Used to check the record codec against third-party decoders independently of the store, and
as the fallback store writer of the decoder tests. Placement follows `CommitLog.doAppend`: a
record that does not fit in what is left of a file, keeping 8 bytes spare, is preceded by a
blank (`totalSize` = the rest of the file, BLANK_MAGIC_CODE) and goes to the next file.
"""

from __future__ import annotations

from pathlib import Path

from rmqtool.layouts.constants import BLANK_MAGIC_CODE
from rmqtool.layouts.message import MessageExt, encode_record

END_FILE_MIN_BLANK_LENGTH = 8


def write_commitlog(directory: Path, messages: list[MessageExt], file_size: int) -> list[MessageExt]:
    """Append `messages` (queue and commit log offsets filled in place) to fresh files of `file_size`."""
    directory.mkdir(parents=True, exist_ok=True)
    queue_offsets: dict[tuple[str, int], int] = {}
    base, buf = 0, bytearray()

    def flush_file() -> None:
        (directory / f"{base:020d}").write_bytes(bytes(buf).ljust(file_size, b"\0"))

    for msg in messages:
        key = (msg.topic, msg.queue_id)
        msg.queue_offset = queue_offsets.get(key, 0)
        msg.commit_log_offset = base + len(buf)
        size = len(encode_record(msg))
        if size + END_FILE_MIN_BLANK_LENGTH > file_size:
            raise ValueError(f"a {size}-byte record never fits in a {file_size}-byte file")
        if len(buf) + size + END_FILE_MIN_BLANK_LENGTH > file_size:
            rest = file_size - len(buf)
            buf += rest.to_bytes(4, "big") + BLANK_MAGIC_CODE.to_bytes(4, "big", signed=True)
            flush_file()
            base, buf = base + file_size, bytearray()
            msg.commit_log_offset = base
        buf += encode_record(msg)
        queue_offsets[key] = msg.queue_offset + 1
    flush_file()
    return messages
