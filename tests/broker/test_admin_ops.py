"""The operator's requests (issue 14) over real sockets against serve: broker config get/update
(running value and the persisted -c file), subscription groups, topic list/delete, server-side
offset reset and its OFFSET_MOVED pull, queryCq, producers, consumer calls, the name server's KV
config, its own config and write permissions. tests/interop/test_mqadmin_all.py runs the same
through Apache's mqadmin against Apache's broker too."""

from __future__ import annotations

import json
import time

from rmqtool.broker.admin.config import string_to_properties
from rmqtool.broker.admin.runtime import Snapshot, human_bytes, tps
from rmqtool.remoting import fastjson
from tests.broker.conftest import ServeProcess, Wire, heartbeat_body, pull_ext, send_ext, sub_data


def _props(body: bytes) -> dict[str, str]:
    return string_to_properties(body.decode())


def test_broker_config_update_changes_the_running_broker_and_persists(tmp_path):
    serve = ServeProcess(tmp_path / "store")
    try:
        w = Wire(serve.broker)
        r = w.request(26)
        conf = _props(r.body)
        assert r.code == 0 and json.loads(r.ext_fields["version"])["counter"] == 0
        assert conf["brokerName"] == serve.broker_name and conf["maxMessageSize"] == "4194304"
        assert w.request(25, body=b"maxMessageSize=1024\nnoSuchKey=1\n").code == 0
        conf = _props(w.request(26).body)
        assert conf["maxMessageSize"] == "1024" and "noSuchKey" not in conf
        assert json.loads(w.request(26).ext_fields["version"])["counter"] == 1
        # the running broker applies it: a 2000-byte body is now too large
        big = w.request(310, send_ext("AO_Big", 0), b"x" * 2000)
        assert big.code == 13, big
        persisted = _props(serve.conf_path.read_bytes())
        assert persisted["maxMessageSize"] == "1024"
        r = w.request(25, body=b"brokerConfigPath=/x\n")
        assert (r.code, r.remark) == (16, "Can not update config in black list.")
        w.close()
    finally:
        assert serve.stop() == 0


def test_broker_permission_update_reregisters_read_only(serve, broker, namesrv):
    broker.request(310, send_ext("AO_Perm", 0), b"x")
    try:
        assert broker.request(25, body=b"brokerPermission=4\n").code == 0
        route = fastjson.loads(namesrv.request(105, {"topic": "AO_Perm"}).body)
        assert route["queueDatas"][0]["perm"] == 4
    finally:
        assert broker.request(25, body=b"brokerPermission=6\n").code == 0
    route = fastjson.loads(namesrv.request(105, {"topic": "AO_Perm"}).body)
    assert route["queueDatas"][0]["perm"] == 6


def test_subscription_groups_create_get_list_delete(serve, broker):
    body = json.dumps({"groupName": "ao_g1", "retryMaxTimes": 5, "consumeMessageOrderly": True}).encode()
    assert broker.request(200, body=body).code == 0
    got = fastjson.loads(broker.request(352, {"group": "ao_g1"}).body)
    assert (got["groupName"], got["retryMaxTimes"], got["consumeMessageOrderly"]) == ("ao_g1", 5, True)
    lst = json.dumps({"groupConfigList": [{"groupName": "ao_g2"}, {"groupName": "ao_g3"}]}).encode()
    assert broker.request(225, body=lst).code == 0
    table = fastjson.loads(broker.request(201).body)["subscriptionGroupTable"]
    assert {"ao_g1", "ao_g2", "ao_g3"} <= set(table)
    assert broker.request(207, {"groupName": "ao_g2", "cleanOffset": "true"}).code == 0
    r = broker.request(352, {"group": "ao_g2"})
    assert (r.code, r.remark) == (26, "No group in this broker")


def test_topic_list_create_and_delete(serve, broker, namesrv):
    lst = {"topicConfigList": [{"topicName": "AO_L1", "readQueueNums": 2, "writeQueueNums": 2, "perm": 6},
                               {"topicName": "AO_L2", "readQueueNums": 1, "writeQueueNums": 1, "perm": 6}]}
    assert broker.request(18, body=json.dumps(lst).encode()).code == 0
    assert namesrv.request(105, {"topic": "AO_L1"}).code == 0
    assert broker.request(310, send_ext("AO_L1", 1), b"x").code == 0
    bad = {"topicConfigList": [{"topicName": "TBW102"}]}
    r = broker.request(18, body=json.dumps(bad).encode())
    assert (r.code, r.remark) == (29, "The topic[TBW102] is conflict with system topic.")
    assert broker.request(215, {"topic": "AO_L1"}).code == 0
    assert broker.request(351, {"topic": "AO_L1"}).code == 17
    # the name server keeps the route (deleteTopicWithBrokerRegistration=false, as Java's default)
    # until it is deleted there too, as mqadmin deleteTopic does with DELETE_TOPIC_IN_NAMESRV 216
    assert namesrv.request(105, {"topic": "AO_L1"}).code == 0
    assert namesrv.request(216, {"topic": "AO_L1"}).code == 0
    assert namesrv.request(105, {"topic": "AO_L1"}).code == 17
    assert broker.request(30, {"topic": "AO_L1", "queueId": "1"}).ext_fields["offset"] == "0"
    r = broker.request(215, {"topic": " "})
    assert (r.code, r.remark) == (29, "The specified topic is blank.")


def test_reset_offset_by_time_then_the_next_pull_moves(serve, broker):
    for i in range(4):
        broker.request(310, send_ext("AO_Reset", 0), f"m{i}".encode())
    broker.request(200, body=b'{"groupName":"ao_reset"}')
    q = {"consumerGroup": "ao_reset", "topic": "AO_Reset", "queueId": "0"}
    assert broker.request(15, {**q, "commitOffset": "1"}).code == 0
    r = broker.request(222, {"topic": "AO_Reset", "group": "ao_reset", "timestamp": "-1", "isForce": "true"})
    assert r.code == 0
    assert r.body.startswith(b'{"offsetTable":{{"brokerName":') and b'"queueId":0,"topic":"AO_Reset"}:4,' in r.body
    assert broker.request(14, q).ext_fields["offset"] == "4"
    # a commit of an older offset before the consumer saw the reset is ignored
    r = broker.request(15, {**q, "commitOffset": "2"})
    assert (r.code, r.remark) == (0, "Offset has been previously reset")
    hb = heartbeat_body("10.0.0.9@r", "ao_reset", [sub_data("AO_Reset")])
    broker.request(34, body=hb)
    p = broker.request(11, pull_ext("AO_Reset", "ao_reset", 0, 1))
    assert (p.code, p.ext_fields["nextBeginOffset"]) == (21, "4")
    assert broker.request(15, {**q, "commitOffset": "3"}).remark is None  # the reset was consumed
    r = broker.request(222, {"topic": "AO_Reset", "group": "ao_nogroup", "timestamp": "-1", "isForce": "true"})
    assert (r.code, r.remark) == (26, "Group ao_nogroup does not exist")


def test_query_consume_queue(serve, broker):
    for i in range(3):
        broker.request(310, send_ext("AO_Cq", 0), f"m{i}".encode())
    body = fastjson.loads(broker.request(321, {"topic": "AO_Cq", "queueId": "0", "index": "1", "count": "5"}).body)
    assert (body["minQueueIndex"], body["maxQueueIndex"]) == (0, 3)
    assert len(body["queueData"]) == 2 and body["queueData"][0]["physicSize"] > 0
    r = broker.request(321, {"topic": "AO_Cq", "queueId": "7", "index": "0", "count": "1"})
    assert (r.code, r.remark) == (1, "7@AO_Cq is not exist!")


def test_producer_connections_and_consumer_calls(serve, broker):
    hb = heartbeat_body("10.0.0.7@p", "ao_cg", [sub_data("AO_Calls")], producer="ao_pg")
    assert broker.request(34, body=hb).code == 0
    conns = fastjson.loads(broker.request(204, {"producerGroup": "ao_pg"}).body)["connectionSet"]
    assert [c["clientId"] for c in conns] == ["10.0.0.7@p"]
    r = broker.request(204, {"producerGroup": "ao_nopg"})
    assert (r.code, r.remark) == (1, "the producer group[ao_nopg] not exist")
    info = fastjson.loads(broker.request(328).body)["data"]
    assert info["ao_pg"][0]["clientId"] == "10.0.0.7@p"
    # the broker passes GET_CONSUMER_RUNNING_INFO to the consumer's channel and answers with its answer
    r = broker.request(307, {"consumerGroup": "ao_cg", "clientId": "10.0.0.7@p", "jstackEnable": "false"})
    assert r.code == 0
    asked = broker.wait_incoming(307)
    assert (asked.ext_fields["consumerGroup"], asked.ext_fields["clientId"]) == ("ao_cg", "10.0.0.7@p")
    r = broker.request(307, {"consumerGroup": "ao_cg", "clientId": "nobody"})
    assert (r.code, r.remark) == (1, "The Consumer <ao_cg> <nobody> not online")


def test_broker_consume_stats_and_readahead(serve, broker):
    broker.request(310, send_ext("AO_Bcs", 0), b"x")
    broker.request(200, body=b'{"groupName":"ao_bcs"}')
    broker.request(15, {"consumerGroup": "ao_bcs", "topic": "AO_Bcs", "queueId": "0", "commitOffset": "0"})
    stats = fastjson.loads(broker.request(317, {"isOrder": "false"}).body)
    groups = {g for entry in stats["consumeStatsList"] for g in entry}
    assert "ao_bcs" in groups and stats["totalDiff"] >= 1
    r = broker.request(2004, {"READ_AHEAD_MODE": "1"})
    assert (r.code, r.remark) == (0, "set commitlog readahead mode success, mode: 1")
    assert _props(broker.request(26).body)["dataReadAheadEnable"] == "false"
    r = broker.request(2004, {"READ_AHEAD_MODE": "7"})
    assert (r.code, r.remark) == (29, "set commitlog readahead mode param value error")


def test_namesrv_kv_config_and_own_config(serve, namesrv):
    assert namesrv.request(100, {"namespace": "AO_NS", "key": "k", "value": "v"}).code == 0
    r = namesrv.request(101, {"namespace": "AO_NS", "key": "k"})
    assert (r.code, r.ext_fields.get("value")) == (0, "v")
    assert fastjson.loads(namesrv.request(219, {"namespace": "AO_NS"}).body) == {"table": {"k": "v"}}
    assert namesrv.request(102, {"namespace": "AO_NS", "key": "k"}).code == 0
    r = namesrv.request(101, {"namespace": "AO_NS", "key": "k"})
    assert (r.code, r.remark) == (22, "No config item, Namespace: AO_NS Key: k")
    assert namesrv.request(100, {"namespace": "AO_NS"}).remark == "namespace or key is null"
    kv_file = serve.store / "namesrv" / "kvConfig.json"
    assert json.loads(kv_file.read_text())["configTable"]["AO_NS"] == {}
    conf = _props(namesrv.request(319).body)
    assert conf["listenPort"] == serve.namesrv.rsplit(":", 1)[1] and conf["productEnvName"] == "center"
    assert namesrv.request(318, body=b"productEnvName=ao-test\n").code == 0
    assert _props(namesrv.request(319).body)["productEnvName"] == "ao-test"
    assert "productEnvName=ao-test" in (serve.store / "namesrv" / "namesrv.properties").read_text()
    r = namesrv.request(318, body=b"kvConfigPath=/tmp/x\n")
    assert (r.code, r.remark) == (16, "Can not update config in black list.")


def test_route_carries_order_conf_when_order_messages_are_enabled(serve, broker, namesrv):
    broker.request(310, send_ext("AO_Order", 0), b"x")
    assert namesrv.request(100, {"namespace": "ORDER_TOPIC_CONFIG", "key": "AO_Order", "value": "broker-a:4"}).code == 0
    assert "orderTopicConf" not in fastjson.loads(namesrv.request(105, {"topic": "AO_Order"}).body)
    assert namesrv.request(318, body=b"orderMessageEnable=true\n").code == 0
    try:
        route = fastjson.loads(namesrv.request(105, {"topic": "AO_Order"}).body)
        assert route["orderTopicConf"] == "broker-a:4"
    finally:
        namesrv.request(318, body=b"orderMessageEnable=false\n")


def test_namesrv_topics_by_cluster_and_system_topics(serve, broker, namesrv):
    broker.request(310, send_ext("AO_ByCluster", 0), b"x")
    topics = fastjson.loads(namesrv.request(224, {"cluster": "DefaultCluster"}).body)["topicList"]
    assert "AO_ByCluster" in topics
    assert fastjson.loads(namesrv.request(224, {"cluster": "NoCluster"}).body)["topicList"] == []
    sys_topics = fastjson.loads(namesrv.request(304).body)
    assert sys_topics["topicList"][:2] == ["DefaultCluster", serve.broker_name]
    assert sys_topics["brokerAddr"] == serve.broker


def test_namesrv_wipe_and_add_write_perm(serve, broker, namesrv):
    broker.request(310, send_ext("AO_Wipe", 0), b"x")
    r = namesrv.request(205, {"brokerName": serve.broker_name})
    assert r.code == 0 and int(r.ext_fields["wipeTopicCount"]) > 0
    assert fastjson.loads(namesrv.request(105, {"topic": "AO_Wipe"}).body)["queueDatas"][0]["perm"] == 4
    r = namesrv.request(327, {"brokerName": serve.broker_name})
    assert r.code == 0 and int(r.ext_fields["addTopicCount"]) > 0
    assert fastjson.loads(namesrv.request(105, {"topic": "AO_Wipe"}).body)["queueDatas"][0]["perm"] == 6


def test_runtime_tps_windows_and_byte_counts():
    samples = __import__("collections").deque([Snapshot(i * 1000, i * 5, 0, 0, i * 2) for i in range(12)])
    assert tps(samples, 10, "put") == "5.0" and tps(samples, 60, "put") == ""
    assert tps(samples, 10, "transferred") == "2.0"
    assert human_bytes(512) == "512 B" and human_bytes(1536) == "1.5 KiB"
    assert human_bytes(252 * 1024 ** 3) == "252.0 GiB"


def test_view_broker_stats_counts_puts_and_gets(serve, broker):
    for i in range(3):
        broker.request(310, send_ext("AO_Stats", 0), f"m{i}".encode())
    broker.request(200, body=b'{"groupName":"ao_stats"}')
    assert broker.request(11, pull_ext("AO_Stats", "ao_stats", 0, 0)).code == 0

    def stats(name: str, key: str) -> dict:
        return fastjson.loads(broker.request(315, {"statsName": name, "statsKey": key}).body)

    deadline = time.time() + 20  # the minute window counts from its next 10 s snapshot on
    while stats("TOPIC_PUT_NUMS", "AO_Stats")["statsMinute"]["sum"] < 3 and time.time() < deadline:
        time.sleep(0.5)
    put = stats("TOPIC_PUT_NUMS", "AO_Stats")
    assert set(put) == {"statsDay", "statsHour", "statsMinute"}
    assert put["statsMinute"]["sum"] == 3 and put["statsMinute"]["tps"] > 0
    assert stats("GROUP_GET_NUMS", "AO_Stats@ao_stats")["statsMinute"]["sum"] == 3
    r = broker.request(315, {"statsName": "TOPIC_PUT_NUMS", "statsKey": "AO_NoSuch"})
    assert (r.code, r.remark) == (1, "The stats <TOPIC_PUT_NUMS> <AO_NoSuch> not exist")


def test_stats_item_windows():
    from rmqtool.broker.admin.brokerstats import StatsItem

    item = StatsItem(0)
    item.add(5)
    item.sample(10_000)
    item.add(5, 2)
    item.sample(20_000)
    assert item.snapshot(0) == {"avgpt": 10 / 3, "sum": 10, "tps": 0.5}
    assert item.snapshot(1) == {"avgpt": 0.0, "sum": 0, "tps": 0.0}  # no 10-minute snapshot yet


def test_sends_counted_in_place_are_folded_into_their_item():
    """The send handlers bump `put_msgs[topic]` and `put_calls[topic]`; sampling (or a read)
    adds them to TOPIC_PUT_NUMS as `inc` would have, beside counts made with it."""
    from rmqtool.broker.admin.brokerstats import TOPIC_PUT_NUMS, BrokerStatsManager

    now = [0]
    stats = BrokerStatsManager(lambda: now[0])
    stats.inc(TOPIC_PUT_NUMS, "T", 32)  # a batch of 32: one call
    for topic, n in (("T", 32), ("T", 32), ("T", 1), ("T", 1), ("U", 1)):  # as the send handlers count
        stats.put_msgs[topic] += n
        stats.put_calls[topic] += 1
    now[0] = 10_000
    stats.sample()
    assert not stats.put_msgs and not stats.put_calls
    t, u = stats.items[(TOPIC_PUT_NUMS, "T")], stats.items[(TOPIC_PUT_NUMS, "U")]
    assert (t.value, t.times, u.value, u.times) == (98, 5, 1, 1)
    assert t.snapshot(0)["sum"] == 98  # U's item begins now: its sum counts from its next snapshot


def test_runtime_info_keys(serve, broker):
    broker.request(310, send_ext("AO_Rt", 0), b"x")
    time.sleep(0.1)
    rt = json.loads(broker.request(28).body)["table"]
    for key in ("putTps", "getTransferredTps", "commitLogDiskRatio", "sendThreadPoolQueueHeadWaitTimeMills",
                "putMessageSizeTotal", "msgPutTotalTodayMorning"):
        assert key in rt, key
    assert int(rt["earliestMessageTimeStamp"]) > 0 and int(rt["putMessageSizeTotal"]) > 0
