"""Masters and slaves as separate processes: `serve --namesrv-only` and `--broker-only`.

A slave registers with brokerId 1, learns its master from the name server's answer, copies the
master's topics, offsets and subscription groups (SlaveSynchronize), refuses sends, and answers
pulls with the suggestWhichBrokerId of PullMessageProcessor; mqadmin's haStatus code (907) and the
runtime info's brokerActive tell master from slave.
"""

from __future__ import annotations

import re
import time

import pytest

from rmqtool.remoting import fastjson
from rmqtool.remoting.bodies import ClusterInfo, KVTable, TopicRouteData
from rmqtool.remoting.bodies_ha import HARuntimeInfo
from rmqtool.remoting.codes import RequestCode, ResponseCode
from tests.broker.conftest import Wire, create_topic, props, send_ext
from tests.cluster_helpers import Proc, master_conf, slave_conf, start_broker, start_namesrv


def _wait(cond, timeout: float = 15.0) -> bool:
    deadline = time.time() + timeout
    while time.time() < deadline:
        if cond():
            return True
        time.sleep(0.1)
    return False


def _cluster(ns: Wire) -> ClusterInfo:
    r = ns.request(RequestCode.GET_BROKER_CLUSTER_INFO)
    assert r.code == 0
    return ClusterInfo.from_json_obj(fastjson.loads(r.body))


def _pull(w: Wire, topic: str, queue_id: int = 0, offset: int = 0, group: str = "cg"):
    return w.request(RequestCode.PULL_MESSAGE, {
        "consumerGroup": group, "topic": topic, "queueId": str(queue_id), "queueOffset": str(offset),
        "maxMsgNums": "32", "sysFlag": "4", "commitOffset": "0", "suspendTimeoutMillis": "0",
        "subscription": "*", "subVersion": "0", "expressionType": "TAG"})


@pytest.fixture(scope="module")
def group(tmp_path_factory):
    """A name server, master broker-a with a topic, a message and a committed offset, then its slave."""
    tmp = tmp_path_factory.mktemp("cluster")
    procs = []
    try:
        ns_proc, ns = start_namesrv(tmp)
        procs.append(ns_proc)
        m_proc, master = start_broker(tmp, "a-master", ns, master_conf("broker-a", slaveReadEnable="true"))
        procs.append(m_proc)
        create_topic(master, "ClusterT", 2)
        mw = Wire(master)
        r = mw.request(RequestCode.SEND_MESSAGE_V2, send_ext("ClusterT", 0), b"hello")
        assert r.code == 0, r.remark
        assert _pull(mw, "ClusterT", 0).code == 0  # the group "cg" is auto-created on the master
        r = mw.request(RequestCode.UPDATE_CONSUMER_OFFSET, {"consumerGroup": "cg", "topic": "ClusterT",
                                                           "queueId": "0", "commitOffset": "1"})
        assert r.code == 0, r.remark  # a commit needs the group to exist, as in Java 5.x
        body = fastjson.dumpb(fastjson.bean(consumerGroup="pop_cg", mode="POP", popShareQueueNum=1, topic="ClusterT"))
        assert mw.request(RequestCode.SET_MESSAGE_REQUEST_MODE, body=body).code == 0  # mqadmin setConsumeMode
        r = mw.request(RequestCode.SEND_MESSAGE_V2, send_ext("ClusterT", 1, props(TIMER_DELAY_SEC="3600")), b"later")
        assert r.code == 0, r.remark  # a timer message waits an hour: the master's timer metrics count it
        mw.close()
        nsw = Wire(ns)
        assert _wait(lambda: "broker-a" in _cluster(nsw).brokerAddrTable)
        s_proc, slave = start_broker(tmp, "a-slave", ns, slave_conf("broker-a"))
        procs.append(s_proc)
        yield {"ns": nsw, "ns_addr": ns, "master": master, "slave": slave, "slave_proc": s_proc, "tmp": tmp}
        nsw.close()
    finally:
        for p in reversed(procs):
            p.stop()


def test_route_and_cluster_list_master_and_slave(group):
    ns = group["ns"]
    assert _wait(lambda: _cluster(ns).brokerAddrTable["broker-a"].brokerAddrs == {0: group["master"],
                                                                                  1: group["slave"]})
    r = ns.request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "ClusterT"})
    route = TopicRouteData.decode(r.body)
    assert [b.brokerAddrs for b in route.brokerDatas] == [{0: group["master"], 1: group["slave"]}]
    assert [(q.brokerName, q.readQueueNums) for q in route.queueDatas] == [("broker-a", 2)]


def test_slave_copies_topics_offsets_and_groups_from_master(group):
    sw = Wire(group["slave"])
    try:
        def has_topic_and_group() -> bool:  # the last table a syncAll copies: the subscription groups
            r = sw.request(RequestCode.GET_ALL_TOPIC_CONFIG)
            g = sw.request(RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG)
            return (r.code == 0 and "ClusterT" in fastjson.loads(r.body)["topicConfigTable"]
                    and "cg" in fastjson.loads(g.body)["subscriptionGroupTable"])

        assert _wait(has_topic_and_group, 20), group["slave_proc"].stderr
        r = sw.request(RequestCode.QUERY_CONSUMER_OFFSET, {"consumerGroup": "cg", "topic": "ClusterT",
                                                           "queueId": "0"})
        assert r.code == 0 and r.ext_fields["offset"] == "1"
        r = sw.request(RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG)
        assert "cg" in fastjson.loads(r.body)["subscriptionGroupTable"]
    finally:
        sw.close()


def test_slave_refuses_sends_as_java(group):
    sw = Wire(group["slave"])
    try:
        r = sw.request(RequestCode.SEND_MESSAGE_V2, send_ext("ClusterT", 0), b"to the slave")
        assert r.code == ResponseCode.SERVICE_NOT_AVAILABLE
        assert "messages are put to the slave" in r.remark
        # nothing was created by the refused send
        r = sw.request(RequestCode.SEND_MESSAGE_V2, send_ext("NewOnSlave", 0), b"x")
        assert r.code == ResponseCode.SERVICE_NOT_AVAILABLE
        r = sw.request(RequestCode.GET_ALL_TOPIC_CONFIG)
        assert "NewOnSlave" not in fastjson.loads(r.body)["topicConfigTable"]
    finally:
        sw.close()


def test_slave_not_lagging_redirects_pulls_to_master(group):
    sw = Wire(group["slave"])
    mw = Wire(group["master"])
    try:
        assert _wait(lambda: sw.request(RequestCode.GET_ALL_TOPIC_CONFIG).body.find(b"ClusterT") >= 0, 20)
        r = _pull(sw, "ClusterT", 1)
        # nothing there and not lagging: back to the master at once
        assert r.code == ResponseCode.PULL_RETRY_IMMEDIATELY
        assert r.ext_fields["suggestWhichBrokerId"] == "0"
        r = _pull(mw, "ClusterT", 0)
        assert r.code == ResponseCode.SUCCESS  # in memory: the group's brokerId, the master
        assert r.ext_fields["suggestWhichBrokerId"] == "0"
    finally:
        sw.close()
        mw.close()


def test_ha_status_and_runtime_info_tell_master_from_slave(group):
    mw, sw = Wire(group["master"]), Wire(group["slave"])
    try:
        m = HARuntimeInfo.from_json_obj(fastjson.loads(mw.request(RequestCode.GET_BROKER_HA_STATUS).body))
        assert m.master and m.masterCommitLogMaxOffset > 0
        mhost, mport = group["master"].rsplit(":", 1)

        def slave_info() -> HARuntimeInfo:
            return HARuntimeInfo.from_json_obj(fastjson.loads(sw.request(RequestCode.GET_BROKER_HA_STATUS).body))

        # the HA address learned from the name server: the master's brokerIP2 and listenPort + 1
        assert _wait(lambda: slave_info().haClientRuntimeInfo.masterAddr == f"{mhost}:{int(mport) + 1}")
        assert not slave_info().master

        def active(w: Wire) -> str:
            return KVTable(fastjson.loads(w.request(RequestCode.GET_BROKER_RUNTIME_INFO).body)["table"]).table[
                "brokerActive"]

        assert active(mw) == "true" and active(sw) == "false"
    finally:
        mw.close()
        sw.close()


def test_slave_without_slave_read_enable_rejects_pulls(group):
    tmp = group["tmp"]
    p, addr = start_broker(tmp, "a-slave2", group["ns_addr"], slave_conf("broker-a", 2, slaveReadEnable="false"))
    try:
        w = Wire(addr)
        r = _pull(w, "ClusterT", 0)
        assert r.code == ResponseCode.SYSTEM_BUSY
        assert r.remark == "[REJECTREQUEST]system busy, start flow control for a while"
        w.close()
    finally:
        p.stop()


def test_bad_roles_are_refused_before_any_port_opens(tmp_path):
    conf = tmp_path / "bad.conf"
    conf.write_text("brokerRole=SLAVE\nbrokerId=0\n")
    with pytest.raises(RuntimeError, match="Slave's brokerId must be > 0"):
        Proc(["--broker-only", "--store", str(tmp_path / "s"), "-c", str(conf), "--broker-port", "0"],
             tmp_path / "bad.stderr", re.compile("never"))
    conf.write_text("brokerRole=LEADER\n")
    with pytest.raises(RuntimeError, match="brokerRole"):
        Proc(["--broker-only", "--store", str(tmp_path / "s"), "-c", str(conf), "--broker-port", "0"],
             tmp_path / "bad.stderr", re.compile("never"))


def test_slave_follows_the_ha_address_the_name_server_gave(group):
    """No haMasterAddress: the REGISTER_BROKER answer's haServerAddr starts replication, and the
    slave serves the master's message itself (not lagging: suggesting the master)."""
    sw = Wire(group["slave"])
    try:
        def replicated() -> bool:
            r = sw.request(RequestCode.GET_MAX_OFFSET, {"topic": "ClusterT", "queueId": "0"})
            return r.code == 0 and r.ext_fields.get("offset") == "1"

        assert _wait(replicated, 20), group["slave_proc"].stderr
        r = _pull(sw, "ClusterT", 0)
        assert r.code == ResponseCode.SUCCESS and b"hello" in r.body
        assert r.ext_fields["suggestWhichBrokerId"] == "0"
    finally:
        sw.close()


def test_master_suggests_the_slave_when_the_data_is_out_of_memory(group):
    """accessMessageInMemoryMaxRatio=0: any data behind the CommitLog's end counts as not in
    memory, so the master suggests whichBrokerWhenConsumeSlowly (1) as PullMessageProcessor does."""
    p, addr = start_broker(group["tmp"], "b-master", group["ns_addr"],
                           master_conf("broker-b", slaveReadEnable="true", accessMessageInMemoryMaxRatio="0"))
    try:
        create_topic(addr, "SlowT", 1)
        w = Wire(addr)
        for body in (b"one", b"two"):
            assert w.request(RequestCode.SEND_MESSAGE_V2, send_ext("SlowT", 0), body).code == 0
        r = _pull(w, "SlowT", 0)
        assert r.code == ResponseCode.SUCCESS
        assert r.ext_fields["suggestWhichBrokerId"] == "1"
        w.close()
    finally:
        p.stop()


def test_slave_refuses_send_back_and_end_transaction_as_java(group):
    sw = Wire(group["slave"])
    try:
        r = sw.request(RequestCode.CONSUMER_SEND_MSG_BACK, {"offset": "0", "group": "cg", "delayLevel": "0",
                                                            "originMsgId": "X", "originTopic": "ClusterT"})
        assert r.code == ResponseCode.SYSTEM_ERROR and r.remark == "no master available along with 127.0.0.1"
        r = sw.request(RequestCode.END_TRANSACTION, {"producerGroup": "pg", "tranStateTableOffset": "0",
                                                     "commitLogOffset": "0", "commitOrRollback": "8",
                                                     "fromTransactionCheck": "false", "msgId": "X"})
        assert r.code == ResponseCode.SLAVE_NOT_AVAILABLE
    finally:
        sw.close()


def test_lagging_slave_keeps_the_reader_and_suggests_which_broker_when_consume_slowly(group):
    """A slave whose data is out of memory (accessMessageInMemoryMaxRatio=0) answers what it has
    and suggests whichBrokerWhenConsumeSlowly (1) instead of sending the reader to the master."""
    p, addr = start_broker(group["tmp"], "a-slave3", group["ns_addr"],
                           slave_conf("broker-a", 3, accessMessageInMemoryMaxRatio="0"))
    w = Wire(addr)
    try:
        def replicated_and_synced() -> bool:
            r = w.request(RequestCode.GET_MAX_OFFSET, {"topic": "ClusterT", "queueId": "0"})
            return (r.code == 0 and r.ext_fields.get("offset") == "1"
                    and b"ClusterT" in w.request(RequestCode.GET_ALL_TOPIC_CONFIG).body)

        assert _wait(replicated_and_synced, 20), p.stderr
        r = _pull(w, "ClusterT", 0)
        assert r.code == ResponseCode.SUCCESS and b"hello" in r.body
        assert r.ext_fields["suggestWhichBrokerId"] == "1"
    finally:
        w.close()
        p.stop()


def test_namesrv_only_and_broker_only_exclude_each_other(tmp_path):
    from typer.testing import CliRunner

    from rmqtool.cli.main import app

    r = CliRunner().invoke(app, ["serve", "--namesrv-only", "--broker-only", "--store", str(tmp_path)])
    assert r.exit_code == 2
    assert "exclude each other" in r.output


def test_master_answers_the_timer_tables_a_java_slave_follows(group):
    mw, sw = Wire(group["master"]), Wire(group["slave"])
    try:
        r = mw.request(RequestCode.GET_TIMER_CHECK_POINT)
        assert r.code == 0 and len(r.body) == 56  # TimerCheckpoint.encode
        r = mw.request(RequestCode.GET_TIMER_METRICS)
        assert r.code == 0 and set(fastjson.loads(r.body)) == {"dataVersion", "timingCount"}
        # a slave runs no timer store (it writes the CommitLog): Java's answer without one
        r = sw.request(RequestCode.GET_TIMER_CHECK_POINT)
        assert r.code == ResponseCode.SYSTEM_ERROR and r.remark == "The checkpoint is null"
    finally:
        mw.close()
        sw.close()


def test_slave_copies_message_request_modes_and_timer_tables(group):
    """SlaveSynchronize 5.3.3 beyond the four tables: syncMessageRequestMode (401/402 JSON into
    config/messageRequestMode.json), syncTimerMetrics and, every 3 s, syncTimerCheckPoint."""
    from rmqtool.store.timer.timercheck import TimerCheckpointValue

    config = group["tmp"] / "a-slave-store" / "config"
    sw, mw = Wire(group["slave"]), Wire(group["master"])
    try:
        def modes() -> dict:
            try:
                return fastjson.loads((config / "messageRequestMode.json").read_bytes())["messageRequestModeMap"]
            except (OSError, ValueError, KeyError):
                return {}

        assert _wait(lambda: "ClusterT" in modes(), 20), group["slave_proc"].stderr
        assert modes()["ClusterT"]["pop_cg"] == {"consumerGroup": "pop_cg", "mode": "POP", "popShareQueueNum": 1,
                                                 "topic": "ClusterT"}
        r = sw.request(RequestCode.GET_ALL_MESSAGE_REQUEST_MODE)  # what the slave answers from now on
        assert fastjson.loads(r.body)["messageRequestModeMap"] == modes()

        master_metrics = fastjson.loads(mw.request(RequestCode.GET_TIMER_METRICS).body)
        assert master_metrics["timingCount"]["ClusterT"]["count"] == 1

        def metrics() -> dict:
            try:
                return fastjson.loads((config / "timermetrics").read_bytes())
            except (OSError, ValueError):
                return {}

        assert _wait(lambda: metrics().get("dataVersion") == master_metrics["dataVersion"], 20)
        assert metrics()["timingCount"] == master_metrics["timingCount"]

        def checkpoints() -> tuple[TimerCheckpointValue, TimerCheckpointValue]:
            theirs = TimerCheckpointValue.unpack(mw.request(RequestCode.GET_TIMER_CHECK_POINT).body)
            ours = TimerCheckpointValue.unpack((config / "timercheck").read_bytes())
            return ours, theirs

        def check_point_copied() -> bool:
            ours, theirs = checkpoints()
            return (ours.master_timer_queue_offset == theirs.master_timer_queue_offset > 0
                    and 0 < theirs.last_read_time_ms - ours.last_read_time_ms + 1 <= 10_000)

        assert _wait(check_point_copied, 20), checkpoints()
    finally:
        sw.close()
        mw.close()


def test_namesrv_only_serves_routes_alone_and_stops_cleanly(tmp_path):
    p, ns = start_namesrv(tmp_path)
    try:
        w = Wire(ns)
        assert w.request(RequestCode.GET_BROKER_CLUSTER_INFO).code == 0
        r = w.request(RequestCode.SEND_MESSAGE_V2, send_ext("T", 0), b"x")  # no broker in this process
        assert r.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED
        w.close()
    finally:
        assert p.stop() == 0
    lines = [line for line in p.stderr.splitlines() if line.strip()]
    assert lines == [f"rmqtool serve: name server {ns}", "rmqtool serve: stopped"], lines
