"""Times on the command line: epoch milliseconds or ISO-8601 (cli.md)."""

from __future__ import annotations

import datetime as dt

from rmqtool.errors import InvalidInput


def parse_time(text: str) -> int:
    """`1764460800000` or `2026-11-30T12:00:00Z` (naive ISO times are UTC) to epoch ms."""
    t = text.strip()
    if t.lstrip("-").isdigit():
        return int(t)
    try:
        d = dt.datetime.fromisoformat(t.replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        raise InvalidInput(f"not a time: {text!r} (epoch ms or ISO-8601 such as 2026-11-30T12:00:00Z)") from None
    if d.tzinfo is None:
        d = d.replace(tzinfo=dt.timezone.utc)
    return int(d.timestamp() * 1000)
