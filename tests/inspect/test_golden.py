"""Golden outputs of every inspect kind and view, and of verify on every fixture store."""

from __future__ import annotations

import os

import pytest

from tests.inspect.golden_cases import CASES, golden_path, render_case, verify_case

REGEN = os.environ.get("RMQTOOL_REGEN_GOLDEN") == "1"
STORES = ["good", "good-bcq-ext", "damaged-bcq-wrong-batch-size", "damaged-cq-ext-wrong-tags",
          "damaged-torn-tail", "damaged-crc-mismatch", "damaged-bad-magic", "damaged-phys-offset-mismatch",
          "damaged-cq-wrong-offset", "damaged-wheel-slot-mismatch", "damaged-timerlog-unit-bad",
          "damaged-index-entry-bad", "damaged-bad-config", "damaged-delay-offset-out-of-range",
          "damaged-consumer-offset-out-of-range", "damaged-checkpoint-ahead", "damaged-gap-between-files"]


def _check(name: str, actual: str) -> None:
    path = golden_path(name)
    if REGEN:
        path.write_text(actual, encoding="utf-8")
    assert path.exists(), f"no golden file {path.name}: run python -m tests.inspect.regen"
    assert actual == path.read_text(encoding="utf-8"), f"{name} differs from {path.name} (regen and review the diff)"


@pytest.mark.parametrize("name", sorted(CASES))
def test_inspect_output_matches_golden(stores, name):
    out = render_case(stores, name)
    assert out.strip(), "an empty output proves nothing"
    _check(name, out)


@pytest.mark.parametrize("store", STORES)
def test_verify_output_matches_golden(stores, manifest, store):
    assert set(manifest) == set(STORES)
    _check(f"verify.{store}", verify_case(stores, store))
