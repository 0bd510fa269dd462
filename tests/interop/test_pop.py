"""Issue 12: POP against Apache's broker (the reference) and `rmqtool serve`, side by side.

`java/.../PopSuite.java` drives Apache's Java client 5.3.3 in POP mode (the MQClientAPIImpl calls
its pop push consumer and Apache's proxy make): pop + ack, long polling, redelivery of only the
unacked message with reconsumeTimes and 1ST_POP_TIME, change of invisible time, batch ack,
orderly pops. A raw-remoting probe then compares the two brokers' answers to refused requests
and the checkpoint / ack records each stored on its revive topic, field by field.
"""

from __future__ import annotations

import asyncio
import re
import time

import pytest

from rmqtool.layouts.message import decode_record
from rmqtool.remoting.command import RemotingCommand
from rmqtool.remoting.transport import connect

from .pop_helpers import assert_java_scenario_ok, revive_messages

pytestmark = [pytest.mark.interop, pytest.mark.timeout(400)]

SCENARIOS = ["pop-ack", "long-poll", "redelivery", "change-invisible", "batch-ack", "orderly"]


@pytest.mark.slow
@pytest.mark.parametrize("scenario", SCENARIOS)
def test_java_client_pop_mode(any_broker, request, tmp_path_factory, scenario):
    assert_java_scenario_ok("PopSuite", any_broker, request, tmp_path_factory, scenario, timeout=360)


async def _probe(addr: str, topic: str, group: str) -> dict[str, tuple]:
    """The same requests to a broker; what it answered, without the times and addresses."""
    conn = await connect(addr)
    out: dict[str, tuple] = {}

    async def req(name: str, code: int, ext: dict, body: bytes = b"") -> RemotingCommand:
        r = await conn.request(RemotingCommand.request(code, ext, body), timeout=15)
        keys = tuple(sorted(r.ext_fields))
        out[name] = (r.code, re.sub(r"consumer:\[.*\]", "consumer:[]", (r.remark or "")), keys)
        return r

    try:
        await req("create", 17, {"topic": topic, "defaultTopic": "TBW102", "readQueueNums": 1, "writeQueueNums": 1,
                                 "perm": 6, "topicFilterType": "SINGLE_TAG", "topicSysFlag": 0, "order": "false"})
        out.pop("create")
        for i in range(3):
            r = await conn.request(RemotingCommand.request(310, {
                "a": "pop_probe_pg", "b": topic, "c": "TBW102", "d": 4, "e": 0, "f": 0, "g": int(time.time() * 1000),
                "h": 0, "i": f"TAGS\x01tg\x02KEYS\x01k{i}\x02", "j": 0, "k": "false", "m": "false"}, f"b{i}".encode()))
            assert r.code == 0, r.remark
        # Apache's broker dispatches a moment after the send's answer (ReputMessageService): restNum
        # counts what is in the consume queue, so wait until all three are there on both brokers.
        deadline = time.time() + 30
        while True:
            r = await conn.request(RemotingCommand.request(30, {"topic": topic, "queueId": 0}), timeout=15)
            if r.code == 0 and int(r.ext_fields["offset"]) >= 3:
                break
            assert time.time() < deadline, f"{topic}: 3 messages not dispatched within 30 s"
            await asyncio.sleep(0.05)
        now = int(time.time() * 1000)
        base = {"consumerGroup": group, "topic": topic, "queueId": -1, "invisibleTime": 60000, "pollTime": 0,
                "initMode": 0, "expType": "TAG", "exp": "*"}
        p = await req("pop", 200050, {**base, "maxMsgNums": 2, "bornTime": now})
        out["pop-info"] = (p.ext_fields["startOffsetInfo"], p.ext_fields["msgOffsetInfo"], p.ext_fields["restNum"])
        recs = []
        pos = 0
        while pos < len(p.body):
            m = decode_record(p.body, pos)
            recs.append(m)
            pos += m.total_size
        out["pop-records"] = tuple((m.queue_offset, m.body, m.tags, m.keys) for m in recs)
        handle = f"0 {p.ext_fields['popTime']} 60000 {p.ext_fields['reviveQid']} 0 broker-a 0 0"
        ack = {"consumerGroup": group, "topic": topic, "queueId": 0}
        await req("ack", 200051, {**ack, "extraInfo": handle, "offset": 0})
        await req("change", 200053, {**ack, "extraInfo": handle.replace(" 0 0", " 0 1"), "offset": 1,
                                     "invisibleTime": 30000})
        await req("empty", 200050, {**base, "maxMsgNums": 2, "bornTime": int(time.time() * 1000), "pollTime": 300,
                                    "queueId": 0})
        await req("max33", 200050, {**base, "maxMsgNums": 33, "bornTime": int(time.time() * 1000)})
        await req("stale", 200050, {**base, "maxMsgNums": 1, "bornTime": 1})
        await req("no-topic", 200050, {**base, "topic": topic + "_none", "maxMsgNums": 1,
                                       "bornTime": int(time.time() * 1000)})
        await req("bad-queue", 200050, {**base, "queueId": 9, "maxMsgNums": 1, "bornTime": int(time.time() * 1000)})
        await req("ack-offset", 200051, {**ack, "extraInfo": handle, "offset": 99})
        await req("ack-queue", 200051, {**ack, "queueId": 3, "extraInfo": handle, "offset": 0})
        await req("ack-handle", 200051, {**ack, "extraInfo": "zz", "offset": 0})
        await req("change-handle", 200053, {**ack, "extraInfo": "zz", "offset": 0, "invisibleTime": 1})
        await req("change-offset", 200053, {**ack, "extraInfo": handle, "offset": 3, "invisibleTime": 1})
        await req("batch-empty", 200151, {}, b'{"acks":[]}')
        await req("notification", 200054, {"consumerGroup": group, "topic": topic, "queueId": -1, "pollTime": 200,
                                           "bornTime": int(time.time() * 1000)})
    finally:
        await conn.close()
    return out


def _revive_records(store) -> list[tuple]:
    """The probe's checkpoint and ack records (on the timer topic until due), without times."""
    return sorted((m.topic, m.queue_id, m.tags, tuple(m.properties), body, uniq, m.born_host == m.store_host,
                   m.flag, m.sys_flag) for m, body, uniq in revive_messages(store, b"pop_probe_group"))


@pytest.fixture(scope="module")
def probes(apache_broker, rmqtool_serve):
    got = {}
    for b in (apache_broker, rmqtool_serve):
        got[b.kind] = asyncio.run(_probe(b.broker, "pop_probe_topic", "pop_probe_group"))
    return got


def test_revive_records_are_stored_as_apache_stores_them(probes, apache_broker, rmqtool_serve):
    apache, ours = _revive_records(apache_broker.store), _revive_records(rmqtool_serve.store)
    assert len(apache) == 5  # checkpoints of two pops, an ack, the checkpoint and ack of a change
    assert [r[2:] for r in ours] == [r[2:] for r in apache]


@pytest.mark.parametrize("name", ["pop", "pop-info", "pop-records", "ack", "change", "empty", "max33", "stale",
                                  "no-topic", "bad-queue", "ack-offset", "ack-queue", "ack-handle", "change-handle",
                                  "change-offset", "batch-empty", "notification"])
def test_answers_match_apaches(probes, name):
    assert probes["rmqtool"][name] == probes["apache"][name]
