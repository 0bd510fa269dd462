"""benchmarks/nullsend.py, the `ceiling` target of benchmarks/serve.py: serve answering sends as
stored without storing them. Its answers must be what a Java producer takes as SEND_OK (msgId,
queueId, queueOffset; a batch's ids one per message and its batchUniqId), or the ceiling would
measure failing clients; and nothing may reach the store, or it would measure a store."""

from __future__ import annotations

import importlib.util
from pathlib import Path

from rmqtool.broker.send import SendProcessor, encode_batch_body
from tests.broker.conftest import InProcessServe, Wire, props, send_ext

CONF = """\
brokerClusterName=DefaultCluster
brokerName=broker-a
mappedFileSizeCommitLog=1048576
"""


def _nullsend():
    path = Path(__file__).resolve().parents[2] / "benchmarks" / "nullsend.py"
    spec = importlib.util.spec_from_file_location("nullsend_under_test", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    return module


def test_sends_are_answered_as_stored_and_nothing_is_stored(tmp_path, monkeypatch):
    nullsend = _nullsend()
    monkeypatch.setattr(SendProcessor, "process_send", nullsend.null_send)
    serve = InProcessServe(tmp_path, CONF)
    w = Wire(serve.broker)
    try:
        for i in range(3):
            r = w.request(310, send_ext("Ceil", 1, props(UNIQ_KEY=f"U{i}")), b"x" * 1024)
            assert r.code == 0
            assert r.ext_fields["queueId"] == "1" and r.ext_fields["queueOffset"] == str(i)
            assert len(r.ext_fields["msgId"]) == 32 and r.ext_fields["transactionId"] == f"U{i}"
        body = encode_batch_body([(0, b"y" * 100, f"UNIQ_KEY\x01B{k}\x02") for k in range(5)])
        r = w.request(320, send_ext("Ceil", 1, props(UNIQ_KEY="BATCH"), m="true"), body)
        assert r.code == 0 and r.ext_fields["queueOffset"] == "3" and r.ext_fields["batchUniqId"] == "BATCH"
        assert len(r.ext_fields["msgId"].split(",")) == 5
        assert serve.srv.local.store.commitlog.max_offset == 0
    finally:
        w.close()
        serve.close()
