"""`pip install .` in a fresh venv installs the man pages where man(1) finds them, without a
setuptools deprecation warning in the build log.

The venv sees the system's site-packages (the dependencies and setuptools are installed there
already) and builds without isolation, so the test needs no network and takes seconds.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _copy_sources(dest: Path) -> None:
    """The committed files only: a build must not depend on, or write into, the working tree."""
    files = subprocess.run(["git", "-C", str(ROOT), "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                           capture_output=True, check=True).stdout.split(b"\0")
    for name in filter(None, files):
        src = ROOT / name.decode()
        if src.is_file():
            (dest / name.decode()).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / name.decode())


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("man") is None, reason="man is installed by .ci/steps/20-man.sh")
@pytest.mark.skipif(shutil.which("git") is None, reason="needs git to list the sources")
def test_pip_install_puts_man_pages_where_man_finds_them(tmp_path):
    src = tmp_path / "src"
    _copy_sources(src)
    venv = tmp_path / "venv"
    # no pip (and no old setuptools of ensurepip's) inside: the system's pip installs into it
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", "--without-pip", str(venv)], check=True,
                   timeout=120)
    py = venv / "bin" / "python"
    build = subprocess.run([sys.executable, "-m", "pip", "--python", str(py), "install", "--no-deps",
                            "--no-build-isolation", "--no-index", "-v", str(src)],
                           capture_output=True, text=True, timeout=300)
    log = build.stdout + build.stderr
    assert build.returncode == 0, log[-3000:]
    assert "SetuptoolsDeprecationWarning" not in log and "License classifiers are deprecated" not in log, log
    page = venv / "share" / "man" / "man1" / "rmqtool-consume.1"
    assert page.is_file()
    env = {k: v for k, v in os.environ.items() if k not in ("MANPATH", "PYTHONPATH")}
    env.update(PATH=f"{venv / 'bin'}:/usr/bin:/bin", MANWIDTH="100", LC_ALL="C.UTF-8", MAN_KEEP_FORMATTING="0")
    where = subprocess.run(["man", "-w", "rmqtool-consume"], capture_output=True, text=True, env=env, timeout=60)
    assert where.returncode == 0 and Path(where.stdout.strip()).resolve() == page.resolve(), where.stderr
    shown = subprocess.run(["man", "rmqtool-consume"], capture_output=True, text=True, env=env, timeout=60)
    text = re.sub(".\b", "", shown.stdout).replace("\u2010", "-")  # overstrike bold, hyphens
    assert shown.returncode == 0 and "--deadline" in text and "rmqtool-consume" in text, shown.stderr
    # the installed command has the fallback too
    r = subprocess.run([str(venv / "bin" / "rmqtool"), "man", "verify"], capture_output=True, text=True, env=env,
                       timeout=60)
    assert r.returncode == 0 and r.stdout.startswith(".TH RMQTOOL-VERIFY 1"), r.stderr
