"""POP over real sockets against `rmqtool serve`: pop / ack / batch ack / change invisible time /
notification, long polling, redelivery of what was not acked, orderly pops, Java's error codes."""

from __future__ import annotations

import time

import pytest

from rmqtool.layouts.pop import BatchAck, encode_batch_ack_body, parse_extra_info
from tests.broker.conftest import create_topic
from tests.pop_serve_helpers import ack, handles, pop_ext, pop_until, send

HEADER = {"popTime", "invisibleTime", "reviveQid", "restNum", "startOffsetInfo", "msgOffsetInfo"}


def test_pop_then_ack_answers_as_java(serve, broker):
    create_topic(serve.broker, "PopA", 1)
    send(broker, "PopA", 3)
    r = broker.request(200050, pop_ext("PopA", "cg_pa", n=2))
    assert (r.code, r.remark) == (0, "FOUND")
    assert set(r.ext_fields) == HEADER
    assert (r.ext_fields["startOffsetInfo"], r.ext_fields["msgOffsetInfo"], r.ext_fields["restNum"]) == \
        ("0 0 0", "0 0 0,1", "1")
    got = handles(r)
    assert [m.body for m, _ in got] == [b"m0", b"m1"]
    r2 = broker.request(200050, pop_ext("PopA", "cg_pa"))
    assert [m.body for m, _ in handles(r2)] == [b"m2"] and r2.ext_fields["reviveQid"] != r.ext_fields["reviveQid"]
    empty = broker.request(200050, pop_ext("PopA", "cg_pa"))
    assert (empty.code, empty.remark, empty.body) == (210, "NO_MESSAGE_IN_QUEUE", b"")
    assert (empty.ext_fields["startOffsetInfo"], empty.ext_fields["msgOffsetInfo"]) == ("", "")
    for _m, h in got + handles(r2):
        a = ack(broker, "cg_pa", "PopA", h)
        assert (a.code, a.remark, a.ext_fields) == (0, None, {})
    off = broker.request(14, {"consumerGroup": "cg_pa", "topic": "PopA", "queueId": 0})
    assert off.ext_fields["offset"] == "3"


def test_long_polling_pop_wakes_when_a_message_arrives(serve, broker):
    create_topic(serve.broker, "PopLP", 2)
    t0 = time.time()
    fut = broker.request_async(200050, pop_ext("PopLP", "cg_lp", poll=8000), timeout=20)
    time.sleep(0.5)
    send(broker, "PopLP", 1, queue_id=1)
    r = fut.result(20)
    assert r.code == 0 and [m.body for m, _ in handles(r)] == [b"m0"]
    assert time.time() - t0 < 4
    t1 = time.time()
    r = broker.request(200050, pop_ext("PopLP", "cg_lp", poll=1200), timeout=10)
    assert r.code == 210 and 1.0 <= time.time() - t1 < 3


def test_unacked_messages_come_back_on_the_retry_topic(serve, broker):
    create_topic(serve.broker, "PopRv", 1)
    send(broker, "PopRv", 3)
    r = broker.request(200050, pop_ext("PopRv", "cg_rv", invisible=1500))
    first = handles(r)
    assert len(first) == 3
    pop_time = int(r.ext_fields["popTime"])
    assert ack(broker, "cg_rv", "PopRv", first[1][1]).code == 0
    back = pop_until(broker, "PopRv", "cg_rv", 2, timeout=20)
    assert sorted(m.body for m, _ in back) == [b"m0", b"m2"]
    for m, h in back:
        assert m.topic == "PopRv" and m.reconsume_times == 1
        assert m.properties["1ST_POP_TIME"] == str(pop_time)
        assert parse_extra_info(h).retry == "1"  # read from %RETRY%cg_rv_PopRv
        assert ack(broker, "cg_rv", "PopRv", h).code == 0
    time.sleep(4)
    again = broker.request(200050, pop_ext("PopRv", "cg_rv", poll=500))
    assert again.code == 210, [m.body for m, _ in handles(again)]


def test_change_invisible_time_brings_a_message_back_sooner(serve, broker):
    create_topic(serve.broker, "PopCi", 1)
    send(broker, "PopCi", 1)
    r = broker.request(200050, pop_ext("PopCi", "cg_ci", invisible=600_000))
    [(m, h)] = handles(r)
    c = broker.request(200053, {"consumerGroup": "cg_ci", "topic": "PopCi", "queueId": 0, "extraInfo": h,
                                "offset": m.queue_offset, "invisibleTime": 1000})
    assert (c.code, c.remark) == (0, "not set any response code")
    assert set(c.ext_fields) == {"popTime", "invisibleTime", "reviveQid"} and c.ext_fields["invisibleTime"] == "1000"
    t0 = time.time()
    [(m2, h2)] = pop_until(broker, "PopCi", "cg_ci", 1, timeout=20)
    assert m2.body == b"m0" and m2.reconsume_times == 1 and time.time() - t0 < 15
    assert ack(broker, "cg_ci", "PopCi", h2).code == 0


def test_batch_ack(serve, broker):
    create_topic(serve.broker, "PopBa", 1)
    send(broker, "PopBa", 3)
    r = broker.request(200050, pop_ext("PopBa", "cg_ba", invisible=1500))
    ext = r.ext_fields
    b = BatchAck("cg_ba", "PopBa", "0", 0, 0, int(ext["reviveQid"]), int(ext["popTime"]), 1500, [0, 2])
    a = broker.request(200151, {}, encode_batch_ack_body("broker-a", [b]))
    assert a.code == 0, a.remark
    back = pop_until(broker, "PopBa", "cg_ba", 1, timeout=20)
    assert [m.body for m, _ in back] == [b"m1"]
    assert broker.request(200151, {}, b"").code == 208
    assert broker.request(200151, {}, b'{"acks":[]}').code == 208
    assert broker.request(200151, {}, b"{").code == 1


def test_orderly_pop_blocks_the_queue_until_acked(serve, broker):
    create_topic(serve.broker, "PopOr", 1)
    send(broker, "PopOr", 3)
    r = broker.request(200050, pop_ext("PopOr", "cg_or", n=2, order="true"))
    assert r.ext_fields["reviveQid"] == "999" and "orderCountInfo" in r.ext_fields
    got = handles(r)
    assert [m.body for m, _ in got] == [b"m0", b"m1"]
    assert broker.request(200050, pop_ext("PopOr", "cg_or", order="true")).code == 210  # blocked
    for _m, h in got:
        assert ack(broker, "cg_or", "PopOr", h).code == 0
    r = broker.request(200050, pop_ext("PopOr", "cg_or", order="true"))
    assert [m.body for m, _ in handles(r)] == [b"m2"]


def test_notification(serve, broker):
    create_topic(serve.broker, "PopNt", 1)
    ext = {"consumerGroup": "cg_nt", "topic": "PopNt", "queueId": -1, "pollTime": 300,
           "bornTime": int(time.time() * 1000)}
    r = broker.request(200054, ext)
    assert (r.code, r.ext_fields) == (0, {"hasMsg": "false", "pollingFull": "false"})
    send(broker, "PopNt", 1)
    assert broker.request(200054, ext).ext_fields["hasMsg"] == "true"


@pytest.mark.parametrize(("code", "ext", "want", "remark"), [
    (200050, {"maxMsgNums": 33}, 29, "the broker[127.0.0.1] pop message's num is greater than 32"),
    (200050, {"bornTime": 1}, 210, "the broker[127.0.0.1] pop message is timeout too much"),
    (200050, {"topic": "NoSuchPopTopic"}, 17, "topic[NoSuchPopTopic] not exist, apply first please! "),
    (200050, {"queueId": 5}, 29, "queueId[5] is illegal, topic:[PopErr] topicConfig.readQueueNums:[1] consumer:"),
    (200051, {"offset": 99}, 208, "offset is illegal, key:PopErr@0, commit:99, store:0~1"),
    (200051, {"extraInfo": "zz"}, 1, "java.lang.IllegalArgumentException: getBrokerName fail, extraInfoStrs length 1"),
    (200051, {"extraInfo": "a b c d 0 broker-a 0 0"}, 1, "java.lang.NumberFormatException"),
    (200051, {"queueId": 7}, 13, "queueId[7] is illegal"),
    (200053, {"extraInfo": "zz"}, 1, "java.lang.IllegalArgumentException: getReviveQid fail"),
    (200053, {"offset": 1}, 208, None),
    (200051, {"consumerGroup": None}, 1, None),
])
def test_refusals_get_javas_codes(serve, broker, code, ext, want, remark):
    create_topic(serve.broker, "PopErr", 1)
    if broker.request(30, {"topic": "PopErr", "queueId": 0}).ext_fields.get("offset") == "0":
        send(broker, "PopErr", 1)
    base = pop_ext("PopErr", "cg_err", poll=0) if code == 200050 else \
        {"consumerGroup": "cg_err", "topic": "PopErr", "queueId": 0, "extraInfo": "0 1 60000 0 0 broker-a 0 0",
         "offset": 0, "invisibleTime": 1000}
    base.update(ext)
    base = {k: v for k, v in base.items() if v is not None}
    r = broker.request(code, base)
    assert r.code == want, r.remark
    if remark is not None:
        assert r.remark is not None and r.remark.startswith(remark), r.remark


def test_fuzzed_receipt_handles_get_javas_codes_never_a_traceback(serve, broker):
    """Random and mutated handles, offsets and queue ids on ACK / CHANGE_INVISIBLETIME / BATCH_ACK:
    only the codes Java answers with (0, 1, 13, 17, 208), and the broker keeps serving."""
    import random

    create_topic(serve.broker, "PopFz", 1)
    send(broker, "PopFz", 2)
    r = broker.request(200050, pop_ext("PopFz", "cg_fz"))
    good = [h for _m, h in handles(r)]
    rnd = random.Random(12)
    atoms = ["0", "-1", "999", "x", "", " ", "9" * 25, "1.5", "broker-a", "%RETRY%", "\u00e9", "2", "1"]
    allowed = {0, 1, 13, 17, 208}
    for i in range(300):
        parts = rnd.choice(good).split(" ")
        if rnd.random() < 0.5:
            parts[rnd.randrange(len(parts))] = rnd.choice(atoms)
        else:
            parts = [rnd.choice(atoms) for _ in range(rnd.randrange(10))]
        handle = " ".join(parts)
        ext = {"consumerGroup": "cg_fz", "topic": rnd.choice(["PopFz", "PopFz", "NoSuchFz"]),
               "queueId": rnd.choice([0, 0, -1, 5]), "extraInfo": handle, "offset": rnd.choice([0, 1, 2, -3, 10**12])}
        code = rnd.choice([200051, 200053, 200151])
        if code == 200053:
            ext["invisibleTime"] = rnd.choice([0, 1000, -5])
        body = b""
        if code == 200151:
            ext = {}
            body = rnd.choice([b"{", b'{"acks":[{"b":"AQ==","t":"PopFz","q":0,"so":0,"r":"7"}]}', b'{"acks":[{}]}',
                               encode_batch_ack_body("broker-a", [BatchAck("cg_fz", "PopFz", "0", 0, 0, 0, 1, 1,
                                                                            [rnd.randrange(40)])])])
        resp = broker.request(code, ext, body)
        assert resp.code in allowed, (i, code, ext, body, resp.code, resp.remark)
    assert ack(broker, "cg_fz", "PopFz", good[0]).code == 0  # still serving
    assert "Traceback" not in serve.stderr
