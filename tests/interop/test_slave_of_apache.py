"""An rmqtool slave of an Apache master (5.3.3), both registered with rmqtool's name server.

The name server lists Apache's broker as master (0) and ours as its slave (1) in one group and
answers our slave's REGISTER_BROKER with the Apache master's addresses; our SlaveSynchronize then
copies from Java's answers: the topic table (GET_ALL_TOPIC_CONFIG on the VIP port), consumer offsets
(GET_ALL_CONSUMER_OFFSET), subscription groups (GET_ALL_SUBSCRIPTIONGROUP_CONFIG) and, where the
master has one, delayOffset.json (GET_ALL_DELAY_OFFSET), as a Java slave would.
"""

from __future__ import annotations

import pytest

from rmqtool.client import Message, Producer, PullConsumer
from rmqtool.remoting import fastjson
from rmqtool.remoting.bodies import ClusterInfo
from rmqtool.remoting.codes import RequestCode
from tests.broker.conftest import Wire, create_topic  # noqa: F401 (Wire: for requests on one held connection)
from tests.cluster_helpers import slave_conf, start_broker, start_namesrv
from tests.wire_helpers import request_once as _req
from tests.wire_helpers import wait_until as _wait

from .conftest import kill_apache, start_apache
from .harness import require_java

pytestmark = pytest.mark.interop
TOPIC = "FromApacheMaster"
GROUP = "apache_master_cg"


def test_rmqtool_slave_copies_an_apache_masters_metadata(tmp_path):
    require_java()
    ns_proc, ns = start_namesrv(tmp_path)
    apache = None
    slave_proc = None
    try:
        apache = start_apache(tmp_path / "apache", f"namesrvAddr={ns}", "brokerName=broker-x")
        assert _wait(lambda: "broker-x" in ClusterInfo.from_json_obj(fastjson.loads(
            _req(ns, RequestCode.GET_BROKER_CLUSTER_INFO).body)).brokerAddrTable, 30)
        create_topic(apache.broker, TOPIC, 2)
        with Producer("apache_master_pg", ns) as p:
            for i in range(4):
                p.send(Message(TOPIC, f"m{i}".encode()))
        # a group with committed offsets on the master
        pc = PullConsumer(GROUP, ns).start()
        try:
            for mq in pc.fetch_subscribe_message_queues(TOPIC):
                pc.update_consume_offset(mq, 1)
        finally:
            pc.shutdown()
        # the client's shutdown persists its offsets one way (as Java's persistAll): the master may
        # take the update a moment after another connection's query
        assert _wait(lambda: _req(apache.broker, RequestCode.QUERY_CONSUMER_OFFSET,
                                  {"consumerGroup": GROUP, "topic": TOPIC, "queueId": "0"}
                                  ).ext_fields.get("offset") == "1", 10)

        mode = fastjson.bean(consumerGroup=GROUP, mode="POP", popShareQueueNum=2, topic=TOPIC)
        r = Wire(apache.broker)
        try:  # mqadmin setConsumeMode: QueryAssignmentProcessor's table, which syncMessageRequestMode copies
            assert r.request(RequestCode.SET_MESSAGE_REQUEST_MODE, body=fastjson.dumpb(mode)).code == 0
        finally:
            r.close()

        slave_proc, slave = start_broker(tmp_path, "slave", ns, slave_conf("broker-x"))
        info = ClusterInfo.from_json_obj(fastjson.loads(_req(ns, RequestCode.GET_BROKER_CLUSTER_INFO).body))
        assert info.brokerAddrTable["broker-x"].brokerAddrs == {0: apache.broker, 1: slave}

        def copied() -> bool:  # topics first, subscription groups last in a syncAll
            r = _req(slave, RequestCode.GET_ALL_TOPIC_CONFIG)
            g = _req(slave, RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG)
            return (TOPIC in fastjson.loads(r.body)["topicConfigTable"]
                    and GROUP in fastjson.loads(g.body)["subscriptionGroupTable"])

        assert _wait(copied, 30), slave_proc.stderr
        ours = fastjson.loads(_req(slave, RequestCode.GET_ALL_TOPIC_CONFIG).body)
        theirs = fastjson.loads(_req(apache.broker, RequestCode.GET_ALL_TOPIC_CONFIG).body)
        assert set(ours["topicConfigTable"]) == set(theirs["topicConfigTable"])
        assert ours["topicConfigTable"][TOPIC]["readQueueNums"] == 2
        assert ours["dataVersion"]["counter"] == theirs["dataVersion"]["counter"]
        for q in (0, 1):
            r = _req(slave, RequestCode.QUERY_CONSUMER_OFFSET, {"consumerGroup": GROUP, "topic": TOPIC,
                                                               "queueId": str(q)})
            assert r.code == 0 and r.ext_fields["offset"] == "1", r
        groups = fastjson.loads(_req(slave, RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG).body)
        master_groups = fastjson.loads(_req(apache.broker, RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG).body)
        assert set(groups["subscriptionGroupTable"]) == set(master_groups["subscriptionGroupTable"])
        modes = fastjson.loads(_req(apache.broker, RequestCode.GET_ALL_MESSAGE_REQUEST_MODE).body)
        mode_file = tmp_path / "slave-store" / "config" / "messageRequestMode.json"
        assert _wait(mode_file.exists, 30)
        assert fastjson.loads(mode_file.read_bytes()) == modes and modes["messageRequestModeMap"][TOPIC][GROUP]["mode"] == "POP"
        # Java's answers to the timer tables (timerWheelEnable on both) are taken without a failure:
        # the checkpoint's read time is the master's (TimerCheckpoint.encode, 56 bytes, every 3 s)
        from rmqtool.store.timer.timercheck import TimerCheckpointValue

        def read_time() -> int:
            try:
                return TimerCheckpointValue.unpack((tmp_path / "slave-store" / "config" / "timercheck").read_bytes()
                                                   ).last_read_time_ms
            except OSError:
                return 0

        assert _wait(lambda: read_time() > 0, 30), slave_proc.stderr
        theirs = TimerCheckpointValue.unpack(_req(apache.broker, RequestCode.GET_TIMER_CHECK_POINT).body)
        assert 0 <= theirs.last_read_time_ms - read_time() <= 10_000
        assert "SyncTimer" not in slave_proc.stderr and "SyncMessageRequestMode" not in slave_proc.stderr, slave_proc.stderr
        delay = _req(apache.broker, RequestCode.GET_ALL_DELAY_OFFSET)
        if delay.code == 0:
            assert (tmp_path / "slave-store" / "config" / "delayOffset.json").read_bytes() == delay.body
    finally:
        if slave_proc is not None:
            slave_proc.stop()
        if apache is not None:
            kill_apache(apache)  # nothing reads its store afterwards
        ns_proc.stop()
