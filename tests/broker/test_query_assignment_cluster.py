"""QUERY_ASSIGNMENT in a cluster of two `rmqtool serve --broker-only` masters registered with one
`--namesrv-only` name server: the broker asked assigns from the topic's route on the name server
(Java's TopicRouteInfoManager), so its answer holds the other broker's queues too."""

from __future__ import annotations

import json
import time

import pytest

from tests.broker.conftest import Wire, create_topic, heartbeat_body, sub_data
from tests.cluster_helpers import master_conf, start_broker, start_namesrv

pytestmark = pytest.mark.slow


def test_assignment_spans_the_brokers_of_the_route(tmp_path):
    ns, ns_addr = start_namesrv(tmp_path)
    procs = [ns]
    try:
        addrs = {}
        for name in ("broker-a", "broker-b"):
            p, addr = start_broker(tmp_path, name, ns_addr, master_conf(name))
            procs.append(p)
            addrs[name] = addr
            create_topic(addr, "QaCluster", 3)
        names = Wire(ns_addr)
        try:
            deadline = time.time() + 20
            while time.time() < deadline:  # both brokers' queues in the route
                r = names.request(105, {"topic": "QaCluster"})
                if r.code == 0 and len(json.loads(r.body)["queueDatas"]) == 2:
                    break
                time.sleep(0.3)
            else:
                raise AssertionError("the route never listed both brokers")
        finally:
            names.close()
        w = Wire(addrs["broker-a"])
        try:
            hb = heartbeat_body("cid_x", "qa_cluster_g", [sub_data("QaCluster")])
            assert w.request(34, {}, hb).code == 0

            def query(**over) -> list[tuple]:
                body = {"topic": "QaCluster", "consumerGroup": "qa_cluster_g", "clientId": "cid_x",
                        "strategyName": "AVG", "messageModel": "CLUSTERING", **over}
                r = w.request(400, {}, json.dumps(body).encode())
                assert r.code == 0, r.remark
                return sorted((a["messageQueue"]["brokerName"], a["messageQueue"]["queueId"], a["mode"])
                              for a in json.loads(r.body)["messageQueueAssignments"])

            assert query() == [(b, q, "PULL") for b in ("broker-a", "broker-b") for q in range(3)]
            mode = {"topic": "QaCluster", "consumerGroup": "qa_cluster_g", "mode": "POP", "popShareQueueNum": 0}
            assert w.request(401, {}, json.dumps(mode).encode()).code == 0
            assert query() == [("broker-a", -1, "POP"), ("broker-b", -1, "POP")]
            r = w.request(400, {}, json.dumps({"topic": "QaNone", "consumerGroup": "qa_cluster_g",
                                               "clientId": "cid_x", "strategyName": "AVG",
                                               "messageModel": "CLUSTERING"}).encode())
            assert (r.code, json.loads(r.body)) == (0, {})  # no route: no answer, the client keeps its queues
        finally:
            w.close()
    finally:
        for p in reversed(procs):
            p.stop()
    for p in procs:
        assert "Traceback" not in p.stderr, p.stderr
