"""Regenerate the golden outputs: `python -m tests.inspect.regen`, then review `git diff`."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

from tests.inspect.conftest import load_make_fixtures  # noqa: I001
from tests.inspect.golden_cases import CASES, GOLDEN, golden_path, render_case, verify_case


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        stores = Path(tmp) / "stores"
        load_make_fixtures().build_all(stores)
        GOLDEN.mkdir(exist_ok=True)
        for old in GOLDEN.glob("*.txt"):
            old.unlink()
        for name in CASES:
            golden_path(name).write_text(render_case(stores, name), encoding="utf-8")
        for store in json.loads((stores / "MANIFEST.json").read_text()):
            golden_path(f"verify.{store}").write_text(verify_case(stores, store), encoding="utf-8")
    print(f"golden files written to {GOLDEN}")


if __name__ == "__main__":
    main()
