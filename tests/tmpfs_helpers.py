"""A small tmpfs of its own for a test that needs a really full disk (root only), and how full it is.

Shared by broker/test_disk_full_tmpfs.py and store/test_chunked_reserve_tmpfs.py."""

from __future__ import annotations

import contextlib
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest


@contextlib.contextmanager
def mounted_tmpfs(mnt: Path, size: str, without_root: str) -> Iterator[Path]:
    """A tmpfs of `size` (mount's notation: "48m") mounted on `mnt` for the block, unmounted after (lazily if
    busy); the test is skipped when not root or when mounting fails (`without_root`: where the same is covered
    without it)."""
    if os.geteuid() != 0:
        pytest.skip(f"mounting a tmpfs needs root ({without_root})")
    mnt.mkdir()
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(mnt)],
                       capture_output=True, text=True)
    if r.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {r.stderr.strip()}")
    try:
        yield mnt
    finally:
        if subprocess.run(["umount", str(mnt)], capture_output=True).returncode != 0:
            subprocess.run(["umount", "-l", str(mnt)], capture_output=True)


def used_ratio(mnt: Path) -> float:
    """The part of the file system under `mnt` in use, 0 to 1."""
    st = os.statvfs(mnt)
    return 1 - st.f_bfree / st.f_blocks
