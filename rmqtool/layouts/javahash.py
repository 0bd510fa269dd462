"""Java's `String.hashCode()` and `HashMap` iteration order.

RocketMQ uses `String.hashCode()` for ConsumeQueue tagsCode, IndexFile keys and TimerLog topic
hashes, and stores properties in `HashMap` iteration order; both must be reproduced exactly for
byte-identical files.
"""

from __future__ import annotations

import struct
from functools import lru_cache
from operator import mul


@lru_cache(maxsize=65536)
def java_string_hash(s: str) -> int:
    """`s.hashCode()` as a signed int32: h = 31*h + c over UTF-16 code units."""
    h = 0
    if s.isascii():
        for ch in s.encode("ascii"):
            h = (31 * h + ch) & 0xFFFFFFFF
    else:
        data = s.encode("utf-16-be", "surrogatepass")
        for i in range(0, len(data), 2):
            h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return h - 0x100000000 if h & 0x80000000 else h


_MASK32 = 0xFFFFFFFF
_POW_LIMIT = 512
_P31 = [pow(31, j, 1 << 32) for j in range(_POW_LIMIT + 1)]  # 31**j mod 2**32


class _Weights(dict):
    """`_POWS[n][i]` = 31**(n-1-i) mod 2**32, the weight of character i of an n-character string;
    made for a length when first needed (all 513 lengths at import took 131,000 pow calls,
    a tenth of a second of every command's start-up)."""

    def __missing__(self, n: int) -> tuple[int, ...]:
        w = self[n] = tuple(reversed(_P31[:n]))
        return w


_POWS = _Weights()
_COLUMNS_FROM = 8  # below this many strings of one length, per-string sums are cheaper
_unpacks: dict[tuple[int, str], struct.Struct] = {}


def java_string_hashes(texts: list[str], prefix: str = "", *, signed: bool = False) -> list[int]:
    """`(prefix + t).hashCode()` of every text, as unsigned 32-bit ints (`& 0xFFFFFFFF`), or as
    Java's signed ints with `signed` (what the index takes the absolute value of).

    The index hashes two or more keys per stored message, so this is built for many at once.
    hashCode is a polynomial in 31, and h(prefix + t) = h(prefix) * 31**len(t) + h(t), so the
    shared `topic#` prefix is hashed once. ASCII texts of equal length are then evaluated a
    column at a time in C: character j of every text is spread into its own 64-bit slot of one
    big int (no slot can carry into the next: 127 * 2**32 * 512 < 2**64), multiplied by its
    weight and summed; slot k of the sum is text k's hash before the mod. Other texts (non-
    ASCII, very long, or too few of a length) use per-text sums or `java_string_hash`. Texts
    of one length that share leading characters (UNIQ_KEYs of one producer: its address, pid
    and start time, then a counter) get those hashed once into the base and skip their columns.
    """
    if signed:
        column = _one_length_hashes(texts, prefix, "i")
        if column is not None:
            return column
        return [h - 0x100000000 if h & 0x80000000 else h for h in _hashes(texts, prefix)]
    return _one_length_hashes(texts, prefix, "I") or _hashes(texts, prefix)


def _one_length_hashes(texts: list[str], prefix: str, code: str) -> list[int] | None:
    """The column path for enough ASCII texts of one length, in `code` ("i" or "I"), else None."""
    if len(texts) < _COLUMNS_FROM:
        return None
    n = len(texts[0])
    joined = "".join(texts)
    if n > _POW_LIMIT or not prefix.isascii() or not joined.isascii():
        return None
    lengths = list(map(len, texts))
    if min(lengths) != max(lengths):
        return None
    hp = java_string_hash(prefix) & _MASK32 if prefix else 0
    same = _common_length(min(texts), max(texts))  # every text lies between these two
    base = hp * _P31[n]
    if same:
        # the shared head's own hash as one sum in C: it changes from batch to batch (a producer's
        # ids share their time field only), so java_string_hash's cache would not hold it
        base += (sum(map(mul, texts[0][:same].encode("ascii"), _POWS[same])) & _MASK32) * _P31[n - same]
    return list(_column_hashes(texts, n, base & _MASK32, same, code, joined))


def _hashes(texts: list[str], prefix: str) -> list[int]:
    """`java_string_hashes` (unsigned) for texts the column path does not take in one go."""
    hp = java_string_hash(prefix) & _MASK32 if prefix else 0
    if len(texts) < _COLUMNS_FROM and prefix.isascii():  # a single put: plain sums, no grouping
        pows, p31 = _POWS, _P31
        small = []
        for t in texts:
            n = len(t)
            if n > _POW_LIMIT or not t.isascii():
                small.append(java_string_hash.__wrapped__(prefix + t) & _MASK32)
            else:
                small.append((hp * p31[n] + sum(map(mul, t.encode("ascii"), pows[n]))) & _MASK32)
        return small
    out = [0] * len(texts)
    by_len: dict[int, list[int]] = {}
    if prefix.isascii() and "".join(texts).isascii():
        lengths = list(map(len, texts))
        for i, n in enumerate(lengths):
            by_len.setdefault(n, []).append(i)
    else:
        for i, t in enumerate(texts):
            if t.isascii() and prefix.isascii():
                by_len.setdefault(len(t), []).append(i)
            else:
                out[i] = java_string_hash.__wrapped__(prefix + t) & _MASK32
    for n, idxs in by_len.items():
        base = (hp * _P31[n]) & _MASK32 if n <= _POW_LIMIT else (hp * pow(31, n, 1 << 32)) & _MASK32
        if n > _POW_LIMIT:
            for i in idxs:
                out[i] = java_string_hash.__wrapped__(prefix + texts[i]) & _MASK32
        elif len(idxs) < _COLUMNS_FROM:
            pows = _POWS[n]
            for i in idxs:
                out[i] = (base + sum(map(mul, texts[i].encode("ascii"), pows))) & _MASK32
        else:
            for i, h in zip(idxs, _column_hashes([texts[i] for i in idxs], n, base), strict=True):
                out[i] = h
    return out


def _common_length(low: str, high: str) -> int:
    """Length of the prefix `low` and `high` share (so do all texts sorting between them), for two
    ASCII texts of one length (what `_one_length_hashes` has checked): the highest bit of their XOR
    as integers gives it in a few C calls (6,700 instructions for two of a batch's UNIQ_KEYs,
    against 14,000 for a binary search over slices)."""
    diff = int.from_bytes(low.encode("ascii"), "big") ^ int.from_bytes(high.encode("ascii"), "big")
    return len(low) - ((diff.bit_length() + 7) >> 3)


def _column_hashes(texts: list[str], n: int, base: int, start: int = 0, code: str = "I",
                   joined: str | None = None) -> tuple[int, ...]:
    """Hashes of `len(texts)` ASCII texts of length `n`, each plus `base`, mod 2**32, from the
    columns from `start` on (those before are in `base`); unsigned, or signed with `code` "i".
    `joined` is the texts joined, where the caller has it already."""
    k = len(texts)
    data = ("".join(texts) if joined is None else joined).encode("ascii")
    spread = bytearray(k << 3)
    from_bytes = int.from_bytes
    pows = _POWS[n]
    total = 0
    for j in range(start, n):
        spread[::8] = data[j::n]
        total += from_bytes(spread, "little") * pows[j]
    if base:
        total += from_bytes(base.to_bytes(8, "little") * k, "little")
    unpack = _unpacks.get((k, code))
    if unpack is None:
        unpack = _unpacks[k, code] = struct.Struct("<" + (code + "4x") * k)  # the low 32 bits of each slot
    # the sum can carry out of the last slot only beyond bit 64*k: cut it to k slots
    return unpack.unpack(total.to_bytes((k << 3) + 8, "little")[: k << 3])


def _bucket(key: str, cap: int) -> int:
    h = java_string_hash(key) & 0xFFFFFFFF
    return (h ^ (h >> 16)) & (cap - 1)


def hashmap_order(keys: list[str], initial_capacity: int = 16) -> list[str]:
    """Iteration order of a `java.util.HashMap` built by inserting `keys` in this order.

    Within one bucket entries keep insertion order (resizes split buckets stably); the table
    doubles while size exceeds 0.75 x capacity. Tree bins (8+ keys in one bucket) are ignored:
    property maps never get there.
    """
    cap = 1
    while cap < initial_capacity:
        cap <<= 1
    while len(keys) > cap * 3 // 4:
        cap <<= 1
    indexed = sorted(range(len(keys)), key=lambda i: (_bucket(keys[i], cap), i))
    return [keys[i] for i in indexed]
