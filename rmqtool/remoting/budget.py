"""A cap on the bytes that partial frames of all connections of a server may hold.

Netty's `LengthFieldBasedFrameDecoder` (NettyDecoder) accumulates a frame until its declared
length is there, up to `frameMaxLength` (16 MiB) per channel and without any total: twenty
connections that each declare a 16 MiB frame and trickle it in hold 320 MiB. Here each
connection holds at most one partial frame (the frame reader never keeps more), and before a
connection goes on reading a frame that is not complete, it reserves the frame's declared length
from this budget. A connection whose reservation does not fit stops reading (its bytes wait in
the kernel's socket buffer, TCP flow control slows its sender) and is admitted, in the order it
came, when reservations are given back: a frame completes or a connection closes. A frame is
never allocated at its declared length up front; the reservation only bounds what it can grow to.
One frame is always admitted when nothing else is held, so a frame larger than the whole budget
still gets through, alone. Frames up to `SMALL_FRAME` bytes (every request but large sends)
never wait: they count against the budget but cannot be starved by large ones held open.
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from typing import Protocol

log = logging.getLogger("rmqtool.remoting")

DEFAULT_TOTAL_LIMIT = 64 * 1024 * 1024  # four frames of Java's frameMaxLength at once
SMALL_FRAME = 64 * 1024


class Reader(Protocol):
    """What the budget needs of a connection: its reservation, and a way to stop and resume reads."""

    reserved: int

    def pause_reading(self) -> None: ...

    def resume_reading(self) -> None: ...


class FrameBudget:
    def __init__(self, limit: int = DEFAULT_TOTAL_LIMIT) -> None:
        self.limit = limit
        self.used = 0
        self.waiting: OrderedDict[Reader, int] = OrderedDict()
        self.paused_total = 0  # connections ever made to wait (for tests and stats)

    def hold(self, conn: Reader, need: int, peer: object = "") -> None:
        """`conn` now assembles a frame of `need` bytes (0: none); pause it if that does not fit."""
        if need == conn.reserved and conn not in self.waiting:
            return
        self.used -= conn.reserved
        conn.reserved = 0
        self.waiting.pop(conn, None)
        if need:
            if need > SMALL_FRAME and (self.waiting or not self._fits(need)):
                self.waiting[conn] = need
                self.paused_total += 1
                conn.pause_reading()
                log.warning("pausing reads from %s: its %d-byte frame does not fit the %d bytes left of the %d-byte "
                            "budget for partial frames", peer, need, max(0, self.limit - self.used), self.limit)
            else:
                self.used += need
                conn.reserved = need
        self._admit()

    def drop(self, conn: Reader) -> None:
        """`conn` is closed: its reservation goes back to the others."""
        self.waiting.pop(conn, None)
        self.used -= conn.reserved
        conn.reserved = 0
        self._admit()

    def _fits(self, need: int) -> bool:
        return self.used == 0 or self.used + need <= self.limit

    def _admit(self) -> None:
        while self.waiting:
            conn, need = next(iter(self.waiting.items()))
            if not self._fits(need):
                return
            del self.waiting[conn]
            self.used += need
            conn.reserved = need
            conn.resume_reading()
