"""Issue 12: Apache's classic push consumer (DefaultMQPushConsumer, Java client 5.3.3) in POP mode,
against Apache's broker (the reference) and `rmqtool serve`, side by side.

`java/.../PopPushSuite.java` switches its group to POP with SET_MESSAGE_REQUEST_MODE (401, what
`mqadmin setConsumeMode -m POP` sends) and starts a consumer with `setClientRebalance(false)`: its
rebalance asks the broker with QUERY_ASSIGNMENT (400), pops (queueId -1, initMode, expType, exp),
acks, and changes the invisible time of a message it answers RECONSUME_LATER for.
"""

from __future__ import annotations

import asyncio
import json
import time

import pytest

from rmqtool.remoting.command import RemotingCommand
from rmqtool.remoting.transport import connect

from .pop_helpers import assert_java_scenario_ok

pytestmark = [pytest.mark.interop, pytest.mark.timeout(300)]

SCENARIOS = ["consume-all", "reconsume-later"]


@pytest.mark.slow
@pytest.mark.parametrize("scenario", SCENARIOS)
def test_java_push_consumer_in_pop_mode(any_broker, request, tmp_path_factory, scenario):
    assert_java_scenario_ok("PopPushSuite", any_broker, request, tmp_path_factory, scenario, timeout=240)


def _heartbeat(client_id: str, group: str, topic: str, model: str = "CLUSTERING") -> bytes:
    sub = {"classFilterMode": False, "codeSet": [], "expressionType": "TAG", "subString": "*", "subVersion": 1,
           "tagsSet": [], "topic": topic}
    return json.dumps({"clientID": client_id, "producerDataSet": [], "consumerDataSet": [{
        "groupName": group, "consumeType": "CONSUME_PASSIVELY", "messageModel": model,
        "consumeFromWhere": "CONSUME_FROM_LAST_OFFSET", "unitMode": False, "subscriptionDataSet": [sub]}]}).encode()


async def _assignment_probe(addr: str, run: str) -> dict[str, tuple]:
    """QUERY_ASSIGNMENT and SET_MESSAGE_REQUEST_MODE asked of one broker by three clients of one group:
    each answer's code, remark and assignments (queue, mode), sorted."""
    topic, group, other = f"QA_{run}", f"qa_group_{run}", f"qa_lonely_{run}"
    conns = [await connect(addr) for _ in range(3)]
    out: dict[str, tuple] = {}

    async def call(code: int, body: bytes, conn=conns[0]) -> RemotingCommand:
        return await conn.request(RemotingCommand.request(code, {}, body), timeout=15)

    async def query(name: str, conn=conns[0], **over) -> None:
        body = {"topic": topic, "consumerGroup": group, "clientId": "cid_0", "strategyName": "AVG",
                "messageModel": "CLUSTERING", **over}
        r = await call(400, json.dumps(body).encode(), conn)
        got = None
        if r.code == 0:
            assignments = json.loads(r.body).get("messageQueueAssignments")
            if assignments is not None:
                got = tuple(sorted((a["messageQueue"]["topic"], a["messageQueue"]["queueId"], a["mode"])
                                   for a in assignments))
        out[name] = (r.code, r.remark if r.code == 0 else None, got)

    async def set_mode(name: str, mode: str, share: int, t: str = topic) -> None:
        body = json.dumps({"topic": t, "consumerGroup": group, "mode": mode, "popShareQueueNum": share}).encode()
        r = await call(401, body)
        out[name] = (r.code, r.remark)

    try:
        r = await conns[0].request(RemotingCommand.request(17, {
            "topic": topic, "defaultTopic": "TBW102", "readQueueNums": 4, "writeQueueNums": 4, "perm": 6,
            "topicFilterType": "SINGLE_TAG", "topicSysFlag": 0, "order": "false"}), timeout=15)
        assert r.code == 0, r.remark
        for i, c in enumerate(conns):
            r = await call(34, _heartbeat(f"cid_{i}", group, topic), c)
            assert r.code == 0, r.remark
        await asyncio.sleep(1)  # Apache's broker registers the new topics with its name server
        await query("pull-avg")
        await query("pull-avg-last", clientId="cid_2")
        await query("pull-circle", strategyName="AVG_BY_CIRCLE")
        await query("pull-circle-last", clientId="cid_2", strategyName="AVG_BY_CIRCLE")
        await query("unknown-strategy", strategyName="CONSISTENT_HASH")
        await query("broadcasting", messageModel="BROADCASTING")
        await query("retry-topic", topic=f"%RETRY%{group}")
        await query("no-topic", topic=f"{topic}_none")
        await query("no-group", consumerGroup=other)
        await query("not-a-member", clientId="cid_9")
        r = await call(400, b"not json")
        out["bad-body"] = (r.code,)
        await set_mode("set-pop-all", "POP", 0)
        await query("pop-all")
        await query("pop-all-circle", strategyName="AVG_BY_CIRCLE")
        await set_mode("set-pop-share", "POP", 1)  # 1 < 3 clients - 1: own share plus the next client's
        await query("pop-share")
        await query("pop-share-last", clientId="cid_2")
        await set_mode("set-pull", "PULL", 0)
        await query("pull-again")
        await set_mode("set-retry", "POP", 0, f"%RETRY%{group}")
        await set_mode("set-no-topic", "POP", 0, f"{topic}_none")
    finally:
        for c in conns:
            await c.close()
    return out


PROBES = ["pull-avg", "pull-avg-last", "pull-circle", "pull-circle-last", "unknown-strategy", "broadcasting",
          "retry-topic", "no-topic", "no-group", "not-a-member", "bad-body", "set-pop-all", "pop-all",
          "pop-all-circle", "set-pop-share", "pop-share", "pop-share-last", "set-pull", "pull-again", "set-retry",
          "set-no-topic"]


@pytest.fixture(scope="module")
def assignment_probes(apache_broker, rmqtool_serve):
    run = str(int(time.time()))
    return {b.kind: asyncio.run(_assignment_probe(b.broker, run)) for b in (apache_broker, rmqtool_serve)}


def test_assignment_probe_covers_the_modes(assignment_probes):
    apache = assignment_probes["apache"]
    assert {m for _t, _q, m in apache["pop-all"][2]} == {"POP"} and {q for _t, q, _m in apache["pop-all"][2]} == {-1}
    assert len(apache["pull-avg"][2]) == 2 and len(apache["pop-share"][2]) == 3


@pytest.mark.parametrize("name", PROBES)
def test_assignment_answers_match_apaches(assignment_probes, name):
    assert assignment_probes["rmqtool"][name] == assignment_probes["apache"][name]
