"""Name server over real sockets: routes (TBW102, %RETRY%, key quoting by version), cluster info,
REGISTER/UNREGISTER_BROKER from another broker process, channel close, 120 s expiry."""

from __future__ import annotations

import json

from rmqtool.broker.nameserver import RouteInfoManager
from rmqtool.remoting import fastjson
from rmqtool.remoting.bodies import (
    ClusterInfo,
    DataVersion,
    RegisterBrokerBody,
    TopicConfig,
    TopicConfigSerializeWrapper,
    TopicRouteData,
)
from rmqtool.remoting.headers import RegisterBrokerRequestHeader, UnRegisterBrokerRequestHeader
from tests.broker.conftest import Wire


def test_tbw102_route_unquoted_keys_for_old_clients_quoted_for_new(serve, namesrv):
    old = namesrv.request(105, {"topic": "TBW102"}, version=121)
    assert old.code == 0
    text = old.body.decode()
    assert '"brokerAddrs":{0:"' + serve.broker + '"}' in text  # fastjson's unquoted Long key
    route = TopicRouteData.decode(old.body)
    assert route.queueDatas[0].perm == 7 and route.queueDatas[0].writeQueueNums == 4  # defaultTopicQueueNums
    new = namesrv.request(105, {"topic": "TBW102"}, version=409)
    assert json.loads(new.body)["brokerDatas"][0]["brokerAddrs"] == {"0": serve.broker}
    asked = namesrv.request(105, {"topic": "TBW102", "acceptStandardJsonOnly": "true"}, version=121)
    assert json.loads(asked.body)["brokerDatas"][0]["brokerAddrs"] == {"0": serve.broker}


def test_unknown_topic_is_17_with_remoting_remark(namesrv):
    r = namesrv.request(105, {"topic": "NoSuchTopicAnywhere"})
    assert r.code == 17 and "No topic route info in name server for the topic: NoSuchTopicAnywhere" in r.remark
    assert r.flag & 1 and r.language == "JAVA"


def test_retry_topic_route_appears_after_heartbeat(serve, namesrv, broker):
    assert namesrv.request(105, {"topic": "%RETRY%ns_cg"}).code == 17
    hb = {"clientID": "127.0.0.1@ns", "consumerDataSet": [{"groupName": "ns_cg", "consumeType": "CONSUME_PASSIVELY",
          "messageModel": "CLUSTERING", "consumeFromWhere": "CONSUME_FROM_LAST_OFFSET", "subscriptionDataSet": []}],
          "producerDataSet": []}
    assert broker.request(34, body=json.dumps(hb).encode()).code == 0
    r = namesrv.request(105, {"topic": "%RETRY%ns_cg"})
    assert r.code == 0
    qd = TopicRouteData.decode(r.body).queueDatas[0]
    assert (qd.readQueueNums, qd.writeQueueNums, qd.perm) == (1, 1, 6)


def test_cluster_info(serve, namesrv):
    r = namesrv.request(106)
    assert r.code == 0
    assert '"brokerAddrs":{0:' in r.body.decode()
    info = ClusterInfo.from_json_obj(fastjson.loads(r.body))
    assert info.clusterAddrTable == {"DefaultCluster": ["broker-a"]}
    assert info.brokerAddrTable["broker-a"].brokerAddrs == {0: serve.broker}


def _register(w: Wire, name: str, addr: str, topics: dict[str, TopicConfig], compressed: bool = False):
    body = RegisterBrokerBody(TopicConfigSerializeWrapper(topics, DataVersion(1, 1)))
    raw = body.encode_compressed() if compressed else fastjson.dumpb(body)
    h = RegisterBrokerRequestHeader(name, addr, "OtherCluster", "127.0.0.1:1", 0, compressed, 0)
    return w.request(103, h.to_ext(), raw)


def test_another_broker_registers_unregisters_and_drops_on_close(serve, namesrv):
    other = Wire(serve.namesrv)
    try:
        r = _register(other, "broker-x", "127.0.0.9:30911", {"OnlyOnX": TopicConfig("OnlyOnX", 2, 2, 6)})
        assert r.code == 0
        route = TopicRouteData.decode(namesrv.request(105, {"topic": "OnlyOnX"}).body)
        assert route.brokerDatas[0].brokerAddrs == {0: "127.0.0.9:30911"}
        assert route.queueDatas[0].writeQueueNums == 2
        h = UnRegisterBrokerRequestHeader("broker-x", "127.0.0.9:30911", "OtherCluster", 0)
        assert other.request(104, h.to_ext()).code == 0
        assert namesrv.request(105, {"topic": "OnlyOnX"}).code == 17
        assert _register(other, "broker-y", "127.0.0.9:31911", {"OnlyOnY": TopicConfig("OnlyOnY", 1, 1, 6)},
                         compressed=True).code == 0
        assert namesrv.request(105, {"topic": "OnlyOnY"}).code == 0
    finally:
        other.close()
    import time

    deadline = time.time() + 5
    while time.time() < deadline and namesrv.request(105, {"topic": "OnlyOnY"}).code == 0:
        time.sleep(0.05)
    assert namesrv.request(105, {"topic": "OnlyOnY"}).code == 17  # channel closed: broker dropped
    assert namesrv.request(105, {"topic": "TBW102"}).code == 0  # our own broker stays


def test_register_with_bad_crc_is_refused(namesrv):
    body = fastjson.dumpb(RegisterBrokerBody())
    h = RegisterBrokerRequestHeader("broker-z", "127.0.0.9:1", "C", "x", 0, False, 12345)
    assert namesrv.request(103, h.to_ext(), body).code == 1


def test_broker_expires_120s_after_last_registration():
    now = [1_000_000]
    rim = RouteInfoManager(clock=lambda: now[0])
    sentinel = object()
    rim.register_broker("C", "1.2.3.4:1", "b", 0, "", {"T": TopicConfig("T", 4, 4)}, DataVersion(1, 1),
                        sentinel)  # type: ignore[arg-type]
    now[0] += 119_000
    assert rim.scan_not_active_broker() == [] and rim.pickup_topic_route_data("T") is not None
    now[0] += 2_000
    assert rim.scan_not_active_broker() == ["1.2.3.4:1"]
    assert rim.pickup_topic_route_data("T") is None and "b" not in rim.broker_addr_table
