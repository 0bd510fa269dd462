"""The timer checks for `verify`: `rmqtool.store.timer.check` results as inspect `Problem`s.

The checks and the TimerLog scanner live in the store (one implementation, also used by the
timer tests); this module only maps the store's detailed problem kinds onto verify's stable
kinds (`timerlog-unit-bad`, `wheel-slot-mismatch`, `timerwheel-size-bad`, `file-size-mismatch`)
and gives `inspect`'s callers (dissect, repair, verify) the scanner with inspect's `Problem`s.

- `check_timerlog_units(root, cfg=None)`: every TimerLog unit against its CommitLog record and
  its `prevPos`.
- `check_wheel_slots(root, cfg=None)`: every wheel slot against its TimerLog chain, every unit
  against its slot.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from rmqtool.inspect.files import QueueFile, relpath
from rmqtool.inspect.layoutconfig import LayoutConfig, load_layout_config
from rmqtool.inspect.problems import Problem
from rmqtool.store.timer import check as store_check
from rmqtool.store.timer.check import ScanEnd, iter_wheel_slots
from rmqtool.store.timer.timerlog import TimerUnit

__all__ = ["TimerLogEnd", "TimerUnit", "check_timerlog_units", "check_wheel_slots", "iter_timerlog",
           "iter_wheel_slots", "to_problem"]

# store kind -> verify kind (the verify output contract; scripts match on these)
KIND_MAP = {
    "timerlog-bad-unit": "timerlog-unit-bad",
    "timerlog-bad-prev": "timerlog-unit-bad",
    "timerlog-dangling": "timerlog-unit-bad",
    "timerlog-bad-target": "timerlog-unit-bad",
    "timerlog-file-size": "file-size-mismatch",
    "timerwheel-size": "timerwheel-size-bad",
    "wheel-slot-misplaced": "wheel-slot-mismatch",
    "wheel-chain-broken": "wheel-slot-mismatch",
    "wheel-chain-wrong-slot": "wheel-slot-mismatch",
    "wheel-chain-loop": "wheel-slot-mismatch",
    "wheel-slot-first-mismatch": "wheel-slot-mismatch",
    "wheel-slot-num-mismatch": "wheel-slot-mismatch",
    "timerlog-unit-not-in-slot": "wheel-slot-mismatch",
    "timerlog-unit-slot-empty": "wheel-slot-mismatch",
}


def to_problem(p: store_check.Problem) -> Problem:
    """One store problem dict as verify's `Problem` (path relative to the store root)."""
    kind = str(p["kind"])
    return Problem(str(p["file"]), int(p["pos"]), KIND_MAP.get(kind, kind), str(p["detail"]))  # type: ignore[arg-type]


@dataclass
class TimerLogEnd:
    offset: int = 0  # end of the valid units (recovery's processOffset)
    bad: Problem | None = None


def iter_timerlog(files: list[QueueFile], root: Path | None = None, end: TimerLogEnd | None = None,
                  problems: list[Problem] | None = None) -> Iterator[TimerUnit]:
    """The store's scanner (`rmqtool.store.timer.check.iter_timerlog`) with inspect's paths and `Problem`s."""
    scan_end = ScanEnd()
    found: list[store_check.Problem] = []
    try:
        yield from store_check.iter_timerlog(files, lambda p: relpath(p, root), scan_end, found)
    finally:
        if end is not None:
            end.offset = scan_end.offset
            end.bad = to_problem(scan_end.bad) if scan_end.bad is not None else None
        if problems is not None:
            problems.extend(to_problem(p) for p in found)


def check_timerlog_units(root: Path, cfg: LayoutConfig | None = None) -> Iterator[Problem]:
    """TimerLog units against their CommitLog records (`store.timer.check.check_timerlog_targets`)."""
    root = Path(root)
    cfg = cfg or load_layout_config(root)
    for p in store_check.check_timerlog_targets(root, cfg.timerlog_file_size, cfg.timer_precision_ms):
        yield to_problem(p)


def check_wheel_slots(root: Path, cfg: LayoutConfig | None = None) -> Iterator[Problem]:
    """Wheel slots against the TimerLog chains (`store.timer.check.check_timer_wheel`)."""
    root = Path(root)
    cfg = cfg or load_layout_config(root)
    for p in store_check.check_timer_wheel(root, cfg.timer_precision_ms, cfg.timerlog_file_size):
        yield to_problem(p)
