"""Mixed clusters: rmqtool's broker in Apache's name server, Apache's broker in rmqtool's.

`rmqtool serve --namesrv-addr` registers its broker with another name server as a Java broker
does (REGISTER_BROKER with the topic table, again when topics change, UNREGISTER_BROKER on
shutdown); a real Apache broker started with `namesrvAddr=` pointing at `rmqtool serve` does the
same the other way. In both directions a client that only knows the name server sends to and
pulls from the other process's broker, and the broker leaves the cluster when it stops.
"""

from __future__ import annotations

import re
import signal
import time
from collections.abc import Iterator
from concurrent.futures import Future

import pytest

from rmqtool.client import Message, Producer, PullConsumer
from rmqtool.remoting import fastjson
from rmqtool.remoting.bodies import ClusterInfo
from tests.broker.conftest import Wire, create_topic

from .conftest import start_apache, start_rmqtool_serve, stop_apache, stop_rmqtool_serve
from .harness import JARS_NOT_BUILT, java_classpath
from .side_by_side import side_by_side

pytestmark = [pytest.mark.interop, pytest.mark.timeout(300)]


def cluster(namesrv: str) -> ClusterInfo:
    w = Wire(namesrv)
    try:
        r = w.request(106)
        assert r.code == 0, r.remark
        return ClusterInfo.from_json_obj(fastjson.loads(r.body))
    finally:
        w.close()


def member_group(namesrv: str, ext: dict[str, str]) -> tuple[int, str | None, bytes]:
    """GET_BROKER_MEMBER_GROUP (901): the response code, remark and exact body bytes."""
    w = Wire(namesrv)
    try:
        r = w.request(901, ext)
        return r.code, r.remark, r.body
    finally:
        w.close()


def wait_for(cond, timeout: float, what: str) -> None:
    deadline = time.time() + timeout
    while time.time() < deadline:
        if cond():
            return
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


def routed(namesrv: str, topic: str) -> bool:
    w = Wire(namesrv)
    try:
        return w.request(105, {"topic": topic}).code == 0
    finally:
        w.close()


def round_trip(namesrv: str, topic: str, broker_name: str, n: int = 6) -> None:
    """Send `n` messages through `namesrv` only; all land on `broker_name` and pull back intact."""
    # the name server routes the topic once the broker registered it (rmqtool: at once; Java: at once too)
    wait_for(lambda: routed(namesrv, topic), 40, f"a route for {topic}")
    # a JVM broker's first sends on a loaded 2-core machine can take over the default 3 s budget
    # (CI once saw one): this checks routing and storage, not latency
    with Producer(f"pg_{topic}", namesrv, send_msg_timeout=15.0) as p:
        assert {q.broker_name for q in p.fetch_publish_message_queues(topic)} == {broker_name}
        sent = [p.send(Message(topic, f"m{i}".encode(), tags="mix", keys=[f"k{i}"])) for i in range(n)]
    assert all(r.status.name == "SEND_OK" for r in sent)
    assert {r.message_queue.broker_name for r in sent} == {broker_name}
    got = []
    c = PullConsumer(f"cg_{topic}", namesrv).start()
    try:
        # a Java broker dispatches to its ConsumeQueues a moment after it acknowledged the send
        # (ReputMessageService): pull each queue on from where it stopped until all are back
        offsets = {mq: 0 for mq in c.fetch_subscribe_message_queues(topic)}
        deadline = time.time() + 30
        while len(got) < n and time.time() < deadline:
            for mq, offset in offsets.items():
                r = c.pull(mq, "*", offset, 32, block=True, timeout=1)
                got += [m.body for m in r.messages]
                offsets[mq] = max(offset, r.next_begin_offset)
    finally:
        c.shutdown()
    assert sorted(got) == sorted(f"m{i}".encode() for i in range(n))


@pytest.fixture(scope="module")
def java_built():
    if java_classpath() is None:
        pytest.skip(JARS_NOT_BUILT)


def test_rmqtool_broker_joins_an_apache_name_server(java_built, apache_broker, apache_in_ours, tmp_path):
    conf = tmp_path / "mix.conf"
    conf.write_text("brokerName=broker-rmq\n")
    mine = start_rmqtool_serve(tmp_path / "rmq", "-c", str(conf), "--namesrv-addr", apache_broker.namesrv)
    try:
        wait_for(lambda: "broker-rmq" in cluster(apache_broker.namesrv).brokerAddrTable, 30,
                 "Apache's name server to list broker-rmq")
        info = cluster(apache_broker.namesrv)
        assert info.brokerAddrTable["broker-rmq"].brokerAddrs == {0: mine.broker}
        assert "broker-rmq" in info.clusterAddrTable["DefaultCluster"]
        # both name servers know broker-rmq: byte for byte the same member groups, known or not, and
        # for headers lacking the @CFNotNull fields (Java's decoder lets them through as nulls)
        for ext in ({"clusterName": "DefaultCluster", "brokerName": "broker-rmq"},
                    {"clusterName": "Nowhere", "brokerName": "nobody"}, {"clusterName": "DefaultCluster"}, {}):
            theirs = member_group(apache_broker.namesrv, ext)
            assert theirs[0] == 0 and member_group(mine.namesrv, ext) == theirs, ext
        create_topic(mine.broker, "MixOnRmq")
        round_trip(apache_broker.namesrv, "MixOnRmq", "broker-rmq")
    finally:
        assert stop_rmqtool_serve(mine) == 0
    assert "broker-rmq" not in cluster(apache_broker.namesrv).brokerAddrTable  # UNREGISTER_BROKER


def apache_broker_joins_the_rmqtool_name_server(tmp_path) -> None:
    # A serve of its own, logging at INFO: its stderr then names any request it did not support.
    ours = start_rmqtool_serve(tmp_path / "rmq", "--log-level", "INFO")
    try:
        apache_broker_in_rmqtool_name_server(ours, tmp_path)
    finally:
        assert stop_rmqtool_serve(ours) == 0
    log = (ours.home / "serve.stderr").read_text(errors="replace")
    assert "not supported" not in log and "Traceback" not in log, log[-2000:]


def apache_broker_in_rmqtool_name_server(ours, tmp_path) -> None:  # type: ignore[no-untyped-def]
    # forceRegister=false: every registerNameServerPeriod (10 s, the least Java allows) the broker
    # asks QUERY_DATA_VERSION and registers again only if the name server says its topics changed
    theirs = start_apache(tmp_path / "apache", f"namesrvAddr={ours.namesrv}", "brokerName=broker-apache",
                          "forceRegister=false", "registerNameServerPeriod=10000")
    try:
        assert theirs.namesrv == ours.namesrv
        wait_for(lambda: "broker-apache" in cluster(ours.namesrv).brokerAddrTable, 30,
                 "rmqtool's name server to list broker-apache")
        info = cluster(ours.namesrv)
        assert info.brokerAddrTable["broker-apache"].brokerAddrs == {0: theirs.broker}
        create_topic(theirs.broker, "MixOnApache")
        round_trip(ours.namesrv, "MixOnApache", "broker-apache")
        # BrokerOuterAPI.needRegister logs each answer; ours: unchanged, with the same DataVersion
        broker_log = theirs.home / "home" / "logs" / "rocketmqlogs" / "broker.log"
        answered = re.compile(rf"Query data version from name server {re.escape(ours.namesrv)} OK, changed false, "
                              r"broker DataVersion\[(.*?)\], name server DataVersion\[\1\]")
        wait_for(lambda: broker_log.is_file() and answered.search(broker_log.read_text(errors="replace")), 30,
                 "the Apache broker's QUERY_DATA_VERSION to find its topics registered")
    finally:
        stop_apache(theirs)
    wait_for(lambda: "broker-apache" not in cluster(ours.namesrv).brokerAddrTable, 20,
             "the Apache broker's UNREGISTER_BROKER")


def acting_master_apache_broker_expires_after_its_10s_heartbeat_timeout(tmp_path) -> None:
    """enableSlaveActingMaster: the broker registers with heartbeatTimeoutMillis=10000 and then says
    QUERY_DATA_VERSION every second. Heartbeating, it outlives 10 s; frozen (channel still open,
    so no channel-close drop), our name server expires it after 10 s + one 5 s scan, not 120 s."""
    ours = start_rmqtool_serve(tmp_path / "rmq")
    try:
        theirs = start_apache(tmp_path / "apache", f"namesrvAddr={ours.namesrv}", "brokerName=broker-act",
                              "enableSlaveActingMaster=true")
        try:
            wait_for(lambda: "broker-act" in cluster(ours.namesrv).brokerAddrTable, 30, "broker-act listed")
            time.sleep(16)
            assert "broker-act" in cluster(ours.namesrv).brokerAddrTable  # kept alive by its heartbeats
            theirs.proc.send_signal(signal.SIGSTOP)
            frozen = time.time()
            wait_for(lambda: "broker-act" not in cluster(ours.namesrv).brokerAddrTable, 25, "broker-act expired")
            assert time.time() - frozen >= 9  # its own 10 s, counted from its last heartbeat
        finally:
            theirs.proc.send_signal(signal.SIGCONT)
            theirs.proc.kill()
            theirs.proc.wait()
    finally:
        assert stop_rmqtool_serve(ours) == 0


@pytest.fixture(scope="module")
def apache_in_ours(java_built, tmp_path_factory) -> Iterator[dict[str, Future]]:
    """The two Apache-broker-in-our-name-server scenarios, started in the background side by side
    (side_by_side) when the module's first test starts, each with its own serve and Apache broker:
    each mostly waits (a 10 s registration period, a 16 s heartbeat stretch and the 10 s expiry),
    so they overlap each other and the first test instead of running one after the other. Each
    test re-raises its own scenario's failure (Future.result)."""
    with side_by_side(tmp_path_factory, {
            "joins": apache_broker_joins_the_rmqtool_name_server,
            "expires": acting_master_apache_broker_expires_after_its_10s_heartbeat_timeout}) as f:
        yield f


def test_apache_broker_joins_the_rmqtool_name_server(apache_in_ours):
    apache_in_ours["joins"].result()


def test_acting_master_apache_broker_expires_after_its_10s_heartbeat_timeout(apache_in_ours):
    apache_in_ours["expires"].result()
