"""Fixtures of the client tests: one server per kind for the session, rmqtool serve and Apache RocketMQ."""

from __future__ import annotations

import itertools
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from servers import Server, start_server  # noqa: E402

_names = itertools.count()


# the Apache server needs the Java build: its tests carry the interop marker
@pytest.fixture(scope="session", params=["serve", pytest.param("apache", marks=pytest.mark.interop)])
def server(request, tmp_path_factory) -> Server:
    s = start_server(request.param, tmp_path_factory.mktemp(f"{request.param}-"))
    yield s
    if s.kind == "apache":
        s.kill()  # a graceful Java shutdown takes ~20 s and proves nothing here
    else:
        s.stop()


@pytest.fixture
def unique():
    """Fresh topic/group names per test (the server is shared)."""
    n = next(_names)

    def name(prefix: str) -> str:
        return f"{prefix}_{n}"
    return name
