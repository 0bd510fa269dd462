"""Wire-level POP steps shared by the POP tests against `rmqtool serve` and Apache's broker
(tests/broker/test_pop_*.py, tests/interop/test_pop_store.py, test_pop_buffer_merge.py): the request
headers of Java's PopMessageRequestHeader / AckMessageRequestHeader, and receipt handles built as
Java's client builds them (ExtraInfoUtil), so each test module states only its scenario."""

from __future__ import annotations

import time

from rmqtool.layouts.pop import parse_extra_info
from tests.broker.conftest import decode_records, props, send_ext


def pop_ext(topic: str, group: str, queue_id: int = -1, n: int = 32, invisible: int = 60_000, poll: int = 0,
            **over) -> dict:
    ext = {"consumerGroup": group, "topic": topic, "queueId": queue_id, "maxMsgNums": n, "invisibleTime": invisible,
           "pollTime": poll, "bornTime": int(time.time() * 1000), "initMode": 0, "expType": "TAG", "exp": "*"}
    ext.update(over)
    return ext


def send(broker, topic: str, n: int, queue_id: int = 0, tag: str = "t") -> None:
    for i in range(n):
        r = broker.request(310, send_ext(topic, queue_id, props(TAGS=tag, KEYS=f"k{i}")), f"m{i}".encode())
        assert r.code == 0, r.remark


def handles(r) -> list[tuple[object, str]]:
    """The messages of a pop answer with their receipt handles, built as Java's client builds them."""
    ext = r.ext_fields
    start = {f"{f[0]}@{f[1]}": int(f[2]) for f in (s.split() for s in ext["startOffsetInfo"].split(";") if s)}
    out = []
    for m in decode_records(r.body):
        ck = m.properties.get("POP_CK")
        if ck is None:
            ck = f"{start['0@' + str(m.queue_id)]} {ext['popTime']} {ext['invisibleTime']} {ext['reviveQid']} 0 " \
                 f"broker-a {m.queue_id} {m.queue_offset}"
        out.append((m, ck))
    return out


def ack(broker, group: str, topic: str, handle: str):
    e = parse_extra_info(handle)
    real = e.real_topic(topic, group)
    return broker.request(200051, {"consumerGroup": group, "topic": real, "queueId": e.queue_id,
                                   "extraInfo": handle, "offset": e.queue_offset})


def pop_until(broker, topic: str, group: str, want: int, timeout: float, **kw) -> list:
    got: list = []
    deadline = time.time() + timeout
    while len(got) < want and time.time() < deadline:
        r = broker.request(200050, pop_ext(topic, group, poll=1000, **kw), timeout=15)
        if r.code == 0:
            got += handles(r)
    return got
