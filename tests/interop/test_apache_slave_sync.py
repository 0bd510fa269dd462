"""An Apache slave (5.3.3 BrokerController, brokerRole=SLAVE) of an rmqtool master, both registered with
rmqtool's name server: the name server tells the Java slave its master (RegisterBrokerResult's
masterAddr and haServerAddr) and Java's SlaveSynchronize copies our master's answers to
GET_ALL_TOPIC_CONFIG (on the VIP port), GET_ALL_CONSUMER_OFFSET, GET_ALL_SUBSCRIPTIONGROUP_CONFIG,
GET_ALL_DELAY_OFFSET and GET_ALL_MESSAGE_REQUEST_MODE into its own managers: they decode as Java's
wrappers.

(The CommitLog itself is not replicated here: the test JVM's HA service does not listen.)
"""

from __future__ import annotations

import pytest

from rmqtool.remoting import fastjson
from rmqtool.remoting.bodies import ClusterInfo
from rmqtool.remoting.codes import RequestCode
from tests.broker.conftest import create_topic, send_ext
from tests.cluster_helpers import master_conf, start_broker, start_namesrv
from tests.wire_helpers import request_once, wait_until

from .conftest import kill_apache, start_apache
from .harness import require_java

pytestmark = [pytest.mark.interop, pytest.mark.slow]
TOPIC = "FromRmqtoolMaster"
GROUP = "rmqtool_master_cg"


def test_apache_slave_copies_an_rmqtool_masters_metadata(tmp_path):
    require_java()
    ns_proc, ns = start_namesrv(tmp_path)
    m_proc = None
    apache = None
    try:
        m_proc, master = start_broker(tmp_path, "m", ns, master_conf("broker-a"))
        create_topic(master, TOPIC, 3)
        assert request_once(master, RequestCode.SEND_MESSAGE_V2, send_ext(TOPIC, 0), b"x").code == 0
        pull = {"consumerGroup": GROUP, "topic": TOPIC, "queueId": "0", "queueOffset": "0", "maxMsgNums": "1",
                "sysFlag": "4", "commitOffset": "0", "suspendTimeoutMillis": "0", "subscription": "*",
                "subVersion": "0", "expressionType": "TAG"}
        assert request_once(master, RequestCode.PULL_MESSAGE, pull).code == 0  # creates the group
        commit = {"consumerGroup": GROUP, "topic": TOPIC, "queueId": "0", "commitOffset": "1"}
        assert request_once(master, RequestCode.UPDATE_CONSUMER_OFFSET, commit).code == 0
        mode = fastjson.bean(consumerGroup=GROUP, mode="POP", popShareQueueNum=1, topic=TOPIC)
        assert request_once(master, RequestCode.SET_MESSAGE_REQUEST_MODE, body=fastjson.dumpb(mode)).code == 0
        apache = start_apache(tmp_path / "apache", f"namesrvAddr={ns}", "brokerName=broker-a",
                              "brokerRole=SLAVE", "brokerId=1")

        def listed() -> bool:
            body = request_once(ns, RequestCode.GET_BROKER_CLUSTER_INFO).body
            info = ClusterInfo.from_json_obj(fastjson.loads(body))
            return info.brokerAddrTable["broker-a"].brokerAddrs == {0: master, 1: apache.broker}

        assert wait_until(listed, 30, 0.5)

        def topic_copied() -> bool:
            r = request_once(apache.broker, RequestCode.GET_ALL_TOPIC_CONFIG)
            return r.code == 0 and TOPIC in fastjson.loads(r.body)["topicConfigTable"]

        # BrokerController sets lastSyncTimeMs when it is constructed and its task (every 3 s from
        # 10 s on) calls syncAll once 60 s have passed since: the first copy comes 60-63 s after
        # construction, which may be only a moment before the name server lists the slave
        assert wait_until(topic_copied, 100, 0.5), (
            tmp_path / "apache" / "apache.stderr").read_text(errors="replace")[-3000:]
        theirs = fastjson.loads(request_once(apache.broker, RequestCode.GET_ALL_TOPIC_CONFIG).body)
        ours = fastjson.loads(request_once(master, RequestCode.GET_ALL_TOPIC_CONFIG).body)
        assert theirs["topicConfigTable"][TOPIC]["writeQueueNums"] == 3
        # every topic of ours is there (Java's slave then bumps its own DataVersion once per topic
        # it deletes and re-adds, so the counters differ)
        assert set(ours["topicConfigTable"]) <= set(theirs["topicConfigTable"])

        def offset_copied() -> bool:
            r = request_once(apache.broker, RequestCode.QUERY_CONSUMER_OFFSET,
                             {"consumerGroup": GROUP, "topic": TOPIC, "queueId": "0"})
            return r.code == 0 and r.ext_fields.get("offset") == "1"

        assert wait_until(offset_copied, 10, 0.5)
        def group_copied() -> bool:
            body = request_once(apache.broker, RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG).body
            return GROUP in fastjson.loads(body)["subscriptionGroupTable"]

        assert wait_until(group_copied, 10, 0.5)
        delay = request_once(master, RequestCode.GET_ALL_DELAY_OFFSET)
        assert delay.code == 0
        copied = apache.store / "config" / "delayOffset.json"
        assert wait_until(copied.exists, 10, 0.5) and copied.read_bytes() == delay.body
        # syncMessageRequestMode: our GET_ALL_MESSAGE_REQUEST_MODE decodes as MessageRequestModeSerializeWrapper
        def modes(addr: str) -> dict:
            return fastjson.loads(request_once(addr, RequestCode.GET_ALL_MESSAGE_REQUEST_MODE).body)["messageRequestModeMap"]

        assert wait_until(lambda: TOPIC in modes(apache.broker), 10, 0.5)
        assert modes(apache.broker)[TOPIC][GROUP] == modes(master)[TOPIC][GROUP]
    finally:
        if apache is not None:
            kill_apache(apache)  # nothing reads its store afterwards
        if m_proc is not None:
            m_proc.stop()
        ns_proc.stop()
