"""Send and pull over real sockets: Java / ali-ons / C++ header styles, binary headers, batches,
pull status codes, long polling (wake-up, timeout, out-of-order answers), tag and SQL92 filters."""

from __future__ import annotations

import json
import struct
import time
from pathlib import Path

from rmqtool.broker.send import encode_batch_body
from rmqtool.layouts.msgid import decode_offset_msg_id
from rmqtool.remoting.command import RemotingCommand, encode_binary_header
from tests.broker.conftest import decode_records, heartbeat_body, props, pull_ext, send_ext, sub_data

TRACES = Path(__file__).resolve().parents[2] / "fixtures" / "traces"


def _trace(name: str) -> list[dict]:
    return [json.loads(line) for line in (TRACES / name).read_text().splitlines() if line.strip()]


def test_java_v2_send_then_pull_returns_the_stored_record(serve, broker):
    r = broker.request(310, send_ext("SP_Java", 1, props(TAGS="TagA", KEYS="k1 k2", UNIQ_KEY="AB" * 16, color="red")),
                       b"hello java")
    assert r.code == 0, r.remark
    assert set(r.ext_fields) >= {"msgId", "queueId", "queueOffset", "MSG_REGION", "TRACE_ON"}
    assert r.ext_fields["queueId"] == "1" and r.ext_fields["queueOffset"] == "0"
    mid = decode_offset_msg_id(r.ext_fields["msgId"])
    assert str(mid.host) == serve.broker
    p = broker.request(11, pull_ext("SP_Java", "cg_java", 1))
    assert p.code == 0
    assert set(p.ext_fields) == {"suggestWhichBrokerId", "nextBeginOffset", "minOffset", "maxOffset"}
    assert (p.ext_fields["nextBeginOffset"], p.ext_fields["maxOffset"]) == ("1", "1")
    [m] = decode_records(p.body)
    assert (m.body, m.tags, m.keys, m.properties["color"], m.uniq_key) == (b"hello java", "TagA", "k1 k2", "red",
                                                                          "AB" * 16)
    assert m.commit_log_offset == mid.commit_log_offset and m.queue_offset == 0
    assert m.properties["CLUSTER"] == "DefaultCluster"


def test_ali_ons_numeric_ext_fields_from_the_trace(serve, broker):
    recs = [r for r in _trace("ali-ons-3.12.0.jsonl") if r["code"] == 310]
    for i, rec in enumerate(recs):
        ext = dict(rec["ext"])
        ext["b"] = "SP_AliOns"
        cmd = RemotingCommand.request(310, None, bytes.fromhex(rec["body_head"]))
        cmd.ext_fields = {}
        cmd.version = rec["ver"]
        # write the header as ali-ons does: numbers and booleans, no serializeTypeCurrentRPC
        header = json.dumps({"code": 310, "language": "JAVA", "opaque": 900000 + i, "flag": 0, "version": 121,
                             "remark": None, "extFields": ext}).encode()
        frame = struct.pack(">ii", 4 + len(header) + len(cmd.body), len(header)) + header + cmd.body
        fut = broker.call_soon_response(900000 + i, frame)
        resp = fut.result(10)
        assert resp.code == 0, resp.remark
        assert resp.ext_fields["queueId"] == str(rec["ext"]["e"])
    p = broker.request(11, pull_ext("SP_AliOns", "cg_ons", recs[0]["ext"]["e"]))
    [m] = decode_records(p.body)
    assert m.body.startswith(b"hello from ali-ons") and m.tags == "TagA" and m.properties["interop"] == "ali-ons"


def test_cpp_v1_send_code_10_with_zero_one_booleans(serve, broker):
    rec = next(r for r in _trace("cpp-client-1.x.jsonl") if r["code"] == 10)
    ext = {k: str(v) for k, v in rec["ext"].items()}
    ext["topic"] = "SP_Cpp"
    r = broker.request(10, ext, bytes.fromhex(rec["body_head"]), version=rec["ver"], language="CPP")
    assert r.code == 0, r.remark
    p = broker.request(11, pull_ext("SP_Cpp", "cg_cpp", int(ext["queueId"])))
    [m] = decode_records(p.body)
    assert m.keys == "ckey0" and m.tags == "TagC"


def test_binary_header_request_is_answered_in_json(serve, broker):
    cmd = RemotingCommand.request(310, send_ext("SP_Bin", 0, props(TAGS="b")), b"binary header")
    fut = broker.call_soon_response(cmd.opaque, encode_binary_header(cmd))
    resp = fut.result(10)
    assert resp.code == 0 and resp.serialize_type == 0
    assert resp.ext_fields["queueOffset"] == "0"


def test_batch_send_gives_consecutive_offsets_and_comma_joined_ids(serve, broker):
    items = [(0, f"batch-{i}".encode(), props(UNIQ_KEY=f"{i:032X}", KEYS=f"bk{i}")) for i in range(5)]
    r = broker.request(320, send_ext("SP_Batch", 2, props(WAIT="true"), m="true"), encode_batch_body(items))
    assert r.code == 0, r.remark
    ids = r.ext_fields["msgId"].split(",")
    assert len(ids) == 5 and r.ext_fields["queueOffset"] == "0"
    p = broker.request(11, pull_ext("SP_Batch", "cg_batch", 2))
    msgs = decode_records(p.body)
    assert [m.queue_offset for m in msgs] == [0, 1, 2, 3, 4]
    assert [m.body for m in msgs] == [b"batch-0", b"batch-1", b"batch-2", b"batch-3", b"batch-4"]
    assert msgs[3].keys == "bk3" and msgs[3].properties["WAIT"] == "true"
    assert [decode_offset_msg_id(i).commit_log_offset for i in ids] == [m.commit_log_offset for m in msgs]


def test_send_checks_answer_javas_codes(serve, broker):
    assert broker.request(310, send_ext("bad topic!", 0), b"x").code == 1
    assert broker.request(310, send_ext("SCHEDULE_TOPIC_XXXX", 0), b"x").code == 16
    assert broker.request(310, send_ext("SP_Queue", 99), b"x").code == 1
    assert broker.request(310, send_ext("SP_Empty", 0), b"").code == 13
    missing = send_ext("SP_Missing", 0)
    del missing["e"]
    assert broker.request(310, missing, b"x").code == 1


def test_pull_status_codes(serve, broker):
    for i in range(3):
        assert broker.request(310, send_ext("SP_Codes", 0), f"m{i}".encode()).code == 0
    ok = broker.request(11, pull_ext("SP_Codes", "cg_codes", 0, offset=1, max_msgs=1))
    assert ok.code == 0 and ok.ext_fields["nextBeginOffset"] == "2" and len(decode_records(ok.body)) == 1
    end = broker.request(11, pull_ext("SP_Codes", "cg_codes", 0, offset=3))
    assert end.code == 19 and end.ext_fields["nextBeginOffset"] == "3" and not end.body
    badly = broker.request(11, pull_ext("SP_Codes", "cg_codes", 0, offset=50))
    assert badly.code == 21 and badly.ext_fields["nextBeginOffset"] == "0"  # min offset when it is 0 (Java)
    fresh = broker.request(11, pull_ext("SP_Codes", "cg_codes", 1, offset=0))
    assert fresh.code == 19
    assert broker.request(11, pull_ext("NoSuchTopicPull", "cg_codes")).code == 17
    assert broker.request(11, pull_ext("SP_Codes", "cg_codes", 77)).code == 1
    nosub = broker.request(11, pull_ext("SP_Codes", "cg_nosub", 0, sub=None, sys_flag=0))
    assert nosub.code == 24


def test_long_poll_woken_by_arrival_and_answered_out_of_order(serve, broker):
    assert broker.request(310, send_ext("SP_Long", 0), b"first").code == 0
    t0 = time.time()
    held = broker.request_async(11, pull_ext("SP_Long", "cg_long", 0, offset=1, suspend_ms=15000))
    time.sleep(0.3)
    assert not held.done()
    # the same connection keeps serving while the pull is held: this answer comes first
    s = broker.request(310, send_ext("SP_Other", 0), b"other")
    assert s.code == 0 and not held.done()
    assert broker.request(310, send_ext("SP_Long", 0), b"second").code == 0
    resp = held.result(5)
    assert time.time() - t0 < 3
    assert resp.code == 0 and [m.body for m in decode_records(resp.body)] == [b"second"]


def test_long_poll_times_out_with_pull_not_found_before_the_suspend_time(serve, broker):
    create = {"topic": "SP_Idle", "defaultTopic": "TBW102", "readQueueNums": "2", "writeQueueNums": "2",
              "perm": "6", "topicFilterType": "SINGLE_TAG", "topicSysFlag": "0", "order": "false"}
    assert broker.request(17, create).code == 0
    t0 = time.time()
    resp = broker.request(11, pull_ext("SP_Idle", "cg_idle", 0, suspend_ms=3000), timeout=10)
    took = time.time() - t0
    assert resp.code == 19 and resp.ext_fields["nextBeginOffset"] == "0"
    assert 2.0 < took < 3.0  # held ~2.7 s: answered before the client's 3 s


def test_tag_filter_skips_other_tags(serve, broker):
    for tag in ["TagA", "TagB", "TagA", "TagC"]:
        assert broker.request(310, send_ext("SP_Tags", 0, props(TAGS=tag)), tag.encode()).code == 0
    r = broker.request(11, pull_ext("SP_Tags", "cg_tags", 0, sub="TagA || TagC"))
    assert [m.body for m in decode_records(r.body)] == [b"TagA", b"TagA", b"TagC"]
    assert r.ext_fields["nextBeginOffset"] == "4"
    none = broker.request(11, pull_ext("SP_Tags", "cg_tags", 0, sub="TagZ"))
    assert none.code == 20 and none.ext_fields["nextBeginOffset"] == "4"


def test_heartbeat_subscription_is_used_without_the_subscription_flag(serve, broker):
    for tag in ["x", "y"]:
        broker.request(310, send_ext("SP_HbSub", 0, props(TAGS=tag)), tag.encode())
    hb = heartbeat_body("127.0.0.1@hbsub", "cg_hbsub", [sub_data("SP_HbSub", "y", version=5)])
    assert broker.request(34, body=hb).code == 0
    r = broker.request(11, pull_ext("SP_HbSub", "cg_hbsub", 0, sub=None, sys_flag=0))
    assert [m.body for m in decode_records(r.body)] == [b"y"]
    newer = pull_ext("SP_HbSub", "cg_hbsub", 0, sub=None, sys_flag=0)
    newer["subVersion"] = 6
    assert broker.request(11, newer).code == 25


def test_sql92_filter_and_check_client_config(serve, broker):
    for i in range(6):
        p = props(TAGS="T" + str(i % 2), a=str(i), region="eu" if i < 3 else "us")
        broker.request(310, send_ext("SP_Sql", 0, p), f"s{i}".encode())
    r = broker.request(11, pull_ext("SP_Sql", "cg_sql", 0, sub="a BETWEEN 1 AND 4 AND region = 'us'",
                                    expr_type="SQL92"))
    assert [m.body for m in decode_records(r.body)] == [b"s3", b"s4"]
    r = broker.request(11, pull_ext("SP_Sql", "cg_sql", 0, sub="TAGS IN ('T1') AND b IS NULL", expr_type="SQL92"))
    assert [m.body for m in decode_records(r.body)] == [b"s1", b"s3", b"s5"]
    bad = broker.request(11, pull_ext("SP_Sql", "cg_sql", 0, sub="a >", expr_type="SQL92"))
    assert bad.code == 23
    good = {"clientId": "c", "group": "cg_sql", "subscriptionData": sub_data("SP_Sql", "a > 1", "SQL92")}
    assert broker.request(46, body=json.dumps(good).encode()).code == 0
    wrong = {"clientId": "c", "group": "cg_sql", "subscriptionData": sub_data("SP_Sql", "a > > 1", "SQL92")}
    assert broker.request(46, body=json.dumps(wrong).encode()).code == 23
    tag = {"clientId": "c", "group": "cg_sql", "subscriptionData": sub_data("SP_Sql", "TagA")}
    assert broker.request(46, body=json.dumps(tag).encode()).code == 0


def test_oneway_requests_are_never_answered(serve, broker):
    broker.request(310, send_ext("SP_Oneway", 0), b"x")
    broker.request(200, {}, b'{"groupName":"cg_ow"}')
    frames_before = broker.responses_seen()
    broker.oneway(15, {"consumerGroup": "cg_ow", "topic": "SP_Oneway", "queueId": "0", "commitOffset": "1"})
    broker.oneway(30, {"topic": "SP_Oneway", "queueId": "0"})
    broker.oneway(99999, {})
    r = broker.request(14, {"consumerGroup": "cg_ow", "topic": "SP_Oneway", "queueId": "0"})
    assert r.code == 0 and r.ext_fields["offset"] == "1"
    time.sleep(0.2)
    assert broker.responses_seen() - frames_before == 1  # only the QUERY_CONSUMER_OFFSET answer


def test_unknown_code_is_not_supported(serve, broker):
    r = broker.request(9999, {})
    assert r.code == 3 and "9999" in r.remark


def test_lite_pull_code_361_of_the_5x_lite_pull_consumer(serve, broker):
    assert broker.request(310, send_ext("SP_Lite", 0), b"lite").code == 0
    ext = pull_ext("SP_Lite", "cg_lite", 0, sys_flag=22, suspend_ms=20000)
    ext["maxMsgNums"] = 10
    r = broker.request(361, ext)
    assert r.code == 0 and [m.body for m in decode_records(r.body)] == [b"lite"]
