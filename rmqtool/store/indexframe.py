"""The put path's frame to the index process: one appended batch's index keys, column by column.

RocketMQ has no such frame (its `ReputMessageService` reads the keys back out of the CommitLog
in the same process); here the keys the appender already gathered for `build_index_columns`
go to the child (indexproc.py) as one header, the CommitLog offsets as one packed array and
the topics, UNIQ_KEYs and KEYS each as one '\\x00'-joined UTF-8 text, None sent as an empty
item (the index treats None and "" alike: `record_keys`). The topic goes once when all
records have the same. Pickling the same tuple cost the child more per record than the
columns' two `split`s. A value holding '\\x00' itself (the put path does not forbid it) or one
that is not valid UTF-8 (a lone surrogate) makes `encode_columns` answer None and the batch
goes pickled instead. Both processes run on one machine: the numbers are in native byte order.
"""

from __future__ import annotations

import struct
from array import array

KIND = 0x55  # b"U": a pickled message starts with 0x80 (protocol 2 and later)
# kind, one topic for all?, record count, storeTimestamp, bytes of the topics, UNIQ_KEYs, KEYS texts
_HEAD = struct.Struct("=BBIqIII")
HEAD_SIZE = _HEAD.size
_unpack_head = _HEAD.unpack_from
_unpack_ts = struct.Struct("=q").unpack_from
_TS_AT = 6  # where storeTimestamp sits in the header


def _joined(items: list[str | None], n: int) -> bytes | None:
    """The items '\\x00'-joined in UTF-8, None as ""; None when an item holds '\\x00' or is not UTF-8."""
    try:
        text = "\x00".join(items)  # type: ignore[arg-type]
    except TypeError:  # a None among them
        text = "\x00".join([s or "" for s in items])
    if text.count("\x00") != n - 1:
        return None
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:
        return None


def encode_columns(topics: list[str], store_timestamp: int, phys: list[int], uniq_keys: list[str | None],
                   key_texts: list[str | None]) -> bytes | None:
    """The frame of `build_index_columns(topics, store_timestamp, phys, uniq_keys, key_texts)`;
    None when a value cannot go in it (the caller pickles the columns)."""
    n = len(phys)
    if not n:
        return None
    topic = topics[0]
    if topics.count(topic) == n:
        one = 1
        try:
            t: bytes | None = topic.encode("utf-8")
        except UnicodeEncodeError:
            return None
    else:
        one = 0
        t = _joined(topics, n)  # type: ignore[arg-type]
    u = _joined(uniq_keys, n)
    k = _joined(key_texts, n)
    if t is None or u is None or k is None:
        return None
    return b"".join((_HEAD.pack(KIND, one, n, store_timestamp, len(t), len(u), len(k)), array("q", phys).tobytes(),
                     t, u, k))


def frame_timestamp(frame: bytes) -> int:
    """The storeTimestamp of a frame of `encode_columns` (frames of one store time are indexed together)."""
    return _unpack_ts(frame, _TS_AT)[0]


def decode_columns(frame: bytes | memoryview) -> tuple[list[str], int, list[int], list[str], list[str]]:
    """`build_index_columns`' arguments back from a frame: (topics, storeTimestamp, phys, UNIQ_KEYs, KEYS),
    with "" where the put path had None."""
    _kind, one, n, ts, lt, lu, lk = _unpack_head(frame)
    view = memoryview(frame)
    p = HEAD_SIZE + 8 * n
    offsets = array("q")
    offsets.frombytes(view[HEAD_SIZE:p])
    q = p + lt
    r = q + lu
    topic_text = str(view[p:q], "utf-8")
    topics = [topic_text] * n if one else topic_text.split("\x00")
    return (topics, ts, offsets.tolist(), str(view[q:r], "utf-8").split("\x00"),
            str(view[r : r + lk], "utf-8").split("\x00"))
