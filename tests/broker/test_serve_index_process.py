"""serve with RMQTOOL_INDEX_PROCESS=1: the index built by a second process (store/indexproc.py);
QUERY_MESSAGE by key answers every message acknowledged before it, without waiting."""

from __future__ import annotations

import asyncio
import threading
import time

from rmqtool.broker.server import Serve, ServeOptions
from tests.broker.conftest import Wire, decode_records, props, send_ext

CONF = """\
brokerClusterName=DefaultCluster
brokerName=broker-a
mappedFileSizeCommitLog=1048576
maxHashSlotNum=1000
maxIndexNum=4000
"""


def test_query_by_key_sees_each_acknowledged_send(tmp_path, monkeypatch):
    monkeypatch.setenv("RMQTOOL_INDEX_PROCESS", "1")
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
        assert index.offloaded and index.alive()
        for i in range(30):
            body = f"m{i}".encode()
            r = w.request(310, send_ext("IdxProc", i % 4, props(KEYS=f"order-{i}", UNIQ_KEY=f"{i:032X}")), body)
            assert r.code == 0
            q = w.request(12, {"topic": "IdxProc", "key": f"order-{i}", "maxNum": "32", "beginTimestamp": "0",
                               "endTimestamp": str(int(time.time() * 1000) + 1000)})
            assert q.code == 0 and [m.body for m in decode_records(q.body)] == [body]
        assert index.fallback is None
    finally:
        w.close()
        asyncio.run_coroutine_threadsafe(srv.close(), loop).result(60)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)
        loop.close()
    assert index.proc is None  # drained and gone at close
