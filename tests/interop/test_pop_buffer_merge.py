"""Issue 12: buffer-merge mode (enablePopBufferMerge=true) in Apache's broker 5.3.3 (the reference)
and in `rmqtool serve`, side by side. A pop acked in full within the window leaves no record on
either; a pop acked in part gets its checkpoint and the acks it merged stored shortly before its
revive time, record for record as Apache's broker stores them (topic, queue, tag, property order,
JSON body without times, UNIQ_KEY), and exactly its unacked messages come back."""

from __future__ import annotations

import time

import pytest

from tests.broker.conftest import Wire
from tests.pop_serve_helpers import ack, handles, pop_ext, pop_until, send

from .conftest import start_apache, start_rmqtool_serve, stop_rmqtool_serve
from .harness import require_java
from .pop_helpers import revive_messages
from .side_by_side import side_by_side

pytestmark = [pytest.mark.interop, pytest.mark.slow, pytest.mark.timeout(300)]
TOPIC = "PopMerged"
FLAG = "enablePopBufferMerge=true"
APACHE_SIZES = ("mappedFileSizeCommitLog=67108864", "mappedFileSizeTimerLog=8388608")


def wait_dispatched(w: Wire, topic: str, n: int, timeout: float = 30) -> None:
    """Until queue 0's max offset (GET_MAX_OFFSET, the consume queue's) is `n`: a Java broker dispatches
    a moment after the send's answer (ReputMessageService), later still on a loaded machine."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        r = w.request(30, {"topic": topic, "queueId": 0})
        if r.code == 0 and int(r.ext_fields["offset"]) >= n:
            return
        time.sleep(0.1)
    raise AssertionError(f"{topic}: {n} messages not dispatched within {timeout} s")


def scenario(addr: str) -> dict[str, object]:
    w = Wire(addr)
    out: dict[str, object] = {}
    try:
        r = w.request(17, {"topic": TOPIC, "defaultTopic": "TBW102", "readQueueNums": 1, "writeQueueNums": 1,
                           "perm": 6, "topicFilterType": "SINGLE_TAG", "topicSysFlag": 0, "order": "false"})
        assert r.code == 0, r.remark
        send(w, TOPIC, 4)
        wait_dispatched(w, TOPIC, 4)  # in the consume queue on both: one pop takes all four
        for group, keep in (("cg_merged_all", ()), ("cg_merged_two", (b"m1", b"m3"))):
            got = handles(w.request(200050, pop_ext(TOPIC, group, invisible=10_000)))
            assert sorted(m.body for m, _ in got) == [b"m0", b"m1", b"m2", b"m3"]
            for m, h in got:
                if m.body not in keep:
                    assert ack(w, group, TOPIC, h).code == 0
        back = pop_until(w, TOPIC, "cg_merged_two", 2, timeout=40)
        out["redelivered"] = sorted((m.body, m.reconsume_times) for m, _ in back)
        for _m, h in back:
            assert ack(w, "cg_merged_two", TOPIC, h).code == 0
        out["all-acked-again"] = [m.body for m, _ in pop_until(w, TOPIC, "cg_merged_all", 1, timeout=3)]
    finally:
        w.close()
    return out


def records(store, group: str) -> list[tuple]:
    """The revive records of `group` as put (on the timer topic), without times."""
    return sorted((m.tags, tuple(m.properties), body, uniq, m.flag, m.sys_flag)
                  for m, body, uniq in revive_messages(store, f'"{group}"'.encode(), on_timer_only=True))


def apache_run(root) -> tuple:
    """The scenario against Apache's broker 5.3.3 with buffer merge on, and the revive records it stored."""
    a = start_apache(root, FLAG, *APACHE_SIZES)
    try:
        return scenario(a.broker), records(a.store, "cg_merged_all"), records(a.store, "cg_merged_two")
    finally:
        a.proc.kill()
        a.proc.wait()


def serve_run(root) -> tuple:
    """The same against `rmqtool serve` with buffer merge on; its stderr must hold no traceback."""
    conf = root / "merge.conf"
    conf.write_text("transactionCheckInterval=1000\ntransactionTimeOut=1000\n" + FLAG + "\n")
    s = start_rmqtool_serve(root, "-c", str(conf))
    try:
        got = scenario(s.broker), records(s.store, "cg_merged_all"), records(s.store, "cg_merged_two")
    finally:
        assert stop_rmqtool_serve(s) == 0
    assert "Traceback" not in (root / "serve.stderr").read_text()
    return got


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """Both brokers at once (side_by_side): each run mostly waits (the 10 s invisible time, the
    revive), on a broker, ports and a store of its own."""
    require_java()
    with side_by_side(tmp_path_factory, {"merge-apache": apache_run, "merge-serve": serve_run}) as f:
        return {"apache": f["merge-apache"].result(), "rmqtool": f["merge-serve"].result()}


def test_apache_merges_as_expected(runs):
    answers, all_acked, two_acked = runs["apache"]
    assert all_acked == []
    assert sorted(r[0] for r in two_acked) == ["ack", "ack", "ck"]
    assert answers == {"redelivered": [(b"m1", 1), (b"m3", 1)], "all-acked-again": []}


@pytest.mark.parametrize("part", ["answers", "records-all-acked", "records-two-acked"])
def test_serve_merges_as_apache(runs, part):
    i = ["answers", "records-all-acked", "records-two-acked"].index(part)
    assert runs["rmqtool"][i] == runs["apache"][i]
