"""Fixture stores for the inspect tests, generated once per session by fixtures/make_fixtures.py."""

from __future__ import annotations

import importlib.util
import json
import shutil
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def load_make_fixtures():
    spec = importlib.util.spec_from_file_location("make_fixtures", ROOT / "fixtures" / "make_fixtures.py")
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("make_fixtures", mod)
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="session")
def stores(tmp_path_factory) -> Path:
    """The good store and every damaged copy, with MANIFEST.json."""
    dest = tmp_path_factory.mktemp("fixture-stores") / "stores"
    load_make_fixtures().build_all(dest)
    return dest


@pytest.fixture(scope="session")
def manifest(stores) -> dict:
    return json.loads((stores / "MANIFEST.json").read_text())


@pytest.fixture
def store_copy(stores, tmp_path):
    """A writable copy of a fixture store (sparse files stay sparse)."""

    def copy(name: str) -> Path:
        dst = tmp_path / name
        shutil.copytree(stores / name, dst, copy_function=_sparse_copy)
        return dst

    return copy


def _sparse_copy(src: str, dst: str) -> None:
    """Copy keeping holes: the 38 MB timer wheel is nearly all holes."""
    with open(src, "rb") as fi, open(dst, "wb") as fo:
        size = fi.seek(0, 2)
        fi.seek(0)
        while True:
            chunk = fi.read(1 << 20)
            if not chunk:
                break
            if chunk.count(0) == len(chunk):
                fo.seek(len(chunk), 1)
            else:
                fo.write(chunk)
        fo.truncate(size)
