"""serve builds index entries right after the request that appended them (store/indexdefer.py):
QUERY_MESSAGE by key answers every message acknowledged before it, and the queue of keys is
drained by the event loop without any look-up."""

from __future__ import annotations

import asyncio
import threading
import time

from rmqtool.broker.server import Serve, ServeOptions
from rmqtool.store.indexdefer import DeferredIndex
from tests.broker.conftest import Wire, decode_records, props, send_ext

CONF = """\
brokerClusterName=DefaultCluster
brokerName=broker-a
mappedFileSizeCommitLog=1048576
maxHashSlotNum=1000
maxIndexNum=4000
"""


def test_serve_defers_the_index_and_loses_no_key(tmp_path, monkeypatch):
    monkeypatch.delenv("RMQTOOL_INDEX_PROCESS", raising=False)
    conf = tmp_path / "broker.conf"
    conf.write_text(CONF)
    srv = Serve(ServeOptions(store=tmp_path / "store", namesrv_port=0, broker_port=0, config_file=conf))
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    info = asyncio.run_coroutine_threadsafe(srv.start(), loop).result(60)
    w = Wire(str(info.broker))
    try:
        index = srv.local.store.index
        assert isinstance(index, DeferredIndex)
        for i in range(30):
            body = f"m{i}".encode()
            r = w.request(310, send_ext("IdxDefer", i % 4, props(KEYS=f"order-{i}", UNIQ_KEY=f"{i:032X}")), body)
            assert r.code == 0
            q = w.request(12, {"topic": "IdxDefer", "key": f"order-{i}", "maxNum": "32", "beginTimestamp": "0",
                               "endTimestamp": str(int(time.time() * 1000) + 1000)})
            assert q.code == 0 and [m.body for m in decode_records(q.body)] == [body]
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
        asyncio.run_coroutine_threadsafe(srv.close(), loop).result(60)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)
        loop.close()
