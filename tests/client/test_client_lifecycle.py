"""`ClientLifecycle`: what Producer, PushConsumer, PullConsumer and SimpleConsumer share about start/shutdown."""

from __future__ import annotations

import pytest

from rmqtool.client.lifecycle import ClientLifecycle


class Face(ClientLifecycle):
    def __init__(self, fail_start: bool = False) -> None:
        self.calls: list[str] = []
        self.fail_start = fail_start

    def _start(self) -> None:
        self.calls.append("start")
        if self.fail_start:
            raise RuntimeError("no name server")

    def _shutdown(self) -> None:
        self.calls.append("shutdown")


def test_start_and_shutdown_run_once_each():
    f = Face()
    assert f.shutdown() is None and f.calls == []  # never started: nothing to shut down
    assert f.start() is f and f.start() is f
    f.shutdown()
    f.shutdown()
    assert f.calls == ["start", "shutdown"]
    f.start()  # started again after a shutdown, as the faces allow
    assert f.calls == ["start", "shutdown", "start"]


def test_a_failed_start_leaves_it_not_started():
    f = Face(fail_start=True)
    with pytest.raises(RuntimeError):
        f.start()
    f.shutdown()
    assert f.calls == ["start"]


def test_with_starts_and_shuts_down_even_on_error():
    f = Face()
    with pytest.raises(KeyError), f as g:
        assert g is f and f.calls == ["start"]
        raise KeyError("x")
    assert f.calls == ["start", "shutdown"]
