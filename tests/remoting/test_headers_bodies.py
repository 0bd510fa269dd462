"""Header decoding from real-client extFields and fastjson body encoding (protocol.md §1.5, §3)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rmqtool.remoting import fastjson
from rmqtool.remoting.bodies import (
    BrokerData,
    ConsumeStats,
    HeartbeatData,
    MessageQueue,
    OffsetWrapper,
    QueueData,
    RegisterBrokerBody,
    SubscriptionData,
    TopicConfig,
    TopicConfigSerializeWrapper,
    TopicRouteData,
)
from rmqtool.remoting.command import _ext_str
from rmqtool.remoting.headers import (
    HeaderError,
    PullMessageRequestHeader,
    SendMessageRequestHeader,
    send_header_from_ext,
)

TRACES = Path(__file__).resolve().parents[2] / "fixtures" / "traces"


def _trace(name: str) -> list[dict]:
    return [json.loads(line) for line in (TRACES / name).read_text().splitlines() if line.strip()]


def _ext(rec: dict) -> dict[str, str]:
    return {k: _ext_str(v) for k, v in rec["ext"].items()}


@pytest.mark.parametrize("name", ["ali-ons-3.12.0.jsonl", "cpp-client-1.x.jsonl", "cpp-client-2.1.0.jsonl"])
def test_every_recorded_send_and_pull_header_decodes(name):
    seen = 0
    for rec in _trace(name):
        if rec["code"] in (10, 310, 320):
            h = send_header_from_ext(rec["code"], _ext(rec))
            assert h.topic and h.producerGroup and h.defaultTopic == "TBW102"
            assert h.properties == rec["props"]
            assert h.unitMode in (False, None)
            seen += 1
        elif rec["code"] == 11:
            h = PullMessageRequestHeader.from_ext(_ext(rec))
            assert h.maxMsgNums == 32 and h.suspendTimeoutMillis > 0 and h.sysFlag & 2
            seen += 1
    assert seen


def test_v2_letters_round_trip_and_missing_required_field():
    h = SendMessageRequestHeader("pg", "T", "TBW102", 4, 1, 0, 123, 0, "TAGS\x01a", 0, False, True, None, "b")
    ext = h.to_v2_ext()
    assert ext["a"] == "pg" and ext["m"] == "true" and ext["k"] == "false" and "l" not in ext
    assert send_header_from_ext(310, ext) == h
    del ext["e"]
    with pytest.raises(HeaderError, match="queueId"):
        send_header_from_ext(310, ext)


def test_route_json_unquoted_keys_for_old_clients_quoted_for_new():
    route = TopicRouteData([QueueData("broker-a", 4, 4, 6, 0)],
                           [BrokerData("DefaultCluster", "broker-a", {0: "127.0.0.1:10911"})])
    old = fastjson.dumps(route, quote_keys=False)
    assert old == ('{"brokerDatas":[{"brokerAddrs":{0:"127.0.0.1:10911"},"brokerName":"broker-a",'
                   '"cluster":"DefaultCluster"}],"filterServerTable":{},"queueDatas":[{"brokerName":"broker-a",'
                   '"perm":6,"readQueueNums":4,"topicSysFlag":0,"writeQueueNums":4}]}')
    new = fastjson.dumps(route)
    assert json.loads(new)["brokerDatas"][0]["brokerAddrs"] == {"0": "127.0.0.1:10911"}
    assert TopicRouteData.decode(old.encode()) == route == TopicRouteData.decode(new.encode())


def test_object_map_keys_as_fastjson_writes_them():
    stats = ConsumeStats({MessageQueue("T", "b", 1): OffsetWrapper(5, 3, 0, 9)})
    text = fastjson.dumps(stats)
    assert text.startswith('{"consumeTps":0.0,"offsetTable":{{"brokerName":"b","queueId":1,"topic":"T"}:')
    assert ConsumeStats.decode(text.encode()) == stats


def test_subscription_build_uses_java_hash_codes():
    sd = SubscriptionData.build("T", "TagA || TagB ||", "TAG")
    assert sd.tagsSet == ["TagA", "TagB"] and sd.codeSet == [2598919, 2598920]
    assert SubscriptionData.build("T", "*").is_all


def test_heartbeat_body_round_trips():
    raw = ('{"clientID":"1.2.3.4@1","consumerDataSet":[{"consumeFromWhere":"CONSUME_FROM_LAST_OFFSET",'
           '"consumeType":"CONSUME_PASSIVELY","groupName":"cg","messageModel":"CLUSTERING","subscriptionDataSet":'
           '[{"classFilterMode":false,"codeSet":[2598919],"expressionType":"TAG","subString":"TagA",'
           '"subVersion":1,"tagsSet":["TagA"],"topic":"T"}],"unitMode":false}],'
           '"producerDataSet":[{"groupName":"CLIENT_INNER_PRODUCER"}]}')
    hb = HeartbeatData.decode(raw.encode())
    assert fastjson.dumps(hb) == raw


def test_register_broker_body_both_forms():
    w = TopicConfigSerializeWrapper({"T": TopicConfig("T", 4, 4, 6)})
    body = RegisterBrokerBody(w)
    assert RegisterBrokerBody.decode(fastjson.dumpb(body)).topicConfigSerializeWrapper.topicConfigTable["T"].perm == 6
    dec = RegisterBrokerBody.decode(body.encode_compressed(), compressed=True)
    assert dec.topicConfigSerializeWrapper.topicConfigTable["T"].writeQueueNums == 4
