"""serve's index off the request path: built by a second process (RMQTOOL_INDEX_PROCESS=1,
store/indexproc.py) or, by default, a few milliseconds after the requests that appended the keys
(store/indexdefer.py, serve's INDEX_DRAIN_DELAY_S). Either way QUERY_MESSAGE by key answers every message acknowledged
before it, without waiting."""

from __future__ import annotations

import time

from rmqtool.store.indexdefer import DeferredIndex
from tests.broker.conftest import InProcessServe, Wire, decode_records, props, send_ext

CONF = """\
brokerClusterName=DefaultCluster
brokerName=broker-a
mappedFileSizeCommitLog=1048576
maxHashSlotNum=1000
maxIndexNum=4000
"""


def _send_and_query(w: Wire, topic: str, n: int) -> None:
    """n sends, each looked up by its KEYS right after its answer."""
    for i in range(n):
        body = f"m{i}".encode()
        r = w.request(310, send_ext(topic, i % 4, props(KEYS=f"order-{i}", UNIQ_KEY=f"{i:032X}")), body)
        assert r.code == 0
        q = w.request(12, {"topic": topic, "key": f"order-{i}", "maxNum": "32", "beginTimestamp": "0",
                           "endTimestamp": str(int(time.time() * 1000) + 1000)})
        assert q.code == 0 and [m.body for m in decode_records(q.body)] == [body]


def test_query_by_key_sees_each_acknowledged_send(tmp_path, monkeypatch):
    monkeypatch.setenv("RMQTOOL_INDEX_PROCESS", "1")
    serve = InProcessServe(tmp_path, CONF)
    w = Wire(serve.broker)
    try:
        index = serve.srv.local.store.index
        assert index.offloaded and index.alive()
        _send_and_query(w, "IdxProc", 30)
        assert index.fallback is None
    finally:
        w.close()
        serve.close()
    assert index.proc is None  # drained and gone at close


def test_serve_defers_the_index_and_loses_no_key(tmp_path, monkeypatch):
    monkeypatch.delenv("RMQTOOL_INDEX_PROCESS", raising=False)
    serve = InProcessServe(tmp_path, CONF)
    w = Wire(serve.broker)
    try:
        index = serve.srv.local.store.index
        assert isinstance(index, DeferredIndex)
        _send_and_query(w, "IdxDefer", 30)
        for i in range(30, 40):  # no look-up: the loop drains on its own
            r = w.request(310, send_ext("IdxDefer", 0, props(KEYS=f"order-{i}", UNIQ_KEY=f"{i:032X}")), b"x")
            assert r.code == 0
        deadline = time.monotonic() + 10
        while index.pending() and time.monotonic() < deadline:
            time.sleep(0.01)
        assert index.pending() == 0
        assert index.inner.files[-1].index_count == 1 + 2 * 40  # a UNIQ_KEY and a KEYS entry per message
    finally:
        w.close()
        serve.close()


def test_single_sends_within_the_drain_delay_are_indexed_as_one_batch(tmp_path, monkeypatch):
    """serve lets keys queue for INDEX_DRAIN_DELAY_S, so single sends that each came in a loop pass
    of their own are hashed and written by one `build_index_batch` (not one build per send)."""
    from rmqtool.broker import server

    monkeypatch.delenv("RMQTOOL_INDEX_PROCESS", raising=False)
    monkeypatch.setattr(server, "INDEX_DRAIN_DELAY_S", 1.0)  # wide enough for a loaded machine
    serve = InProcessServe(tmp_path, CONF)
    w = Wire(serve.broker)
    try:
        index = serve.srv.local.store.index
        inner = index.inner
        batches: list[int] = []
        real = inner.build_index_batch
        monkeypatch.setattr(inner, "build_index_batch", lambda recs: (batches.append(len(recs)), real(recs)))
        t0 = time.monotonic()
        for i in range(5):
            r = w.request(310, send_ext("IdxDelay", 0, props(KEYS=f"k-{i}", UNIQ_KEY=f"{i:032X}")), b"x")
            assert r.code == 0
        if time.monotonic() - t0 < 0.5:  # the first send's drain is not due yet
            assert index.pending() == 5 and batches == []
        deadline = time.monotonic() + 10
        while index.pending() and time.monotonic() < deadline:
            time.sleep(0.01)
        assert index.pending() == 0 and batches and sum(batches) == 5 and max(batches) > 1
        assert index.files[-1].index_count == 1 + 2 * 5  # `files` waits for a build under way
    finally:
        w.close()
        serve.close()
