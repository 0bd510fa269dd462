"""The top-level command: version, help, usage errors exit 2 without a traceback."""

from __future__ import annotations

from rmqtool import __version__
from tests.conftest import run_rmqtool


def test_version_and_help():
    r = run_rmqtool("--version", input="")
    assert r.returncode == 0 and r.stdout.strip() == f"rmqtool {__version__}"
    r = run_rmqtool("--help", input="")
    assert r.returncode == 0
    for cmd in ("serve", "send", "consume", "inspect", "verify", "repair"):
        assert cmd in r.stdout


def test_usage_errors_exit_2_without_traceback():
    for args in (("no-such-command",), ("send",), ("consume", "T", "--count", "x")):
        r = run_rmqtool(*args, input="")
        assert r.returncode == 2, (args, r.stderr)
        assert "Traceback" not in r.stderr and "Error" in r.stderr
