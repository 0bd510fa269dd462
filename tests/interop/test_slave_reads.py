"""Apache's Java client (5.3.3) reads every message from an rmqtool slave once its master is stopped.

The Java producer sends to the rmqtool master; the slave (learning its master from the name
server, replicating its CommitLog) has them all; the master is SIGKILLed, the name server drops
it, and a Java push consumer that knows only the name server consumes every message from the
slave (MQClientInstance.findBrokerAddressInSubscribe falls back to the slave; the slave answers
pulls with slaveReadEnable=true).
"""

from __future__ import annotations

import signal
import time

import pytest

from rmqtool.remoting import fastjson
from rmqtool.remoting.bodies import ClusterInfo
from rmqtool.remoting.codes import RequestCode
from tests.broker.conftest import Wire
from tests.cluster_helpers import start_master_and_slave

from .harness import require_java
from .java_client_helpers import client

pytestmark = pytest.mark.interop
TOPIC = "SlaveReadT"
COUNT = 40


def _wait(cond, timeout: float) -> bool:
    deadline = time.time() + timeout
    while time.time() < deadline:
        if cond():
            return True
        time.sleep(0.2)
    return False


def _topics(addr: str) -> set[str]:
    w = Wire(addr)
    try:
        body = w.request(RequestCode.GET_ALL_TOPIC_CONFIG).body
        return set((fastjson.loads(body) or {}).get("topicConfigTable") or {})
    finally:
        w.close()


def _max_offsets(addr: str, queues: int) -> list[int]:
    w = Wire(addr)
    try:
        return [int(w.request(RequestCode.GET_MAX_OFFSET, {"topic": TOPIC, "queueId": str(q)}).ext_fields.get(
            "offset", -1)) for q in range(queues)]
    finally:
        w.close()


def test_java_consumer_reads_every_message_from_the_slave_once_the_master_is_stopped(tmp_path):
    require_java()
    procs = []
    try:
        ns, m_proc, master, s_proc, slave = start_master_and_slave(tmp_path, procs, "broker-a", TOPIC, 4)
        sent = client(ns, tmp_path / "home", "produce", "--topic", TOPIC, "--count", str(COUNT))
        assert len(sent) == COUNT and all(s["status"] == "SEND_OK" for s in sent)
        # replicated, and the topic copied to the slave (SlaveSynchronize's first syncAll): a slave
        # without the topic answers the consumer's pulls TOPIC_NOT_EXIST
        assert _wait(lambda: _max_offsets(slave, 4) == _max_offsets(master, 4), 30), s_proc.stderr
        assert _wait(lambda: TOPIC in _topics(slave), 30), s_proc.stderr
        m_proc.stop(signal.SIGKILL)
        nsw = Wire(ns)
        try:
            def master_gone() -> bool:
                info = ClusterInfo.from_json_obj(fastjson.loads(nsw.request(RequestCode.GET_BROKER_CLUSTER_INFO).body))
                return info.brokerAddrTable["broker-a"].brokerAddrs == {1: slave}

            assert _wait(master_gone, 20)
        finally:
            nsw.close()
        # the route the consumer gets lists only the slave (the name server keeps the topic's queue
        # data when the slave re-registers, deleteTopicWithBrokerRegistration=false), so nothing is
        # asked of the dead address; the consumer waits up to 60 s for the messages, its JVM start
        # and first rebalance (1 s waitInterval) take seconds more on a loaded machine
        seen = client(ns, tmp_path / "home", "consume", "--topic", TOPIC, "--group", "slave_read_cg",
                      "--count", str(COUNT), timeout=180)
        assert {(m["queueId"], m["queueOffset"]) for m in seen} == {(s["queueId"], s["queueOffset"]) for s in sent}
        assert all(m["storeHost"] == master for m in seen)  # the master's records, byte for byte
    finally:
        for p in reversed(procs):
            p.stop()
