"""Name server over real sockets: routes (TBW102, %RETRY%, key quoting by version), cluster info,
REGISTER/UNREGISTER_BROKER from another broker process, channel close, expiry (120 s, or the
register header's heartbeatTimeoutMillis), the QUERY_DATA_VERSION / BROKER_HEARTBEAT requests that
keep a registered broker alive, and GET_BROKER_MEMBER_GROUP."""

from __future__ import annotations

import asyncio
import json

from rmqtool.broker.nameserver import NameServerProcessor, RouteInfoManager
from rmqtool.remoting import fastjson
from rmqtool.remoting.bodies import (
    BrokerMemberGroup,
    ClusterInfo,
    DataVersion,
    GetBrokerMemberGroupResponseBody,
    RegisterBrokerBody,
    TopicConfig,
    TopicConfigSerializeWrapper,
    TopicRouteData,
)
from rmqtool.remoting.command import RemotingCommand
from rmqtool.remoting.headers import (
    BrokerHeartbeatRequestHeader,
    QueryDataVersionRequestHeader,
    RegisterBrokerRequestHeader,
    UnRegisterBrokerRequestHeader,
)
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


class _Channel:
    """A broker's channel as the route table sees it: only whether it was closed."""

    aborted = False

    def abort(self) -> None:
        self.aborted = True


def test_broker_expires_120s_after_last_registration():
    now = [1_000_000]
    rim = RouteInfoManager(clock=lambda: now[0])
    sentinel = _Channel()
    rim.register_broker("C", "1.2.3.4:1", "b", 0, "", {"T": TopicConfig("T", 4, 4)}, DataVersion(1, 1),
                        sentinel)  # type: ignore[arg-type]
    now[0] += 119_000
    assert rim.scan_not_active_broker() == [] and rim.pickup_topic_route_data("T") is not None
    now[0] += 2_000
    assert rim.scan_not_active_broker() == ["1.2.3.4:1"]
    assert rim.pickup_topic_route_data("T") is None and "b" not in rim.broker_addr_table
    assert sentinel.aborted  # its channel is closed, as Java's scanNotActiveBroker does


# ------------------------------------------------------------ QUERY_DATA_VERSION / BROKER_HEARTBEAT

def _query_ext(name: str, addr: str, cluster: str = "OtherCluster") -> dict[str, str]:
    return QueryDataVersionRequestHeader(name, addr, cluster, 0).to_ext()


def test_query_data_version_says_changed_unless_it_is_the_registered_version(serve, namesrv):
    other = Wire(serve.namesrv)
    try:
        addr = "127.0.0.9:32911"
        unknown = other.request(322, _query_ext("broker-q", addr), fastjson.dumpb(DataVersion(1, 1)))
        assert unknown.code == 0 and unknown.ext_fields["changed"] == "true"
        assert not unknown.body  # nothing stored for a broker that never registered
        assert "broker-q" not in ClusterInfo.from_json_obj(fastjson.loads(namesrv.request(106).body)).brokerAddrTable

        assert _register(other, "broker-q", addr, {"OnlyOnQ": TopicConfig("OnlyOnQ", 1, 1, 6)}).code == 0
        same = other.request(322, _query_ext("broker-q", addr), fastjson.dumpb(DataVersion(1, 1)))
        assert same.code == 0 and same.ext_fields["changed"] == "false"
        assert DataVersion.from_json_obj(fastjson.loads(same.body)) == DataVersion(1, 1)

        newer = other.request(322, _query_ext("broker-q", addr), fastjson.dumpb(DataVersion(2, 1)))
        assert newer.ext_fields["changed"] == "true"
        assert DataVersion.from_json_obj(fastjson.loads(newer.body)) == DataVersion(1, 1)  # the stored one
        other_cluster = other.request(322, _query_ext("broker-q", addr, "NotItsCluster"),
                                      fastjson.dumpb(DataVersion(1, 1)))
        assert other_cluster.ext_fields["changed"] == "true" and not other_cluster.body
        no_body = other.request(322, _query_ext("broker-q", addr))
        assert no_body.code == 0 and no_body.ext_fields["changed"] == "true"

        assert other.request(322, {"brokerAddr": addr}, fastjson.dumpb(DataVersion(1, 1))).code == 1  # header
        assert other.request(322, _query_ext("broker-q", addr), b"[1]").code == 1  # not a DataVersion
    finally:
        other.close()


def test_broker_heartbeat_and_oneway_data_version_are_accepted(serve):
    other = Wire(serve.namesrv)
    try:
        addr = "127.0.0.9:33911"
        assert _register(other, "broker-h", addr, {"OnlyOnH": TopicConfig("OnlyOnH", 1, 1, 6)}).code == 0
        # BrokerOuterAPI.sendHeartbeat sets clusterName, brokerAddr and brokerName only
        ext = {"clusterName": "OtherCluster", "brokerAddr": addr, "brokerName": "broker-h"}
        assert other.request(904, ext).code == 0
        full = BrokerHeartbeatRequestHeader("OtherCluster", addr, "broker-h", 0, 1, 100, 100, 10_000, 1)
        assert other.request(904, full.to_ext()).code == 0
        assert other.request(904, {"brokerAddr": addr}).code == 1
        # sendHeartbeatViaDataVersion and sendHeartbeat are oneway: no answer, and the channel stays usable
        seen = other.responses_seen()
        other.oneway(322, _query_ext("broker-h", addr), fastjson.dumpb(DataVersion(1, 1)))
        other.oneway(904, ext)
        assert other.request(105, {"topic": "OnlyOnH"}).code == 0
        assert other.responses_seen() == seen + 1
    finally:
        other.close()


def _call(proc: NameServerProcessor, code: int, ext: dict[str, str], body: bytes = b"",
          conn: object = None) -> RemotingCommand:
    """One request straight to the processor; a `conn` makes a registration expirable (None is in-process)."""
    return asyncio.run(proc.process(RemotingCommand.request(code, ext, body), conn))  # type: ignore[arg-type]


def test_query_data_version_and_broker_heartbeat_keep_a_broker_alive():
    now = [1_000_000]
    rim = RouteInfoManager(clock=lambda: now[0])
    proc = NameServerProcessor(rim)
    sentinel = _Channel()
    for addr, name in (("1.2.3.4:1", "q"), ("1.2.3.5:1", "h")):
        rim.register_broker("C", addr, name, 0, "", {f"T{name}": TopicConfig(f"T{name}", 4, 4)}, DataVersion(1, 1),
                            sentinel)  # type: ignore[arg-type]
    query = QueryDataVersionRequestHeader("q", "1.2.3.4:1", "C", 0).to_ext()
    beat = {"clusterName": "C", "brokerAddr": "1.2.3.5:1", "brokerName": "h"}
    for _ in range(4):  # 4 x 100 s: a registration alone would have expired after 120 s
        now[0] += 100_000
        assert _call(proc, 322, query, fastjson.dumpb(DataVersion(1, 1))).ext_fields["changed"] == "false"
        assert _call(proc, 904, beat).code == 0
        assert rim.scan_not_active_broker() == []
    assert rim.pickup_topic_route_data("Tq") is not None and rim.pickup_topic_route_data("Th") is not None
    # a heartbeat naming another cluster, or for an unknown broker, refreshes nothing and adds nothing
    now[0] += 100_000
    _call(proc, 904, dict(beat, clusterName="Elsewhere"))
    _call(proc, 904, {"clusterName": "C", "brokerAddr": "9.9.9.9:1", "brokerName": "nobody"})
    assert "9.9.9.9:1" not in rim.broker_live_table
    assert _call(proc, 322, query, fastjson.dumpb(DataVersion(1, 1))).code == 0
    now[0] += 21_000
    assert rim.scan_not_active_broker() == ["1.2.3.5:1"]
    assert rim.pickup_topic_route_data("Th") is None and rim.pickup_topic_route_data("Tq") is not None


# ------------------------------------------------------------ per-broker heartbeatTimeoutMillis

def _register_ext(name: str, addr: str, timeout_ms: int | None = None) -> dict[str, str]:
    return RegisterBrokerRequestHeader(name, addr, "C", "", 0, heartbeatTimeoutMillis=timeout_ms).to_ext()


def _register_body(topic: str) -> bytes:
    return fastjson.dumpb(RegisterBrokerBody(TopicConfigSerializeWrapper({topic: TopicConfig(topic, 4, 4)},
                                                                         DataVersion(1, 1))))


def test_acting_master_broker_expires_after_its_own_10s_timeout_the_default_after_120s():
    now = [1_000_000]
    rim = RouteInfoManager(clock=lambda: now[0])
    proc = NameServerProcessor(rim)
    channel = _Channel()
    assert _call(proc, 103, _register_ext("acting", "1.2.3.4:1", 10_000), _register_body("Ta"), channel).code == 0
    assert _call(proc, 103, _register_ext("plain", "1.2.3.5:1"), _register_body("Tp"), channel).code == 0
    assert rim.broker_live_table["1.2.3.4:1"].heartbeat_timeout_millis == 10_000
    assert rim.broker_live_table["1.2.3.5:1"].heartbeat_timeout_millis == 120_000
    now[0] += 10_000
    assert rim.scan_not_active_broker() == []  # Java's `last + timeout < now`: not yet at exactly 10 s
    now[0] += 1
    assert rim.scan_not_active_broker() == ["1.2.3.4:1"]
    assert rim.pickup_topic_route_data("Ta") is None and rim.pickup_topic_route_data("Tp") is not None
    now[0] += 120_000 - 10_001
    assert rim.scan_not_active_broker() == []
    now[0] += 1
    assert rim.scan_not_active_broker() == ["1.2.3.5:1"] and rim.pickup_topic_route_data("Tp") is None


def test_heartbeats_keep_a_10s_broker_alive_and_a_registration_without_the_header_restores_120s():
    now = [1_000_000]
    rim = RouteInfoManager(clock=lambda: now[0])
    proc = NameServerProcessor(rim)
    channel = _Channel()
    addr = "1.2.3.4:1"
    assert _call(proc, 103, _register_ext("acting", addr, 10_000), _register_body("Ta"), channel).code == 0
    query = QueryDataVersionRequestHeader("acting", addr, "C", 0).to_ext()
    beat = {"clusterName": "C", "brokerAddr": addr, "brokerName": "acting"}
    for i in range(6):  # 6 x 9 s, each refreshed by one of the two heartbeats: never 10 s of silence
        now[0] += 9_000
        if i % 2:
            assert _call(proc, 322, query, fastjson.dumpb(DataVersion(1, 1))).ext_fields["changed"] == "false"
        else:
            assert _call(proc, 904, beat).code == 0
        assert rim.scan_not_active_broker() == []
    assert rim.broker_live_table[addr].heartbeat_timeout_millis == 10_000  # a heartbeat keeps the timeout
    assert _call(proc, 103, _register_ext("acting", addr), _register_body("Ta"), channel).code == 0
    now[0] += 119_000
    assert rim.scan_not_active_broker() == [] and rim.pickup_topic_route_data("Ta") is not None
    now[0] += 1_001
    assert rim.scan_not_active_broker() == [addr]


# ------------------------------------------------------------ GET_BROKER_MEMBER_GROUP

def _register_id(w: Wire, name: str, addr: str, broker_id: int):
    body = fastjson.dumpb(RegisterBrokerBody(TopicConfigSerializeWrapper({}, DataVersion(1, 1))))
    return w.request(103, RegisterBrokerRequestHeader(name, addr, "OtherCluster", "", broker_id).to_ext(), body)


def test_broker_member_group_of_a_master_and_its_slave(serve, namesrv):
    other = Wire(serve.namesrv)
    try:
        assert _register_id(other, "broker-m", "127.0.0.9:34911", 0).code == 0
        assert _register_id(other, "broker-m", "127.0.0.9:34921", 1).code == 0
        r = namesrv.request(901, {"clusterName": "OtherCluster", "brokerName": "broker-m"})
        assert r.code == 0
        # RemotingSerializable.encode: default fastjson, beans' fields sorted, Long keys unquoted
        assert r.body == (b'{"brokerMemberGroup":{"brokerAddrs":{0:"127.0.0.9:34911",1:"127.0.0.9:34921"},'
                          b'"brokerName":"broker-m","cluster":"OtherCluster"}}')
        own = namesrv.request(901, {"clusterName": "DefaultCluster", "brokerName": "broker-a"}, version=409)
        assert GetBrokerMemberGroupResponseBody.decode(own.body).brokerMemberGroup == BrokerMemberGroup(
            "DefaultCluster", "broker-a", {0: serve.broker})
        assert b"{0:" in own.body  # unquoted for a new client too: no acceptStandardJsonOnly here
    finally:
        other.close()


def test_broker_member_group_of_an_unknown_broker_or_a_header_without_fields_is_empty(namesrv):
    r = namesrv.request(901, {"clusterName": "Nowhere", "brokerName": "nobody"})
    assert r.code == 0 and r.remark == "not set any response code"  # Java: an empty group, not an error
    assert r.body == b'{"brokerMemberGroup":{"brokerAddrs":{},"brokerName":"nobody","cluster":"Nowhere"}}'
    # Java looks the name up in brokerAddrTable alone: another cluster's name still finds the broker
    elsewhere = GetBrokerMemberGroupResponseBody.decode(
        namesrv.request(901, {"clusterName": "Nowhere", "brokerName": "broker-a"}).body).brokerMemberGroup
    assert elsewhere is not None and elsewhere.cluster == "Nowhere" and list(elsewhere.brokerAddrs) == [0]
    # Java's decoder swallows its own "the custom field <brokerName> is null": a null name, no error
    missing = namesrv.request(901, {"clusterName": "DefaultCluster"})
    assert missing.code == 0 and missing.body == b'{"brokerMemberGroup":{"brokerAddrs":{},"cluster":"DefaultCluster"}}'
    assert namesrv.request(901, {}).body == b'{"brokerMemberGroup":{"brokerAddrs":{}}}'
    assert namesrv.request(901, {"brokerName": "broker-a", "clusterName": ""}).body.endswith(b'"cluster":""}}')


def test_a_prime_slave_registering_without_the_masters_topic_keeps_its_route_unless_configured():
    """NamesrvConfig.deleteTopicWithBrokerRegistration (false by default): a slave whose master is
    gone registers as the prime slave; a topic its table lacks (SlaveSynchronize had not copied it
    yet) keeps the master's queue data, so consumers still find the slave for it."""
    for delete, kept in ((False, True), (True, False)):
        rim = RouteInfoManager(delete_topic_with_broker_registration=delete)
        rim.register_broker("C", "1.2.3.4:1", "b", 0, "", {"T": TopicConfig("T", 4, 4)}, DataVersion(1, 1))
        rim.register_broker("C", "1.2.3.4:2", "b", 1, "", {}, DataVersion(1, 2), enable_acting_master=False)
        rim.unregister_broker("C", "1.2.3.4:1", "b", 0)
        rim.register_broker("C", "1.2.3.4:2", "b", 1, "", {"U": TopicConfig("U", 4, 4)}, DataVersion(1, 3),
                            enable_acting_master=False)
        route = rim.pickup_topic_route_data("T")
        assert (route is not None) is kept
        if kept:
            assert route.brokerDatas[0].brokerAddrs == {1: "1.2.3.4:2"}
        assert rim.pickup_topic_route_data("U") is not None


def test_a_registration_keeps_the_queue_data_of_unchanged_topics_and_replaces_changed_ones():
    """A broker registers its whole table for each new topic: the unchanged topics' QueueData
    stay the same objects (no new objects for the collector), a changed one is replaced."""
    rim = RouteInfoManager()
    table = {f"T{i}": TopicConfig(f"T{i}", 4, 4) for i in range(3)}
    rim.register_broker("C", "1.2.3.4:1", "b", 0, "", table, DataVersion(1, 1))
    before = {t: rim.topic_queue_table[t]["b"] for t in table}
    table["T1"] = TopicConfig("T1", 8, 8)
    table["T2"] = TopicConfig("T2", 4, 4, perm=4)
    table["T3"] = TopicConfig("T3", 2, 2)
    rim.register_broker("C", "1.2.3.4:1", "b", 0, "", table, DataVersion(2, 2))
    after = {t: rim.topic_queue_table[t]["b"] for t in table}
    assert after["T0"] is before["T0"]
    assert (after["T1"].readQueueNums, after["T1"].writeQueueNums, after["T2"].perm) == (8, 8, 4)
    assert after["T3"].readQueueNums == 2
    assert rim.pickup_topic_route_data("T1").queueDatas[0].writeQueueNums == 8
