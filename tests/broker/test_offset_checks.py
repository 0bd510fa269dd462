"""Issue 10's UPDATE_CONSUMER_OFFSET round against `rmqtool serve`: groups with `/..`, `@` or
5,000 characters, queueId -1 and 99,999 on a 4-queue topic, offsets -5 and 2^63-1, unknown
topics; each refused with Java's code, nothing of it persisted, and `rmqtool verify` finds the
store healthy afterwards (it used to fail it on the stray offsets)."""

from __future__ import annotations

from rmqtool.remoting import fastjson
from tests.broker.conftest import ServeProcess, Wire, create_topic, pull_ext, send_ext
from tests.conftest import run_rmqtool


def test_bad_offset_commits_are_refused_and_leave_a_store_verify_accepts(tmp_path):
    serve = ServeProcess(tmp_path / "store")
    try:
        create_topic(serve.broker, "OC_T", queues=4)
        w = Wire(serve.broker)
        try:
            for _ in range(3):
                assert w.request(310, send_ext("OC_T", 0), b"x").code == 0
            assert w.request(11, pull_ext("OC_T", "oc_group")).code == 0  # the group exists from now on
            good = {"consumerGroup": "oc_group", "topic": "OC_T", "queueId": "0", "commitOffset": "2"}
            assert w.request(15, good).code == 0
            bad = [({"consumerGroup": g}, 26) for g in ("oc/..", "oc@x", "g" * 5000, "oc_nobody")]
            bad += [({"queueId": q}, 29) for q in ("-1", "99999", "x", "2147483648")]
            bad += [({"commitOffset": o}, 29) for o in ("-5", str(2**63 - 1), "4", "1e999")]
            bad += [({"topic": "OC_None"}, 17), ({"topic": "TBW102", "queueId": "0", "commitOffset": "5"}, 29)]
            for over, code in bad:
                r = w.request(15, {**good, **over})
                assert r.code == code, (over, r.code, r.remark)
            assert w.request(14, {k: good[k] for k in ("consumerGroup", "topic", "queueId")}).ext_fields == {
                "offset": "2"}
        finally:
            w.close()
    finally:
        assert serve.stop() == 0, serve.stderr[-2000:]
    raw = (tmp_path / "store" / "config" / "consumerOffset.json").read_text()
    table = fastjson.loads(raw)["offsetTable"]  # fastjson writes the queue ids as bare numbers
    assert {k: v for k, v in table.items() if k.startswith("OC_") or "@oc" in k} == {"OC_T@oc_group": {0: 2}}
    r = run_rmqtool("verify", str(tmp_path / "store"))
    assert r.returncode == 0, r.stdout.decode()[-2000:] + r.stderr.decode()[-2000:]
