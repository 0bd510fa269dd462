"""What cluster tests do over and over against `serve` and Apache processes: one request on a
fresh connection, and polling until a condition holds (a registration, a SlaveSynchronize round,
a replicated offset)."""

from __future__ import annotations

import time
from collections.abc import Callable

from rmqtool.remoting.command import RemotingCommand
from tests.broker.conftest import Wire


def request_once(addr: str, code: int, ext: dict | None = None, body: bytes = b"") -> RemotingCommand:
    """One request to `addr` on its own connection, closed after the response."""
    w = Wire(addr)
    try:
        return w.request(code, ext or {}, body)
    finally:
        w.close()


def wait_until(cond: Callable[[], object], timeout: float, interval: float = 0.1) -> bool:
    """Call `cond` every `interval` s until it is true (True) or `timeout` s passed (False)."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        if cond():
            return True
        time.sleep(interval)
    return False
