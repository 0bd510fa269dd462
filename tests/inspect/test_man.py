"""man/: the pages are what man/generate.py makes from the Typer app, and man renders them."""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
MAN = ROOT / "man"


def _generator():
    spec = importlib.util.spec_from_file_location("man_generate", MAN / "generate.py")
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("man_generate", mod)
    spec.loader.exec_module(mod)
    return mod


def test_committed_pages_are_up_to_date(tmp_path):
    written = _generator().generate(tmp_path)
    names = sorted(p.name for p in written)
    assert names == sorted(p.name for p in MAN.glob("*.1")), "run: python man/generate.py"
    for p in written:
        assert p.read_text() == (MAN / p.name).read_text(), f"{p.name} is stale: run python man/generate.py"


def test_every_command_has_a_page_with_the_required_sections(tmp_path):
    from typer.main import get_command

    from rmqtool.cli.main import app

    commands = sorted(get_command(app).commands)
    assert {"inspect", "verify", "repair"} <= set(commands)
    for name in commands:
        text = (MAN / f"rmqtool-{name}.1").read_text()
        for section in ("NAME", "SYNOPSIS", "DESCRIPTION", "OPTIONS", "EXAMPLES", "EXIT STATUS"):
            assert f".SH {section}\n" in text, (name, section)
    main = (MAN / "rmqtool.1").read_text()
    assert all(f"rmqtool\\-{n}" in main for n in commands)


@pytest.mark.skipif(shutil.which("man") is None, reason="man is installed by .ci/steps/20-man.sh")
@pytest.mark.parametrize("page", sorted(p.name for p in MAN.glob("*.1")))
def test_man_renders_the_page(page):
    env = dict(os.environ, MANWIDTH="100", MAN_KEEP_FORMATTING="0", LC_ALL="C.UTF-8")
    r = subprocess.run(["man", "-l", str(MAN / page)], capture_output=True, text=True, env=env, timeout=60)
    assert r.returncode == 0, r.stderr
    text = re.sub(".\b", "", r.stdout)  # overstrike bold/underline
    assert "EXIT STATUS" in text and "EXAMPLES" in text and "SYNOPSIS" in text
    assert "warning" not in r.stderr.lower(), r.stderr
    if shutil.which("groff"):
        g = subprocess.run(["groff", "-man", "-Tutf8", "-ww", "-z", str(MAN / page)], capture_output=True, text=True,
                           timeout=60)
        assert g.returncode == 0 and g.stderr == "", g.stderr
