"""Java's `String.hashCode()` and `HashMap` iteration order.

RocketMQ uses `String.hashCode()` for ConsumeQueue tagsCode, IndexFile keys and TimerLog topic
hashes, and stores properties in `HashMap` iteration order; both must be reproduced exactly for
byte-identical files.
"""

from __future__ import annotations

from functools import lru_cache


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
