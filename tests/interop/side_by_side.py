"""Scenarios of one module run side by side in the background, each test then re-raising its own.

An interop scenario with brokers of its own (an Apache broker whose store is moved, one that joins
our name server, ...) mostly waits: JVM start, registration periods, invisible times, revive
scans. Two such scenarios one after the other take the sum of their waits; started together at
the module's first test they take about the longer one's. Each scenario gets its own scratch dir
(brokers, ports, stores and names of its own); a passed one's dir goes when the module ends, as a
passed test's tmp_path goes at its teardown (pyproject's tmp_path_retention_policy).
"""

from __future__ import annotations

import shutil
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest


@contextmanager
def side_by_side(tmp_path_factory, scenarios: dict[str, Callable[[Path], Any]]) -> Iterator[dict[str, Future]]:
    """Each `scenarios[name](scratch dir)` started at once; their futures by name. Leaving waits for all
    (a test asks `futures[name].result()`, which re-raises that scenario's failure)."""
    roots = {name: tmp_path_factory.mktemp(name) for name in scenarios}
    pool = ThreadPoolExecutor(max_workers=len(scenarios))
    futures = {name: pool.submit(fn, roots[name]) for name, fn in scenarios.items()}
    try:
        yield futures
    finally:
        pool.shutdown(wait=True)
        for name, f in futures.items():
            if f.exception() is None:
                shutil.rmtree(roots[name], ignore_errors=True)


# --- one check against each broker kind at once ------------------------------------------------------

_PENDING: dict[tuple[str, str], Future] = {}  # (check, kind) -> its run, started beside another kind's
_PAIRS = ThreadPoolExecutor(max_workers=2)


def with_the_other_kinds(request, tmp_path, target, fixtures: dict[str, str], check: Callable[[Any, Path], None]) -> None:
    """`check(target, tmp_path)` for this test's kind of target; the first time, `check` also starts in
    the background against each other kind whose test this session runs (`fixtures`: kind -> the
    fixture of that target), so the test of that kind only waits for its run. For checks that
    mostly wait in a client process (an SDK's long polls, invisible times, check-backs)."""
    key = (check.__name__, target.kind)
    if key in _PENDING:
        _PENDING.pop(key).result()  # its failure (or skip) comes back here
        return
    selected = {item.nodeid for item in request.session.items}
    for kind, fixture in fixtures.items():
        nodeid = request.node.nodeid.replace(f"[{target.kind}]", f"[{kind}]")
        if kind == target.kind or nodeid not in selected or (check.__name__, kind) in _PENDING:
            continue
        try:
            other = request.getfixturevalue(fixture)
        except pytest.skip.Exception:
            continue
        scratch = request.getfixturevalue("tmp_path_factory").mktemp(f"{check.__name__}-{kind}")
        _PENDING[(check.__name__, kind)] = _PAIRS.submit(check, other, scratch)
    check(target, tmp_path)
