"""Two broker groups (a master and a slave each, separate processes) under a steady producer; one
master SIGKILLed: sends move to the other group, every acknowledged message stays consumable
(from the slave while the master is down, from the master once it is back), none is lost.
"""

from __future__ import annotations

import signal
import threading
import time

import pytest

from rmqtool.client import (
    CONSUME_FROM_FIRST_OFFSET,
    ClientConfig,
    Message,
    Producer,
    PushConsumer,
    SendStatus,
)
from rmqtool.remoting import fastjson
from rmqtool.remoting.codes import RequestCode
from tests.broker.conftest import Wire, create_topic
from tests.cluster_helpers import free_broker_port, master_conf, slave_conf, start_broker, start_namesrv
from tests.wire_helpers import wait_until

FAST = ClientConfig(poll_name_server_interval=1.0, rebalance_interval=1.0, persist_consumer_offset_interval=0.5,
                    heartbeat_broker_interval=1.0)
TOPIC = "FailoverT"
LAST_MOMENT = 5  # at most this many acknowledged by the ASYNC_MASTER may not be on its slave yet at the kill


def _has_topic(addr: str) -> bool:
    w = Wire(addr)
    try:
        r = w.request(RequestCode.GET_ALL_TOPIC_CONFIG)
        return r.code == 0 and TOPIC in fastjson.loads(r.body)["topicConfigTable"]
    finally:
        w.close()


class SteadyProducer(threading.Thread):
    """Sends one message after another, recording (time, body, broker) of each acknowledged one."""

    def __init__(self, namesrv: str) -> None:
        super().__init__(daemon=True)
        self.producer = Producer("failover-pg", namesrv, config=FAST, send_msg_timeout=2.0).start()
        self.acked: list[tuple[float, bytes, str]] = []
        self.failures = 0
        self.stop_flag = threading.Event()

    def run(self) -> None:
        i = 0
        while not self.stop_flag.is_set():
            body = f"m-{i}".encode()
            i += 1
            try:
                r = self.producer.send(Message(TOPIC, body))
            except Exception:  # noqa: BLE001 - counted: an unacknowledged send may be lost
                self.failures += 1
                continue
            if r.status == SendStatus.SEND_OK:
                self.acked.append((time.monotonic(), body, r.message_queue.broker_name))
            time.sleep(0.01)

    def finish(self) -> None:
        self.stop_flag.set()
        self.join(30)
        self.producer.shutdown()


@pytest.mark.slow
def test_master_sigkilled_under_load_loses_no_acknowledged_message(tmp_path):
    procs = {}
    try:
        procs["ns"], ns = start_namesrv(tmp_path)
        a_port = free_broker_port()
        procs["a0"], a_master = start_broker(tmp_path, "a0", ns, master_conf("broker-a", slaveReadEnable="true"),
                                             port=a_port)
        procs["b0"], b_master = start_broker(tmp_path, "b0", ns, master_conf("broker-b", slaveReadEnable="true"))
        for addr in (a_master, b_master):
            create_topic(addr, TOPIC, 4)
        procs["a1"], a_slave = start_broker(tmp_path, "a1", ns, slave_conf("broker-a"))
        procs["b1"], b_slave = start_broker(tmp_path, "b1", ns, slave_conf("broker-b"))
        # the slaves copied the topic from their masters (SlaveSynchronize) before the load starts
        assert wait_until(lambda: _has_topic(a_slave) and _has_topic(b_slave), 30)

        producer = SteadyProducer(ns)
        producer.start()
        assert wait_until(lambda: {b for _, _, b in producer.acked} == {"broker-a", "broker-b"}, 30)
        time.sleep(3.0)
        killed_at = time.monotonic()
        procs["a0"].stop(signal.SIGKILL)
        # sends go on, all to broker-b, within the client's fault-avoidance window
        assert wait_until(lambda: sum(t > killed_at + 1 for t, _, _ in producer.acked) >= 20, 20)
        # an answer broker-a wrote just before the signal can still be read just after it
        after = [(t, b) for t, _, b in producer.acked if t > killed_at + 0.5]
        assert all(b == "broker-b" for _, b in after)
        assert after and after[0][0] - killed_at < 5.0, "sends did not move to broker-b in time"
        time.sleep(1.0)
        producer.finish()
        acked = {body for _, body, _ in producer.acked}
        on_a = {body for _, body, b in producer.acked if b == "broker-a"}
        assert on_a and len(acked) > len(on_a)

        got: set[bytes] = set()
        lock = threading.Lock()

        def listener(msgs, ctx):
            with lock:
                got.update(m.body for m in msgs)

        consumer = PushConsumer("failover-cg", ns, consume_from_where=CONSUME_FROM_FIRST_OFFSET, config=FAST)
        consumer.subscribe(TOPIC).register_listener(listener).start()
        try:
            # broker-a's master is down: its messages come from its slave (all but those acknowledged
            # in the last moment before the kill, which the async slave may not have had yet)
            assert wait_until(lambda: len(got & on_a) >= len(on_a) - LAST_MOMENT and (acked - on_a) <= got,
                              60), (len(got & on_a), len(on_a), len((acked - on_a) - got))
            from_slave = len(got & on_a)
            procs["a0"], _ = start_broker(tmp_path, "a0-again", ns,
                                          master_conf("broker-a", slaveReadEnable="true"), port=a_port,
                                          store=tmp_path / "a0-store")
            assert wait_until(lambda: acked <= got, 60), \
                f"lost: {sorted(acked - got)[:10]} of {len(acked - got)}"
        finally:
            consumer.shutdown()
        assert from_slave >= len(on_a) - LAST_MOMENT > 0
    finally:
        for p in procs.values():
            p.stop()
