"""Retry and dead letters (CONSUMER_SEND_MSG_BACK and direct %RETRY% sends), and transactions:
half messages, commit, rollback, and the broker's check-back to the producer's channel."""

from __future__ import annotations

import time

from rmqtool.layouts.msgid import decode_offset_msg_id
from tests.broker.conftest import Wire, decode_records, heartbeat_body, props, pull_ext, send_ext


def _pull_all(w: Wire, topic: str, group: str, queue_id: int = 0, timeout: float = 10.0, want: int = 1):
    deadline = time.time() + timeout
    got = []
    while time.time() < deadline:
        r = w.request(11, pull_ext(topic, group, queue_id, offset=len(got)))
        if r.code == 0:
            got.extend(decode_records(r.body))
            if len(got) >= want:
                return got
        time.sleep(0.1)
    return got


def test_send_back_goes_to_retry_with_delay_then_dlq(serve, broker):
    assert broker.request(34, body=heartbeat_body("1.1.1.1@r", "cg_retry")).code == 0
    r = broker.request(310, send_ext("RT_Orders", 0, props(TAGS="t", UNIQ_KEY="EF" * 16)), b"failing")
    off = decode_offset_msg_id(r.ext_fields["msgId"]).commit_log_offset
    back = broker.request(36, {"offset": off, "group": "cg_retry", "delayLevel": 0, "originMsgId": "EF" * 16,
                               "originTopic": "RT_Orders", "maxReconsumeTimes": 2})
    assert back.code == 0, back.remark
    [retry] = _pull_all(broker, "%RETRY%cg_retry", "cg_retry")
    assert retry.body == b"failing" and retry.reconsume_times == 1
    assert retry.properties["RETRY_TOPIC"] == "RT_Orders" and retry.properties["ORIGIN_MESSAGE_ID"] == "EF" * 16
    assert retry.properties["DELAY"] == "3"  # level 3 + reconsumeTimes 0, delivered through SCHEDULE_TOPIC_XXXX
    sent = decode_records(broker.request(33, {"offset": off}).body)[0]
    assert retry.store_timestamp - sent.store_timestamp >= 900  # level 3 is 1 s in this broker.conf
    # the consumer fails it again, twice: the second time it is past max (2) and goes to the DLQ
    cur = retry
    for n in (2,):
        b = broker.request(36, {"offset": cur.commit_log_offset, "group": "cg_retry", "delayLevel": 0,
                                "maxReconsumeTimes": 2})
        assert b.code == 0
        cur = _pull_all(broker, "%RETRY%cg_retry", "cg_retry", want=2)[-1]
        assert cur.reconsume_times == n
    b = broker.request(36, {"offset": cur.commit_log_offset, "group": "cg_retry", "delayLevel": 0,
                            "maxReconsumeTimes": 2})
    assert b.code == 0
    [dead] = _pull_all(broker, "%DLQ%cg_retry", "cg_retry")
    assert dead.body == b"failing" and dead.reconsume_times == 3
    assert dead.properties["ORIGIN_MESSAGE_ID"] == "EF" * 16
    assert broker.request(36, {"offset": off, "group": "bad group!", "delayLevel": 0}).code in (1, 26)


def test_client_fallback_send_to_retry_topic_past_max_goes_to_dlq(serve, broker):
    broker.request(34, body=heartbeat_body("1.1.1.1@f", "cg_fallback"))
    p = props(RETRY_TOPIC="RT_F", ORIGIN_MESSAGE_ID="AA" * 16)
    r = broker.request(310, send_ext("%RETRY%cg_fallback", 0, p, group="CLIENT_INNER_PRODUCER", j=17, l=16),
                       b"too often", version=409)
    assert r.code == 0, r.remark
    [dead] = _pull_all(broker, "%DLQ%cg_fallback", "cg_fallback")
    assert dead.body == b"too often" and dead.reconsume_times == 17


def _half(broker: Wire, topic: str, body: bytes, group: str = "pg_tx"):
    p = props(TRAN_MSG="true", PGROUP=group, UNIQ_KEY=body.hex().upper().ljust(32, "0")[:32], TAGS="tx")
    r = broker.request(310, send_ext(topic, 1, p, group=group, f=4), body)
    assert r.code == 0, r.remark
    return r


def _end(broker: Wire, r, kind: int, group: str = "pg_tx", check: bool = False) -> None:
    broker.oneway(37, {"producerGroup": group, "tranStateTableOffset": r.ext_fields["queueOffset"],
                       "commitLogOffset": decode_offset_msg_id(r.ext_fields["msgId"]).commit_log_offset,
                       "commitOrRollback": kind, "msgId": "x", "fromTransactionCheck": str(check).lower()})


def test_transaction_commit_and_rollback(serve, broker):
    committed = _half(broker, "TX_Topic", b"commit me")
    rolled = _half(broker, "TX_Topic", b"roll me back")
    assert broker.request(11, pull_ext("TX_Topic", "cg_tx", 1)).code in (17, 19)  # nothing visible yet
    _end(broker, committed, 8)
    _end(broker, rolled, 12)
    [m] = _pull_all(broker, "TX_Topic", "cg_tx", 1)
    assert m.body == b"commit me" and m.transaction_type == 8 and m.queue_id == 1
    assert m.prepared_transaction_offset == decode_offset_msg_id(committed.ext_fields["msgId"]).commit_log_offset
    time.sleep(0.3)
    r = broker.request(11, pull_ext("TX_Topic", "cg_tx", 1, offset=1))
    assert r.code == 19  # the rolled-back message never appears
    ops = _pull_all(broker, "RMQ_SYS_TRANS_OP_HALF_TOPIC", "cg_tx_ops", 0, want=2)
    assert sorted(o.body for o in ops)[-2:] == sorted([f"{committed.ext_fields['queueOffset']},".encode(),
                                                      f"{rolled.ext_fields['queueOffset']},".encode()])
    assert all(o.tags == "d" for o in ops)
    wrong_group = _half(broker, "TX_Topic", b"wrong group")
    bad = broker.request(37, {"producerGroup": "someone_else", "tranStateTableOffset": wrong_group.ext_fields[
        "queueOffset"], "commitLogOffset": decode_offset_msg_id(wrong_group.ext_fields["msgId"]).commit_log_offset,
        "commitOrRollback": 8, "msgId": "x"})
    assert bad.code == 1 and "producer group" in bad.remark
    _end(broker, wrong_group, 12)


def _end_checked(producer: Wire, check, kind: int, group: str) -> None:
    """END_TRANSACTION answering a check: it names the renewed half message the check named."""
    producer.oneway(37, {"producerGroup": group, "tranStateTableOffset": check.ext_fields["tranStateTableOffset"],
                         "commitLogOffset": check.ext_fields["commitLogOffset"], "commitOrRollback": kind,
                         "msgId": check.ext_fields["msgId"], "fromTransactionCheck": "true"})


def test_unresolved_transaction_is_checked_back_on_the_producer_channel(serve):
    producer = Wire(serve.broker)
    try:
        assert producer.request(34, body=heartbeat_body("2.2.2.2@tx", producer="pg_check")).code == 0
        r = _half(producer, "TX_Check", b"ask me", group="pg_check")
        check = producer.wait_incoming(39, timeout=15)
        assert check.is_oneway
        # as the Java broker: the half message is written again before the check, which names the copy
        first_offset = decode_offset_msg_id(r.ext_fields["msgId"]).commit_log_offset
        assert int(check.ext_fields["commitLogOffset"]) > first_offset
        assert int(check.ext_fields["tranStateTableOffset"]) > int(r.ext_fields["queueOffset"])
        [m] = decode_records(check.body)
        assert (m.topic, m.queue_id, m.body) == ("TX_Check", 1, b"ask me")
        assert m.properties["TRANSACTION_CHECK_TIMES"] == "1"
        _end_checked(producer, check, 8, "pg_check")
        [got] = _pull_all(producer, "TX_Check", "cg_check", 1)
        assert got.body == b"ask me"
        producer.incoming.clear()
        time.sleep(2.0)
        assert not [c for c in producer.incoming if c.code == 39]  # resolved: no more checks
    finally:
        producer.close()


def test_transaction_checked_transaction_check_max_times_then_moved_aside(serve):
    """transactionCheckMax=3 here: three checks, counted in the stored copies, then TRANS_CHECK_MAX_TIME_TOPIC."""
    producer = Wire(serve.broker)
    try:
        assert producer.request(34, body=heartbeat_body("3.3.3.3@tx", producer="pg_never")).code == 0
        _half(producer, "TX_Never", b"never answered", group="pg_never")
        counts = []
        for _ in range(3):
            check = producer.wait_incoming(39, timeout=15)
            [m] = decode_records(check.body)
            counts.append(m.properties["TRANSACTION_CHECK_TIMES"])
        assert counts == ["1", "2", "3"]
        [aside] = _pull_all(producer, "TRANS_CHECK_MAX_TIME_TOPIC", "cg_aside", 0)
        assert aside.body == b"never answered" and aside.properties["TRANSACTION_CHECK_TIMES"] == "3"
        assert aside.properties["REAL_TOPIC"] == "TX_Never"
        time.sleep(1.5)
        assert not [c for c in producer.incoming if c.code == 39]  # no fourth check
    finally:
        producer.close()
