"""Times and durations as users type them, shared by the CLI and the client's CLI bridge.

A neutral module (like errors.py): `rmqtool.client` must not import `rmqtool.cli`, yet both parse
`--from` / `--since` / `--delay` the same way (cli.md "Everywhere").
"""

from __future__ import annotations

import re
from datetime import datetime, timezone

from rmqtool.errors import InvalidInput

_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h|d)\s*$")
_UNIT_MS = {"ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}


def parse_duration_ms(text: str) -> int:
    """`1500ms`, `90s`, `5m`, `2h`, `1d` (decimals allowed: `1.5s`) -> milliseconds."""
    m = _DURATION.match(text)
    if not m:
        raise InvalidInput(f"duration {text!r}: use a number with ms, s, m, h or d (1500ms, 90s, 5m, 2h, 1d)")
    return int(round(float(m.group(1)) * _UNIT_MS[m.group(2)]))


def parse_time_ms(text: str) -> int:
    """Epoch milliseconds or ISO-8601 (`2026-11-30T12:00:00Z`; without a zone it is UTC) -> epoch ms."""
    t = text.strip()
    if re.fullmatch(r"-?\d+", t):
        return int(t)
    try:
        dt = datetime.fromisoformat(t.replace("z", "Z").replace("Z", "+00:00"))
    except ValueError:
        raise InvalidInput(f"time {text!r}: use epoch milliseconds or ISO-8601 like 2026-11-30T12:00:00Z") from None
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=timezone.utc)
    return int(dt.timestamp() * 1000)
