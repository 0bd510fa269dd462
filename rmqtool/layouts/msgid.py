"""Message ids (formats.md §2.8).

The offset msgId names where a record sits (store host and CommitLog offset); UNIQ_KEY is the
client-made id (`MessageClientIDSetter`): fixed prefix (IP, pid, class-loader hash), then the
milliseconds since the start of the month and a 16-bit counter.
"""

from __future__ import annotations

import calendar
import ipaddress
import itertools
import os
import random
import struct
import threading
import time
from dataclasses import dataclass
from functools import lru_cache

from rmqtool.layouts.net import Host, pack_host


def create_offset_msg_id(store_host: Host, commit_log_offset: int) -> str:
    """`MessageDecoder.createMessageId`: hex of store IP, int32 port, int64 offset."""
    if 0 <= commit_log_offset <= 0x7FFFFFFFFFFFFFFF:  # every send answer: the host's hex is cached
        return host_hex(store_host) + format(commit_log_offset, "016X")
    return (pack_host(store_host) + struct.pack(">q", commit_log_offset)).hex().upper()


def create_offset_msg_ids(store_host: Host, commit_log_offsets: list[int]) -> str:
    """A batch send's answer (`MessageBatch`: `createMessageId` of each record, comma-joined).

    The offsets are packed as Java's longs in one call and hexed with a comma every 8 bytes,
    then each gets the host's hex in front: three C calls, where formatting each id took a
    quarter of a microsecond (8 µs of a 32-message batch's answer)."""
    if not commit_log_offsets:
        return ""
    head = host_hex(store_host)
    packed = struct.pack(f">{len(commit_log_offsets)}q", *commit_log_offsets)  # struct caches the format
    return head + packed.hex(",", 8).upper().replace(",", "," + head)


@lru_cache(maxsize=256)
def host_hex(host: Host) -> str:
    """The store host part of an offset msgId."""
    return pack_host(host).hex().upper()


@dataclass(frozen=True)
class OffsetMsgId:
    host: Host
    commit_log_offset: int


def decode_offset_msg_id(msg_id: str) -> OffsetMsgId:
    """`MessageDecoder.decodeMessageId`: 32 hex chars are IPv4, 56 are IPv6."""
    raw = bytes.fromhex(msg_id)
    if len(raw) == 16:
        ip = str(ipaddress.IPv4Address(raw[:4]))
        port, off = struct.unpack(">iq", raw[4:])
    elif len(raw) == 28:
        ip = str(ipaddress.IPv6Address(raw[:16]))
        port, off = struct.unpack(">iq", raw[16:])
    else:
        raise ValueError(f"an offset msgId has 32 or 56 hex digits, not {len(msg_id)}")
    return OffsetMsgId(Host(ip, port), off)


@dataclass(frozen=True)
class UniqKey:
    ip: str
    pid: int
    class_loader_hash: int
    month_diff_ms: int
    counter: int

    def timestamp_ms(self, near_ms: int) -> int:
        """The creation time, taking the month that contains (or precedes) `near_ms` (UTC)."""
        start = month_start_ms(near_ms)
        t = start + self.month_diff_ms
        if t > near_ms + 86_400_000:  # made in the previous month
            prev = month_start_ms(start - 1)
            t = prev + self.month_diff_ms
        return t


def month_start_ms(now_ms: int) -> int:
    tm = time.gmtime(now_ms / 1000)
    return calendar.timegm((tm.tm_year, tm.tm_mon, 1, 0, 0, 0)) * 1000


def decode_uniq_key(key: str) -> UniqKey:
    raw = bytes.fromhex(key)
    if len(raw) == 16:
        ip, rest = str(ipaddress.IPv4Address(raw[:4])), raw[4:]
    elif len(raw) == 28:
        ip, rest = str(ipaddress.IPv6Address(raw[:16])), raw[16:]
    else:
        raise ValueError(f"a UNIQ_KEY has 32 or 56 hex digits, not {len(key)}")
    pid, clh, diff, counter = struct.unpack(">hiih", rest)
    return UniqKey(ip, pid & 0xFFFF, clh, diff, counter & 0xFFFF)


class UniqKeyFactory:
    """Makes UNIQ_KEY ids as `MessageClientIDSetter.createUniqID` does, thread-safe."""

    def __init__(self, ip: str = "127.0.0.1", pid: int | None = None, seed: int | None = None) -> None:
        addr = ipaddress.ip_address(ip)
        rnd = random.Random(seed)
        pid = os.getpid() if pid is None else pid
        self._prefix = addr.packed + struct.pack(">hi", _s16(pid), _s32(rnd.getrandbits(32)))
        self._counter = itertools.count(rnd.getrandbits(16))
        self._lock = threading.Lock()
        self._month_start = 0
        self._next_month = 0

    def create(self, now_ms: int | None = None) -> str:
        now = int(time.time() * 1000) if now_ms is None else now_ms
        with self._lock:
            if now >= self._next_month or now < self._month_start:
                self._month_start = month_start_ms(now)
                self._next_month = month_start_ms(self._month_start + 32 * 86_400_000)
            counter = next(self._counter) & 0xFFFF
            diff = max(0, now - self._month_start)
        return (self._prefix + struct.pack(">iH", _s32(diff), counter)).hex().upper()

    def create_many(self, now_ms: int, n: int) -> list[str]:
        """`n` ids of one time, as `n` calls of `create(now_ms)` in a row give them (one lock)."""
        with self._lock:
            if now_ms >= self._next_month or now_ms < self._month_start:
                self._month_start = month_start_ms(now_ms)
                self._next_month = month_start_ms(self._month_start + 32 * 86_400_000)
            start = next(self._counter)
            self._counter = itertools.count(start + n)
            diff = max(0, now_ms - self._month_start)
        head = (self._prefix + struct.pack(">i", _s32(diff))).hex().upper()
        return [f"{head}{c & 0xFFFF:04X}" for c in range(start, start + n)]


def _s16(v: int) -> int:
    v &= 0xFFFF
    return v - 0x10000 if v & 0x8000 else v


def _s32(v: int) -> int:
    v &= 0xFFFFFFFF
    return v - 0x100000000 if v & 0x80000000 else v
