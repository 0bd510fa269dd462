"""The producer's wire behaviour against scripted brokers: retry counts, queue choice, encodings.

protocol.md §7.1: sync sends try 1 + retryTimesWhenSendFailed (2) times, moving to another broker,
only on network errors and the retry codes; async sends retry only on network errors; oneway once.
"""

from __future__ import annotations

import zlib

import pytest
from fakes import DROP, FakeCluster

from rmqtool.client import (
    BrokerError,
    ClientError,
    LocalTransactionState,
    Message,
    MessageQueue,
    Producer,
    SendStatus,
    TransactionProducer,
)
from rmqtool.client.batch import decode_messages
from rmqtool.errors import InvalidMessage, InvalidTopic
from rmqtool.layouts import properties as P
from rmqtool.layouts.javahash import java_string_hash
from rmqtool.layouts.message import MessageExt, encode_record
from rmqtool.layouts.msgid import decode_uniq_key
from rmqtool.remoting.codes import RequestCode, ResponseCode
from rmqtool.remoting.command import RemotingCommand


@pytest.fixture
def cluster():
    c = FakeCluster("broker-a", "broker-b").start()
    yield c
    c.stop()


@pytest.fixture
def producer(cluster):
    p = Producer("pg", cluster.namesrv_addr).start()
    yield p
    p.shutdown()


def sends(cluster):
    return {n: len(b.sends()) for n, b in cluster.brokers.items()}


def test_sync_send_ok_has_ids_and_java_header(cluster, producer):
    r = producer.send(Message("T", b"hello", tags="TagA", keys=["k1", "k2"]))
    assert r.status == SendStatus.SEND_OK
    (req,) = [s for b in cluster.brokers.values() for s in b.sends()]
    ext = req.ext_fields
    assert req.code == RequestCode.SEND_MESSAGE_V2
    assert (ext["a"], ext["b"], ext["c"], ext["d"], ext["f"], ext["k"], ext["m"]) == (
        "pg", "T", "TBW102", "4", "0", "false", "false")
    assert ext["n"] == r.message_queue.broker_name and int(ext["e"]) == r.message_queue.queue_id
    props = P.decode_properties(ext["i"])
    assert props["TAGS"] == "TagA" and props["KEYS"] == "k1 k2" and props["UNIQ_KEY"] == r.msg_id
    decode_uniq_key(r.msg_id)  # a well-formed MessageClientIDSetter id
    assert len(r.offset_msg_id) == 32


def test_retry_code_moves_to_the_other_broker(cluster, producer):
    cluster.brokers["broker-a"].script = [ResponseCode.SYSTEM_ERROR] * 5
    cluster.brokers["broker-b"].script = [ResponseCode.SYSTEM_ERROR] * 5
    with pytest.raises(ClientError, match=r"Send \[3\] times"):
        producer.send(Message("T", b"x"))
    assert sum(sends(cluster).values()) == 3
    # the tries alternate brokers: the retry avoids the broker that just failed
    names = [r.ext_fields["n"] for b in cluster.brokers.values() for r in b.sends()]
    assert sorted(names).count("broker-a") in (1, 2)


def test_retry_codes_are_retried_until_success(cluster, producer):
    for code in (ResponseCode.SYSTEM_ERROR, ResponseCode.TOPIC_NOT_EXIST, ResponseCode.SERVICE_NOT_AVAILABLE,
                 ResponseCode.NO_PERMISSION, ResponseCode.NO_BUYER_ID, ResponseCode.NOT_IN_CURRENT_UNIT):
        for b in cluster.brokers.values():
            b.requests.clear()
            b.script = [code]  # each broker fails once: a, b, then a again succeeds
        r = producer.send(Message("T", b"x"))
        assert r.status == SendStatus.SEND_OK
        assert sum(sends(cluster).values()) == 3


def test_a_broken_broker_is_avoided_on_the_retry(cluster, producer):
    cluster.brokers["broker-a"].script = [ResponseCode.SYSTEM_ERROR] * 100
    for _ in range(10):
        r = producer.send(Message("T", b"x"))
        assert r.message_queue.broker_name == "broker-b"
    assert len(cluster.brokers["broker-b"].sends()) == 10
    assert len(cluster.brokers["broker-a"].sends()) <= 10  # at most one failed try per send


@pytest.mark.parametrize("code", [ResponseCode.SYSTEM_BUSY, ResponseCode.MESSAGE_ILLEGAL, 26, 29])
def test_non_retry_codes_are_thrown_at_once(cluster, producer, code):
    for b in cluster.brokers.values():
        b.script = [code]
    with pytest.raises(BrokerError) as e:
        producer.send(Message("T", b"x"))
    assert e.value.code == code
    assert sum(sends(cluster).values()) == 1


def test_not_store_ok_is_returned_or_retried_elsewhere(cluster):
    for b in cluster.brokers.values():
        b.script = [ResponseCode.FLUSH_DISK_TIMEOUT] * 3
    with Producer("pg1", cluster.namesrv_addr) as p:
        r = p.send(Message("T", b"x"))
        assert r.status == SendStatus.FLUSH_DISK_TIMEOUT and sum(sends(cluster).values()) == 1
    with Producer("pg2", cluster.namesrv_addr, retry_another_broker_when_not_store_ok=True) as p:
        r = p.send(Message("T", b"x"))
        assert r.status == SendStatus.FLUSH_DISK_TIMEOUT and sum(sends(cluster).values()) == 4


def test_network_failure_is_retried_for_sync_and_async(cluster, producer):
    cluster.brokers["broker-a"].script = [DROP]
    cluster.brokers["broker-b"].script = [DROP]
    r = producer.send(Message("T", b"x"))
    assert r.status == SendStatus.SEND_OK
    assert sum(sends(cluster).values()) == 3
    for b in cluster.brokers.values():
        b.requests.clear()
        b.script = [DROP]
    r = producer.send_async(Message("T", b"x")).result(10)
    assert r.status == SendStatus.SEND_OK and sum(sends(cluster).values()) == 3


def test_async_send_does_not_retry_broker_errors(cluster, producer):
    for b in cluster.brokers.values():
        b.script = [ResponseCode.SYSTEM_ERROR]
    got = []
    fut = producer.send_async(Message("T", b"x"), lambda r, e: got.append((r, e)))
    with pytest.raises(BrokerError):
        fut.result(10)
    assert sum(sends(cluster).values()) == 1
    assert got and got[0][0] is None and isinstance(got[0][1], BrokerError)


def test_oneway_is_one_try_without_waiting(cluster, producer):
    producer.send_oneway(Message("T", b"x"))
    producer.send(Message("T", b"sync"))  # the oneway frame is ahead of it on the socket
    reqs = [r for b in cluster.brokers.values() for r in b.sends()]
    assert len(reqs) == 2 and any(r.is_oneway for r in reqs)


def test_sharding_key_always_picks_the_same_queue(cluster, producer):
    qs = producer.fetch_publish_message_queues("T")
    expected = qs[abs(java_string_hash("order-42")) % len(qs)]
    for _ in range(5):
        r = producer.send(Message("T", b"x"), sharding_key="order-42")
        assert r.message_queue == expected
    r = producer.send(Message("T", b"x"), queue=MessageQueue("T", "broker-b", 3))
    assert r.message_queue == MessageQueue("T", "broker-b", 3)


def test_bodies_of_4_kib_are_zlib_compressed_with_sysflag(cluster, producer):
    body = b"abc" * 2000
    producer.send(Message("T", body))
    (req,) = [r for b in cluster.brokers.values() for r in b.sends()]
    assert int(req.ext_fields["f"]) == 0x1 | 0x300
    assert zlib.decompress(req.body) == body
    for b in cluster.brokers.values():
        b.requests.clear()
    producer.send(Message("T", b"x" * 4095))
    (req,) = [r for b in cluster.brokers.values() for r in b.sends()]
    assert int(req.ext_fields["f"]) == 0 and len(req.body) == 4095


def test_batch_is_one_320_request_with_an_element_per_message(cluster, producer):
    msgs = [Message("T", f"m{i}".encode(), tags="TagB", keys=f"k{i}") for i in range(5)]
    r = producer.send_batch(msgs)
    (req,) = [r for b in cluster.brokers.values() for r in b.sends()]
    assert req.code == RequestCode.SEND_BATCH_MESSAGE and req.ext_fields["m"] == "true"
    elements = decode_messages(req.body)
    assert [e[1] for e in elements] == [f"m{i}".encode() for i in range(5)]
    assert [e[2]["KEYS"] for e in elements] == [f"k{i}" for i in range(5)]
    assert r.msg_id.split(",") == [e[2]["UNIQ_KEY"] for e in elements]


def test_batch_rules_are_checked_on_the_client(producer):
    with pytest.raises(InvalidMessage):
        producer.send_batch([Message("T", b"a", delay_level=3)])
    with pytest.raises(InvalidMessage):
        producer.send_batch([Message("T", b"a"), Message("U", b"b")])
    with pytest.raises(InvalidMessage):
        producer.send_batch([Message("T", b"a" * 3_000_000), Message("T", b"b" * 2_000_000)])


def test_validators_refuse_before_sending(cluster, producer):
    for topic in ("", "a b", "x" * 128, "SCHEDULE_TOPIC_XXXX"):
        with pytest.raises(InvalidTopic):
            producer.send(Message(topic, b"x"))
    with pytest.raises(InvalidMessage):
        producer.send(Message("T", b""))
    with pytest.raises(InvalidMessage):
        producer.send(Message("T", b"x" * (4 * 1024 * 1024 + 1)))
    assert sum(sends(cluster).values()) == 0


def test_unknown_topic_uses_the_tbw102_route(cluster, producer):
    r = producer.send(Message("NewTopic", b"x"))
    assert r.status == SendStatus.SEND_OK
    asked = [c.ext_fields["topic"] for c in cluster.ns_requests if c.code == RequestCode.GET_ROUTEINFO_BY_TOPIC]
    assert asked[:2] == ["NewTopic", "TBW102"]


def test_namespace_prefixes_topic_and_group(cluster):
    cluster.topics.add("ns1%T")
    with Producer("pg", cluster.namesrv_addr, namespace="ns1") as p:
        r = p.send(Message("T", b"x"))
    (req,) = [r for b in cluster.brokers.values() for r in b.sends()]
    assert (req.ext_fields["a"], req.ext_fields["b"]) == ("ns1%pg", "ns1%T")
    assert r.message_queue.topic == "T"


def test_no_name_server_is_a_clear_client_error():
    with Producer("pg", "127.0.0.1:1") as p, pytest.raises(ClientError, match="no name server reachable"):
        p.send(Message("T", b"x"))


class Listener:
    def __init__(self, state, check_state=LocalTransactionState.COMMIT_MESSAGE):
        self.state, self.check_state = state, check_state
        self.executed, self.checked = [], []

    def execute_local_transaction(self, msg, arg):
        self.executed.append((msg.properties[P.UNIQ_KEY], arg))
        return self.state

    def check_local_transaction(self, msg):
        self.checked.append(msg)
        return self.check_state


def _end_transactions(cluster):
    import time
    for _ in range(500):
        ends = [r for b in cluster.brokers.values() for r in b.requests if r.code == RequestCode.END_TRANSACTION]
        if ends:
            return ends
        time.sleep(0.02)
    return []


@pytest.mark.parametrize("state, flag", [(LocalTransactionState.COMMIT_MESSAGE, "8"),
                                         (LocalTransactionState.ROLLBACK_MESSAGE, "12"),
                                         (LocalTransactionState.UNKNOW, "0")])
def test_transaction_half_message_then_end_transaction(cluster, state, flag):
    lst = Listener(state)
    with TransactionProducer("txg", cluster.namesrv_addr, listener=lst) as p:
        r, got = p.send_message_in_transaction(Message("T", b"order"), arg=7)
        assert got == state and lst.executed == [(r.msg_id, 7)]
        (half,) = [s for b in cluster.brokers.values() for s in b.sends()]
        assert int(half.ext_fields["f"]) & 0x4
        props = P.decode_properties(half.ext_fields["i"])
        assert props["TRAN_MSG"] == "true" and props["PGROUP"] == "txg"
        (end,) = _end_transactions(cluster)
        assert end.is_oneway
        e = end.ext_fields
        assert (e["producerGroup"], e["commitOrRollback"], e["fromTransactionCheck"], e["msgId"]) == (
            "txg", flag, "false", r.msg_id)
        assert e["tranStateTableOffset"] == str(r.queue_offset)


def test_transaction_check_back_is_answered(cluster):
    lst = Listener(LocalTransactionState.UNKNOW, check_state=LocalTransactionState.COMMIT_MESSAGE)
    with TransactionProducer("txg", cluster.namesrv_addr, listener=lst) as p:
        p.send_message_in_transaction(Message("T", b"order"))
        assert _end_transactions(cluster)  # the oneway END (UNKNOW) of the send itself has arrived
        broker = next(b for b in cluster.brokers.values() if b.sends())
        for b in cluster.brokers.values():
            b.requests.clear()
        half = MessageExt("T", b"order", properties={"PGROUP": "txg", "UNIQ_KEY": "AB" * 16, "TRAN_MSG": "true"})
        check = RemotingCommand.request(RequestCode.CHECK_TRANSACTION_STATE, {
            "tranStateTableOffset": "5", "commitLogOffset": "1234", "msgId": "AB" * 16, "transactionId": "AB" * 16,
            "offsetMsgId": "7F00000100002A9F00000000000004D2"}, encode_record(half), oneway=True)
        conn = broker.conns[0]
        cluster.call(conn.oneway(check))
        (end,) = _end_transactions(cluster)
        e = end.ext_fields
        assert (e["commitOrRollback"], e["fromTransactionCheck"], e["commitLogOffset"], e["tranStateTableOffset"],
                e["msgId"], e["producerGroup"]) == ("8", "true", "1234", "5", "AB" * 16, "txg")
        assert lst.checked[0].body == b"order"


def test_send_back_failure_falls_back_to_a_resend_to_the_retry_topic(cluster):
    """formats.md §9: RETRY_TOPIC, ORIGIN_MESSAGE_ID, RECONSUME_TIME (j), MAX_RECONSUME_TIMES (l), DELAY 3+n."""
    from rmqtool.client import PushConsumer
    from rmqtool.layouts.net import Host

    for b in cluster.brokers.values():
        b.hook = lambda cmd: cmd.response(ResponseCode.SYSTEM_ERROR, remark="no") \
            if cmd.code == RequestCode.CONSUMER_SEND_MSG_BACK else None
    c = PushConsumer("cg", cluster.namesrv_addr, max_reconsume_times=5)
    c.instance.start()
    try:
        c.instance.run(c.instance.update_route("T"))
        failed = MessageExt("T", b"payload", properties={"UNIQ_KEY": "AA" * 16, "TAGS": "x", "TRAN_MSG": "true",
                                                          "MIN_OFFSET": "0", "MAX_OFFSET": "9"},
                            reconsume_times=2, commit_log_offset=777, store_host=Host("127.0.0.1", 1))
        assert c.instance.run(c.impl.send_message_back(failed, 0, "broker-a")) is True
        backs = [r for b in cluster.brokers.values() for r in b.requests if r.code == RequestCode.CONSUMER_SEND_MSG_BACK]
        assert backs[0].ext_fields["offset"] == "777" and backs[0].ext_fields["maxReconsumeTimes"] == "5"
        (resend,) = [r for b in cluster.brokers.values() for r in b.sends()]
        e = resend.ext_fields
        assert (e["a"], e["b"], e["j"], e["l"]) == ("CLIENT_INNER_PRODUCER", "%RETRY%cg", "3", "5")
        props = P.decode_properties(e["i"])
        assert props["RETRY_TOPIC"] == "T" and props["ORIGIN_MESSAGE_ID"] == "AA" * 16
        assert props["DELAY"] == "5" and props["TAGS"] == "x"
        assert "TRAN_MSG" not in props and "MIN_OFFSET" not in props and "RECONSUME_TIME" not in props
        assert resend.body == b"payload"
    finally:
        c.instance.shutdown()
