"""Client and admin requests over real sockets: heartbeat (version 409), consumer list and
NOTIFY_CONSUMER_IDS_CHANGED, unregister, offsets, locks, max/min/search/earliest offsets, view by
id, query by key, topic create / all topics, and the mqadmin stats requests."""

from __future__ import annotations

import json
import time

from rmqtool.layouts.msgid import decode_offset_msg_id
from rmqtool.remoting import fastjson
from rmqtool.remoting.bodies import (
    ConsumerConnection,
    ConsumerListBody,
    ConsumeStats,
    LockBatchResponseBody,
    MessageQueue,
    TopicConfigSerializeWrapper,
    TopicStatsTable,
)
from tests.broker.conftest import Wire, decode_records, heartbeat_body, props, pull_ext, send_ext, sub_data


def test_heartbeat_answers_broker_version_and_lists_consumers_with_notify(serve, broker):
    hb = heartbeat_body("10.0.0.1@a", "cg_list", [sub_data("CA_Topic")], producer="pg_list")
    r = broker.request(34, body=hb)
    assert r.code == 0 and r.version == 409
    ids = ConsumerListBody.decode(broker.request(38, {"consumerGroup": "cg_list"}).body).consumerIdList
    assert ids == ["10.0.0.1@a"]
    second = Wire(serve.broker)
    try:
        assert second.request(34, body=heartbeat_body("10.0.0.2@b", "cg_list", [sub_data("CA_Topic")])).code == 0
        note = broker.wait_incoming(40)
        assert note.ext_fields == {"consumerGroup": "cg_list"} and note.is_oneway
        ids = ConsumerListBody.decode(broker.request(38, {"consumerGroup": "cg_list"}).body).consumerIdList
        assert sorted(ids) == ["10.0.0.1@a", "10.0.0.2@b"]
        conns = ConsumerConnection.decode(broker.request(203, {"consumerGroup": "cg_list"}).body)
        assert sorted(c.clientId for c in conns.connectionSet) == ["10.0.0.1@a", "10.0.0.2@b"]
        assert "CA_Topic" in conns.subscriptionTable and conns.messageModel == "CLUSTERING"
    finally:
        second.close()
    broker.wait_incoming(40)  # the closed channel left the group
    assert ConsumerListBody.decode(broker.request(38, {"consumerGroup": "cg_list"}).body).consumerIdList == [
        "10.0.0.1@a"]
    assert broker.request(35, {"clientID": "10.0.0.1@a", "consumerGroup": "cg_list",
                               "producerGroup": "pg_list"}).code == 0
    assert broker.request(38, {"consumerGroup": "cg_list"}).code == 1
    assert broker.request(203, {"consumerGroup": "cg_list"}).code == 206


def test_consumer_offsets_query_update(serve, broker):
    q = {"consumerGroup": "cg_off", "topic": "CA_Off", "queueId": "0"}
    broker.request(310, send_ext("CA_Off", 0), b"x")
    assert broker.request(14, q).ext_fields["offset"] == "0"  # a queue that starts at 0: read it from 0
    assert broker.request(11, pull_ext("CA_Off", "cg_off")).code == 0  # the pull creates the group
    assert broker.request(15, {**q, "commitOffset": "1"}).code == 0
    assert broker.request(14, q).ext_fields["offset"] == "1"
    assert broker.request(15, {**q, "topic": "CA_NoSuchTopic", "commitOffset": "1"}).code == 17


def test_max_min_search_earliest_offsets(serve, broker):
    t_before = int(time.time() * 1000) - 5
    for i in range(4):
        broker.request(310, send_ext("CA_Offs", 1), f"{i}".encode())
        time.sleep(0.01)
    q = {"topic": "CA_Offs", "queueId": "1"}
    assert broker.request(30, q).ext_fields["offset"] == "4"
    assert broker.request(31, q).ext_fields["offset"] == "0"
    assert broker.request(30, {"topic": "CA_Offs", "queueId": "3"}).ext_fields["offset"] == "0"
    earliest = int(broker.request(32, q).ext_fields["timestamp"])
    assert earliest >= t_before
    assert broker.request(29, {**q, "timestamp": str(t_before)}).ext_fields["offset"] == "0"
    assert broker.request(29, {**q, "timestamp": str(int(time.time() * 1000) + 60_000)}).code == 0


def test_view_by_id_and_query_by_key(serve, broker):
    r = broker.request(310, send_ext("CA_View", 0, props(KEYS="order-17 other", UNIQ_KEY="CD" * 16)), b"viewed")
    off = decode_offset_msg_id(r.ext_fields["msgId"]).commit_log_offset
    v = broker.request(33, {"offset": str(off)})
    [m] = decode_records(v.body)
    assert m.body == b"viewed" and m.commit_log_offset == off
    assert broker.request(33, {"offset": str(off + 10_000_000)}).code == 1
    deadline = time.time() + 5
    while True:  # the index is written by the dispatcher right after the put
        q = broker.request(12, {"topic": "CA_View", "key": "order-17", "maxNum": "32", "beginTimestamp": "0",
                                "endTimestamp": str(int(time.time() * 1000) + 1000)})
        if q.code == 0 or time.time() > deadline:
            break
        time.sleep(0.1)
    assert q.code == 0 and [x.body for x in decode_records(q.body)] == [b"viewed"]
    assert set(q.ext_fields) == {"indexLastUpdateTimestamp", "indexLastUpdatePhyoffset"}
    miss = broker.request(12, {"topic": "CA_View", "key": "nope", "maxNum": "32", "beginTimestamp": "0",
                               "endTimestamp": str(int(time.time() * 1000))})
    assert miss.code == 22


def test_update_and_create_topic_and_get_all_topic_config(serve, broker, namesrv):
    ext = {"topic": "CA_Created", "defaultTopic": "TBW102", "readQueueNums": "3", "writeQueueNums": "3",
           "perm": "6", "topicFilterType": "SINGLE_TAG", "topicSysFlag": "0", "order": "false"}
    assert broker.request(17, ext).code == 0
    assert broker.request(17, {**ext, "topic": "bad topic"}).code == 29  # INVALID_PARAMETER, as Java answers it
    assert broker.request(17, {**ext, "topic": "SCHEDULE_TOPIC_XXXX"}).code == 29
    all_topics = TopicConfigSerializeWrapper.from_json_obj(fastjson.loads(broker.request(21).body))
    tc = all_topics.topicConfigTable["CA_Created"]
    assert (tc.readQueueNums, tc.writeQueueNums, tc.perm) == (3, 3, 6)
    assert "TBW102" in all_topics.topicConfigTable and all_topics.dataVersion.counter > 0
    route = namesrv.request(105, {"topic": "CA_Created"})
    assert route.code == 0 and b'"writeQueueNums":3' in route.body


def test_stats_topic_status_consumer_progress_runtime(serve, broker):
    for i in range(3):
        broker.request(310, send_ext("CA_Stats", 0), f"{i}".encode())
    broker.request(11, pull_ext("CA_Stats", "cg_stats"))  # creates the group (Java commits only for known groups)
    assert broker.request(15, {"consumerGroup": "cg_stats", "topic": "CA_Stats", "queueId": "0",
                               "commitOffset": "2"}).code == 0
    ts = TopicStatsTable.decode(broker.request(202, {"topic": "CA_Stats"}).body)
    q0 = ts.offsetTable[MessageQueue("CA_Stats", "broker-a", 0)]
    assert (q0.minOffset, q0.maxOffset) == (0, 3) and q0.lastUpdateTimestamp > 0
    assert broker.request(202, {"topic": "CA_NoStats"}).code == 17
    raw = broker.request(208, {"consumerGroup": "cg_stats"}).body
    assert raw.startswith(b'{"consumeTps":0.0,"offsetTable":{{"brokerName":"broker-a","queueId":')
    cs = ConsumeStats.decode(raw)
    w = cs.offsetTable[MessageQueue("CA_Stats", "broker-a", 0)]
    assert (w.brokerOffset, w.consumerOffset) == (3, 2)
    rt = json.loads(broker.request(28).body)["table"]
    assert int(rt["msgPutTotalTodayNow"]) >= 3 and rt["brokerVersionDesc"].startswith("V5")
    # 10 / 60 / 600 s windows, each empty until that many one-second samples exist (StoreStatsService)
    assert len(rt["putTps"].split(" ")) == 3
    assert int(rt["earliestMessageTimeStamp"]) > 0 and not rt["commitLogDirCapacity"].startswith("Total : 0 B")


def test_topic_config_and_topic_consume_by_who(serve, broker):
    """What the 5.x mqadmin asks besides the stats: GET_TOPIC_CONFIG 351 (topicStatus and
    consumerProgress fail without it) and QUERY_TOPIC_CONSUME_BY_WHO 300 (topicList -c, queryMsgById)."""
    assert broker.request(17, {"topic": "CA_Cfg", "defaultTopic": "TBW102", "readQueueNums": "3",
                               "writeQueueNums": "3", "perm": "6", "topicFilterType": "SINGLE_TAG"}).code == 0
    tc = json.loads(broker.request(351, {"topic": "CA_Cfg", "lo": "true"}).body)
    assert (tc["topicName"], tc["readQueueNums"], tc["writeQueueNums"], tc["perm"]) == ("CA_Cfg", 3, 3, 6)
    assert "mappingDetail" not in tc  # no static-topic mapping: fastjson leaves the null out
    assert broker.request(351, {"topic": "CA_NoCfg"}).code == 17
    broker.request(310, send_ext("CA_Cfg", 0), b"x")
    broker.request(11, pull_ext("CA_Cfg", "cg_who_off"))
    assert broker.request(15, {"consumerGroup": "cg_who_off", "topic": "CA_Cfg", "queueId": "0",
                               "commitOffset": "1"}).code == 0
    assert broker.request(34, body=heartbeat_body("10.0.0.9@w", "cg_who_on", [sub_data("CA_Cfg")])).code == 0
    groups = json.loads(broker.request(300, {"topic": "CA_Cfg"}).body)["groupList"]
    assert sorted(groups) == ["cg_who_off", "cg_who_on"]
    assert json.loads(broker.request(300, {"topic": "CA_Nobody"}).body)["groupList"] == []
    rt = json.loads(broker.request(28).body)["table"]
    assert rt["brokerActive"] == "true"  # mqadmin clusterList's #ACTIVATED


def test_lock_and_unlock_batch(serve, broker):
    mq = [{"topic": "CA_Lock", "brokerName": "broker-a", "queueId": i} for i in range(3)]
    a = {"consumerGroup": "cg_lock", "clientId": "A", "mqSet": mq}
    got = LockBatchResponseBody.decode(broker.request(41, body=json.dumps(a).encode()).body).lockOKMQSet
    assert sorted(m.queueId for m in got) == [0, 1, 2]
    b = {"consumerGroup": "cg_lock", "clientId": "B", "mqSet": mq}
    assert LockBatchResponseBody.decode(broker.request(41, body=json.dumps(b).encode()).body).lockOKMQSet == []
    unlock = {"consumerGroup": "cg_lock", "clientId": "A", "mqSet": mq[:1]}
    assert broker.request(42, body=json.dumps(unlock).encode()).code == 0
    got = LockBatchResponseBody.decode(broker.request(41, body=json.dumps(b).encode()).body).lockOKMQSet
    assert [m.queueId for m in got] == [0]
    again = LockBatchResponseBody.decode(broker.request(41, body=json.dumps(a).encode()).body).lockOKMQSet
    assert sorted(m.queueId for m in again) == [1, 2]  # A keeps (refreshes) its own locks
    assert broker.request(41, body=b"{not json").code == 1


def test_every_member_is_notified_at_once_when_a_consumer_joins_or_leaves(serve, broker):
    """A push consumer rebalances when told (NOTIFY_CONSUMER_IDS_CHANGED), not on its 20 s timer:
    a join or a leave reaches every member's channel well within a second, and the consumer list
    asked right after already names the newcomer (two Java consumers split queues in ~3 s)."""
    subs = [sub_data("Split_Topic")]
    a, b, c = Wire(serve.broker), Wire(serve.broker), Wire(serve.broker)
    try:
        assert a.request(34, body=heartbeat_body("10.0.1.1@a", "cg_split", subs)).code == 0
        a.wait_incoming(40, timeout=2)  # its own join
        assert b.request(34, body=heartbeat_body("10.0.1.2@b", "cg_split", subs)).code == 0
        for w in (a, b):
            assert w.wait_incoming(40, timeout=1).ext_fields == {"consumerGroup": "cg_split"}
        assert sorted(ConsumerListBody.decode(b.request(38, {"consumerGroup": "cg_split"}).body)
                      .consumerIdList) == ["10.0.1.1@a", "10.0.1.2@b"]
        # a repeated heartbeat with nothing new changes nothing and tells nobody
        assert b.request(34, body=heartbeat_body("10.0.1.2@b", "cg_split", subs)).code == 0
        time.sleep(0.3)
        assert not [x for x in a.incoming + b.incoming if x.code == 40]
        t0 = time.time()
        assert c.request(34, body=heartbeat_body("10.0.1.3@c", "cg_split", subs)).code == 0
        for w in (a, b, c):
            w.wait_incoming(40, timeout=1)
        assert time.time() - t0 < 1
        c.close()
        for w in (a, b):
            w.wait_incoming(40, timeout=1)
        assert sorted(ConsumerListBody.decode(a.request(38, {"consumerGroup": "cg_split"}).body)
                      .consumerIdList) == ["10.0.1.1@a", "10.0.1.2@b"]
        # UNREGISTER_CLIENT (a consumer's shutdown) tells the one left
        assert b.request(35, {"clientID": "10.0.1.2@b", "consumerGroup": "cg_split"}).code == 0
        a.wait_incoming(40, timeout=1)
        # broadcasting groups are never notified (ConsumerManager.registerConsumer)
        bc = json.loads(heartbeat_body("10.0.1.1@a", "cg_bcast", subs))
        bc["consumerDataSet"][0]["messageModel"] = "BROADCASTING"
        assert a.request(34, body=json.dumps(bc).encode()).code == 0
        bc["clientID"] = "10.0.1.2@b"
        assert b.request(34, body=json.dumps(bc).encode()).code == 0
        time.sleep(0.3)
        assert not [x for x in a.incoming + b.incoming if x.code == 40]
    finally:
        for w in (a, b):
            w.close()


def test_oneway_offset_commits_apply_in_arrival_order_before_later_queries(serve, broker):
    """A rebalance hand-over: the old owner commits oneway, then anyone's QUERY_CONSUMER_OFFSET
    sent after it must see it (no reordering of a connection's requests, no deferred commit)."""
    q = {"consumerGroup": "cg_order", "topic": "CA_Order", "queueId": "0"}
    for _ in range(10):  # offsets 0..10 can be committed
        broker.request(310, send_ext("CA_Order", 0), b"x")
    broker.request(14, q)  # the query creates nothing, a pull creates the group:
    broker.request(11, pull_ext("CA_Order", "cg_order"))
    other = Wire(serve.broker)
    try:
        for i in range(1, 60):
            for v in ((i + 5) % 11, i % 11):  # two commits back to back, the last one wins
                broker.oneway(15, {**q, "commitOffset": str(v)})
            assert broker.request(14, q).ext_fields["offset"] == str(i % 11)
            assert other.request(14, q).ext_fields["offset"] == str(i % 11)
    finally:
        other.close()
