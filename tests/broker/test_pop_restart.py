"""POP state survives kill -9: after recovery the unacked messages come back, the acked never."""

from __future__ import annotations

import signal
import time

import pytest

from tests.broker.conftest import ServeProcess, Wire, create_topic
from tests.pop_serve_helpers import ack, handles, pop_ext, pop_until, send

pytestmark = pytest.mark.slow


def test_kill_9_keeps_in_flight_messages_and_acks(tmp_path):
    store = tmp_path / "store"
    serve = ServeProcess(store)
    w = Wire(serve.broker)
    try:
        create_topic(serve.broker, "PopK9", 1)
        send(w, "PopK9", 4)
        r = w.request(200050, pop_ext("PopK9", "cg_k9", invisible=15_000))
        got = handles(r)
        assert [m.body for m, _ in got] == [b"m0", b"m1", b"m2", b"m3"]
        for m, h in got:
            if m.body in (b"m0", b"m2"):
                assert ack(w, "cg_k9", "PopK9", h).code == 0
        time.sleep(6)  # consumer offsets are persisted every 5 s, as Java's flushConsumerOffsetInterval
    finally:
        w.close()
        serve.stop(signal.SIGKILL)
    serve = ServeProcess(store)
    w = Wire(serve.broker)
    try:
        back = pop_until(w, "PopK9", "cg_k9", 2, timeout=40)
        assert sorted(m.body for m, _ in back) == [b"m1", b"m3"]
        assert all(m.reconsume_times == 1 for m, _ in back)
        for _m, h in back:
            assert ack(w, "cg_k9", "PopK9", h).code == 0
        more = pop_until(w, "PopK9", "cg_k9", 1, timeout=6)
        assert more == [], [m.body for m, _ in more]
    finally:
        w.close()
        assert serve.stop() == 0
        assert "Traceback" not in serve.stderr, serve.stderr
