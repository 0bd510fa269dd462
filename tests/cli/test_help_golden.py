"""Golden help texts: `rmqtool --help` and `rmqtool CMD --help` at 80 columns.

A changed option or wording shows up as a diff of tests/cli/golden/help/; after a deliberate
change, regenerate them with `RMQTOOL_REGEN_GOLDEN=1 python -m pytest tests/cli/test_help_golden.py`
(and the man pages with `python man/generate.py`).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from typer.main import get_command
from typer.testing import CliRunner

from rmqtool.cli.main import app

GOLDEN = Path(__file__).resolve().parent / "golden" / "help"
COMMANDS = ["", *sorted(get_command(app).commands)]


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: c or "rmqtool")
def test_help_matches_golden(command):
    args = [command, "--help"] if command else ["--help"]
    r = CliRunner().invoke(app, args, prog_name="rmqtool", env={"COLUMNS": "80", "_TYPER_COMPLETE_TEST_DISABLE_SHELL_DETECTION": ""})
    assert r.exit_code == 0, r.output
    path = GOLDEN / f"{command or 'rmqtool'}.txt"
    if os.environ.get("RMQTOOL_REGEN_GOLDEN"):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(r.output, encoding="utf-8")
    assert path.is_file(), f"no golden help for {command or 'rmqtool'}: regenerate (see the module docstring)"
    assert r.output == path.read_text(encoding="utf-8"), f"{path.name} differs: regenerate if deliberate"


def test_no_stale_golden_files():
    assert sorted(p.stem for p in GOLDEN.glob("*.txt")) == sorted(c or "rmqtool" for c in COMMANDS)
