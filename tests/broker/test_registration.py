"""A broker that registers with another process's name server (`--namesrv-addr`, broker.conf
`namesrvAddr`): REGISTER_BROKER at start and when its topics change, UNREGISTER_BROKER on shutdown,
as a Java broker does with `BrokerOuterAPI`."""

from __future__ import annotations

import time

from rmqtool.remoting import fastjson
from rmqtool.remoting.bodies import ClusterInfo, TopicRouteData
from tests.broker.conftest import TEST_CONF, ServeProcess, Wire


def _cluster(namesrv: Wire) -> ClusterInfo:
    r = namesrv.request(106)
    assert r.code == 0
    return ClusterInfo.from_json_obj(fastjson.loads(r.body))


def _wait(cond, timeout: float = 10.0) -> bool:
    deadline = time.time() + timeout
    while time.time() < deadline:
        if cond():
            return True
        time.sleep(0.1)
    return False


def test_a_second_broker_joins_and_leaves_another_name_server(serve, namesrv, tmp_path):
    other = ServeProcess(tmp_path / "b-store", conf=TEST_CONF + "brokerName=broker-b\n",
                         extra_args=("--namesrv-addr", f"{serve.namesrv};127.0.0.1:1"))  # one of them is down
    try:
        assert _wait(lambda: "broker-b" in _cluster(namesrv).brokerAddrTable)
        info = _cluster(namesrv)
        assert sorted(info.clusterAddrTable["DefaultCluster"]) == ["broker-a", "broker-b"]
        assert info.brokerAddrTable["broker-b"].brokerAddrs == {0: other.broker}
        # a topic created on the second broker is routed by the first process's name server at once
        b = Wire(other.broker)
        try:
            r = b.request(17, {"topic": "OnlyOnB", "defaultTopic": "TBW102", "readQueueNums": "2",
                               "writeQueueNums": "2", "perm": "6", "topicFilterType": "SINGLE_TAG",
                               "topicSysFlag": "0", "order": "false"})
            assert r.code == 0, r.remark
        finally:
            b.close()

        def routed() -> TopicRouteData | None:
            r = namesrv.request(105, {"topic": "OnlyOnB"})
            return TopicRouteData.decode(r.body) if r.code == 0 else None

        assert _wait(lambda: routed() is not None, 5)
        route = routed()
        assert [(q.brokerName, q.writeQueueNums) for q in route.queueDatas] == [("broker-b", 2)]
    finally:
        code = other.stop()
    assert code == 0, other.stderr
    assert "Traceback" not in other.stderr
    assert "127.0.0.1:1" in other.stderr  # the unreachable name server was reported, once, and did not stop it
    # UNREGISTER_BROKER on shutdown: gone at once, not after the 120 s expiry
    info = _cluster(namesrv)
    assert "broker-b" not in info.brokerAddrTable
    assert info.clusterAddrTable["DefaultCluster"] == ["broker-a"]
