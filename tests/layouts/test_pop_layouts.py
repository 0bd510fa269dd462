"""Revive-log bodies and receipt handles against what Apache's broker 5.3.3 wrote and answered.

The JSON strings below are bodies of records an Apache 5.3.3 broker stored on
rmq_sys_REVIVE_LOG_DefaultCluster (through rmq_sys_wheel_timer) for a pop of three messages,
a one-message pop, an ack, a ChangeInvisibleTime (new checkpoint + ack of the old offset) and a
BATCH_ACK_MESSAGE.
"""

from __future__ import annotations

import base64
import json

import pytest

from rmqtool.layouts.pop import (
    AckMsg,
    BatchAck,
    ExtraInfoError,
    PopCheckPoint,
    bitset_bytes,
    bitset_indexes,
    build_extra_info,
    decode_batch_ack_body,
    encode_batch_ack_body,
    parse_extra_info,
    parse_normal_topic,
    parse_offset_info,
    pop_retry_topic,
    real_topic,
    retry_flag,
)

JAVA_CK = b'{"bm":0,"bn":"broker-a","c":"CG","d":[0,1,2],"it":60000,"n":3,"pt":1796142867505,"q":0,' \
          b'"reviveTime":1796142927505,"ro":0,"so":0,"t":"PT"}'
JAVA_CK_CHANGED = b'{"bm":0,"bn":"broker-a","c":"CG","d":[0],"it":5000,"n":1,"pt":1796142869041,"q":0,' \
                  b'"reviveTime":1796142874041,"ro":0,"so":1,"t":"PT"}'
JAVA_ACK = b'{"ao":0,"bn":"broker-a","c":"CG","pt":1796142867505,"q":0,"so":0,"t":"PT"}'
JAVA_BACK = b'{"ao":-1,"aol":[2],"bn":"broker-a","c":"CG","pt":1796142867505,"q":0,"so":0,"t":"PT"}'


def test_checkpoint_json_is_javas_byte_for_byte():
    ck = PopCheckPoint(start_offset=0, pop_time=1796142867505, invisible_time=60000, num=3, queue_id=0, topic="PT",
                       cid="CG", broker_name="broker-a")
    for d in (0, 1, 2):
        ck.add_diff(d)
    assert ck.to_json() == JAVA_CK
    assert ck.unique_id() == "PT@0@0@CG@1796142867505@broker-a@ck"
    one = PopCheckPoint(start_offset=1, pop_time=1796142869041, invisible_time=5000, num=1, queue_id=0, topic="PT",
                        cid="CG", broker_name="broker-a", queue_offset_diff=[0])
    assert one.to_json() == JAVA_CK_CHANGED


def test_checkpoint_parses_back_and_indexes_acks():
    ck = PopCheckPoint.from_json(JAVA_CK)
    assert (ck.start_offset, ck.num, ck.queue_offset_diff, ck.revive_time) == (0, 3, [0, 1, 2], 1796142927505)
    assert ck.to_json() == JAVA_CK
    sparse = PopCheckPoint(start_offset=10, pop_time=1, invisible_time=1, num=2, queue_id=0, topic="t", cid="g",
                           queue_offset_diff=[0, 5])
    assert [sparse.index_of_ack(o) for o in (9, 10, 12, 15)] == [-1, 0, -1, 1]
    assert sparse.offsets() == [10, 15]
    old = PopCheckPoint(start_offset=10, pop_time=1, invisible_time=1, num=2, queue_id=0, topic="t", cid="g")
    assert [old.index_of_ack(o) for o in (10, 11, 12)] == [0, 1, -1]  # checkpoints without diffs


def test_ack_and_batch_ack_json_are_javas():
    ack = AckMsg(0, 0, "CG", "PT", 0, 1796142867505, "broker-a")
    assert ack.to_json() == JAVA_ACK and ack.tag == "ack"
    assert ack.unique_id() == "PT@0@0@CG@1796142867505@broker-a@ack"
    back = AckMsg(-1, 0, "CG", "PT", 0, 1796142867505, "broker-a", ack_offset_list=[2])
    assert back.to_json() == JAVA_BACK and back.tag == "bAck"
    assert back.unique_id() == "PT@0@-1@CG@1796142867505@broker-a@ack"  # Java overwrites the bAck id so
    assert AckMsg.from_json(JAVA_BACK, batch=True).acked_offsets() == [2]
    assert AckMsg.from_json(JAVA_ACK).merge_key() == PopCheckPoint.from_json(JAVA_CK).merge_key()
    # fastjson's alternate (long) names are read too
    assert AckMsg.from_json(json.dumps({"ackOffset": 3, "consumerGroup": "g", "topic": "t"})).ack_offset == 3


@pytest.mark.parametrize("bad", [b"", b"[]", b"{", b'{"so":"x"}', b'{"d":[1,"a"]}'])
def test_unreadable_bodies_are_value_errors(bad):
    with pytest.raises(ValueError):
        PopCheckPoint.from_json(bad)


def test_receipt_handles():
    h = build_extra_info(0, 1796142867505, 60000, 0, "PT", "broker-a", 0, 2)
    assert h == "0 1796142867505 60000 0 0 broker-a 0 2"
    e = parse_extra_info(h)
    assert (e.ck_offset, e.queue_offset, e.is_order, e.real_topic("PT", "CG")) == (0, 2, False, "PT")
    assert build_extra_info(5, 1, 2, 3, "%RETRY%CG_PT", "b", 0, 5).split()[4] == "1"
    assert build_extra_info(5, 1, 2, 999, "%RETRY%CG+PT", "b", 0, 5).split()[4] == "2"
    assert parse_extra_info("5 1 2 999 2 b 0 5").real_topic("PT", "CG") == "%RETRY%CG+PT"
    with pytest.raises(ExtraInfoError, match="getBrokerName fail, extraInfoStrs length 1"):
        from rmqtool.layouts.pop import extra_field
        extra_field(["zz"], 5)
    with pytest.raises(ExtraInfoError, match='For input string: "x"'):
        parse_extra_info("x 1 2 3 0 b 0 5")
    with pytest.raises(ValueError):
        real_topic("PT", "CG", "7")


def test_retry_topics_and_offset_infos():
    assert pop_retry_topic("PT", "CG") == "%RETRY%CG_PT"
    assert pop_retry_topic("PT", "CG", v2=True) == "%RETRY%CG+PT"
    assert parse_normal_topic("%RETRY%CG_PT", "CG") == parse_normal_topic("%RETRY%CG+PT", "CG") == "PT"
    assert [retry_flag(t) for t in ("PT", "%RETRY%CG_PT", "%RETRY%CG+PT")] == ["0", "1", "2"]
    assert parse_offset_info("0 0 0,1,2;1 0 7") == {"0@0": [0, 1, 2], "1@0": [7]}
    assert parse_offset_info("") == {}
    with pytest.raises(ValueError):
        parse_offset_info("0 0 1;0 0 2")


def test_batch_ack_body_bitsets():
    assert bitset_bytes([0, 3, 9]) == bytes([0b1001, 0b10]) and bitset_indexes(bytes([0b1001, 0b10])) == [0, 3, 9]
    assert bitset_bytes([]) == b""
    body = encode_batch_ack_body("broker-a", [BatchAck("CG", "PT", "0", 4, 0, 1, 99, 60000, [0, 2])])
    bn, [a] = decode_batch_ack_body(body)
    assert (bn, a.bits, a.start_offset, a.revive_queue_id) == ("broker-a", [0, 2], 4, 1)
    # what Java's fastjson writes for a BitSet {2}: the byte array in base64
    java = json.dumps({"acks": [{"b": base64.b64encode(b"\x04").decode(), "c": "CG", "it": 60000, "pt": 1, "q": 0,
                                 "r": "0", "rq": 0, "so": 0, "t": "PT"}], "brokerName": "broker-a"}).encode()
    assert decode_batch_ack_body(java)[1][0].bits == [2]
    for bad in (b"{", b'{"acks":3}', b'{"acks":[{"b":"**"}]}'):
        with pytest.raises(ValueError):
            decode_batch_ack_body(bad)
