"""The client against real servers: `rmqtool serve` and (where built) Apache RocketMQ 5.3.x.

The same tests run against both; each test uses its own topic and group.
"""

from __future__ import annotations

import json
import threading
import time

from rmqtool.client import (
    BROADCASTING,
    CONSUME_FROM_FIRST_OFFSET,
    AllocateMessageQueueAveragely,
    ClientConfig,
    ConsumeStatus,
    LocalTransactionState,
    Message,
    Producer,
    PullConsumer,
    PullStatus,
    PushConsumer,
    SendStatus,
    TransactionProducer,
)
from rmqtool.layouts import properties as P

FAST = ClientConfig(rebalance_interval=1.0, persist_consumer_offset_interval=0.5, heartbeat_broker_interval=2.0)


class Collector:
    """A listener that records what it got; `fail` decides per message whether to ask for a retry."""

    def __init__(self, fail=None, delay_level: int = 0) -> None:
        self.msgs = []
        self.lock = threading.Lock()
        self.fail = fail
        self.delay_level = delay_level

    def __call__(self, msgs, ctx):
        with self.lock:
            self.msgs.extend(msgs)
        if self.fail and any(self.fail(m) for m in msgs):
            ctx.delay_level_when_next_consume = self.delay_level
            return ConsumeStatus.RECONSUME_LATER
        return ConsumeStatus.CONSUME_SUCCESS

    def wait(self, n: int, timeout: float = 30.0) -> list:
        deadline = time.time() + timeout
        while time.time() < deadline:
            with self.lock:
                if len(self.msgs) >= n:
                    return list(self.msgs)
            time.sleep(0.05)
        with self.lock:
            return list(self.msgs)

    def bodies(self) -> list[bytes]:
        with self.lock:
            return sorted(m.body for m in self.msgs)


def push(server, group, topic, listener, expr="*", **kw) -> PushConsumer:
    c = PushConsumer(group, server.namesrv, consume_from_where=CONSUME_FROM_FIRST_OFFSET, config=FAST, **kw)
    c.subscribe(topic, expr)
    return c.register_listener(listener)


def test_send_every_way_and_consume_everything(server, unique):
    topic, group = unique("Tall"), unique("gall")
    with Producer(unique("pg"), server.namesrv) as p:
        results = [p.send(Message(topic, f"sync-{i}".encode(), tags="A", keys=f"k{i}")) for i in range(10)]
        futs = [p.send_async(Message(topic, f"async-{i}".encode())) for i in range(10)]
        results += [f.result(10) for f in futs]
        p.send_oneway(Message(topic, b"oneway"))
        batch = p.send_batch([Message(topic, f"batch-{i}".encode(), tags="B") for i in range(5)])
        big = p.send(Message(topic, b"0123456789" * 1000))  # compressed on the wire
    assert all(r.status == SendStatus.SEND_OK for r in results + [batch, big])
    assert len(batch.msg_id.split(",")) == 5
    coll = Collector()
    with push(server, group, topic, coll):
        got = coll.wait(27)
    bodies = sorted(m.body for m in got)
    assert len(bodies) == 27
    assert b"0123456789" * 1000 in bodies and b"oneway" in bodies
    ids = {m.msg_id for m in got}
    assert {r.msg_id for r in results} <= ids and set(batch.msg_id.split(",")) <= ids
    keyed = [m for m in got if m.body == b"sync-3"][0]
    assert (keyed.tags, keyed.keys) == ("A", "k3")


def test_tag_filter_and_sql92(server, unique):
    topic = unique("Tfilter")
    with Producer(unique("pg"), server.namesrv) as p:
        for i in range(12):
            m = Message(topic, f"m{i}".encode(), tags=["TagA", "TagB", "TagC"][i % 3])
            m.put_user_property("n", str(i))
            p.send(m)
    tags = Collector()
    with push(server, unique("gtag"), topic, tags, expr="TagA || TagC"):
        got = tags.wait(8)
        time.sleep(0.5)
    assert len(tags.msgs) == 8 and {m.tags for m in got} == {"TagA", "TagC"}
    sql = Collector()
    c = PushConsumer(unique("gsql"), server.namesrv, consume_from_where=CONSUME_FROM_FIRST_OFFSET, config=FAST)
    c.subscribe(topic, "n > 7 AND TAGS <> 'TagC'", expression_type="SQL92").register_listener(sql)
    with c:
        got = sql.wait(2)
        time.sleep(0.5)
    assert sorted(int(m.properties["n"]) for m in sql.msgs) == [9, 10]


def test_two_consumers_split_the_queues_and_each_message_is_consumed_once(server, unique):
    topic, group = unique("Tsplit"), unique("gsplit")
    with Producer(unique("pg"), server.namesrv) as p:
        p.send(Message(topic, b"create"))  # the topic exists before the consumers start
        a, b = Collector(), Collector()
        ca = push(server, group, topic, a).start()
        cb = push(server, group, topic, b).start()
        try:
            deadline = time.time() + 20
            while time.time() < deadline:
                qa, qb = ca.assigned_queues(), cb.assigned_queues()
                if qa and qb and len(qa) + len(qb) == 5 and not set(qa) & set(qb):  # 4 queues + %RETRY% queue
                    break
                time.sleep(0.1)
            cids = sorted([ca.client_id, cb.client_id])
            strategy = AllocateMessageQueueAveragely()
            mqs = sorted(q for q in ca.assigned_queues() + cb.assigned_queues() if q.topic == topic)
            assert len(mqs) == 4
            for c in (ca, cb):
                assert [q for q in c.assigned_queues() if q.topic == topic] == strategy.allocate(
                    group, c.client_id, mqs, cids)
            time.sleep(1.0)  # both have committed what they took over
            for i in range(40):
                p.send(Message(topic, f"m{i}".encode()))
            deadline = time.time() + 20
            while time.time() < deadline and len(a.msgs) + len(b.msgs) < 41:
                time.sleep(0.05)
            time.sleep(0.5)
            bodies = sorted(x for x in a.bodies() + b.bodies() if x != b"create")
            assert bodies == sorted(f"m{i}".encode() for i in range(40))
            assert a.msgs and b.msgs
        finally:
            ca.shutdown()
            cb.shutdown()


def test_offsets_are_committed_and_a_restart_continues_after_them(server, unique):
    topic, group = unique("Toff"), unique("goff")
    with Producer(unique("pg"), server.namesrv) as p:
        for i in range(10):
            p.send(Message(topic, f"first-{i}".encode()))
        first = Collector()
        with push(server, group, topic, first):
            first.wait(10)
        for i in range(5):
            p.send(Message(topic, f"second-{i}".encode()))
    second = Collector()
    with push(server, group, topic, second):
        second.wait(5)
        time.sleep(1.0)
    assert second.bodies() == sorted(f"second-{i}".encode() for i in range(5))
    with PullConsumer(group, server.namesrv) as pc:
        mqs = pc.fetch_subscribe_message_queues(topic)
        assert sum(pc.fetch_consume_offset(mq) for mq in mqs) == 15
        assert sum(pc.max_offset(mq) for mq in mqs) == 15


def test_failed_message_is_retried_then_goes_to_the_dlq(server, unique):
    topic, group = unique("Tretry"), unique("gretry")
    with Producer(unique("pg"), server.namesrv) as p:
        sent = p.send(Message(topic, b"poison", tags="X"))
        p.send(Message(topic, b"fine"))
    coll = Collector(fail=lambda m: m.body == b"poison", delay_level=1)  # retry after 1 s
    with push(server, group, topic, coll, max_reconsume_times=2):
        deadline = time.time() + 40
        while time.time() < deadline and sum(m.body == b"poison" for m in coll.msgs) < 3:
            time.sleep(0.1)
        time.sleep(1.5)
    poison = [m for m in coll.msgs if m.body == b"poison"]
    assert [m.reconsume_times for m in poison] == [0, 1, 2]
    assert all(m.topic == topic and m.msg_id == sent.msg_id for m in poison)  # topic restored from RETRY_TOPIC
    with PullConsumer(unique("gdlq"), server.namesrv) as pc:
        deadline = time.time() + 15
        dead = []
        while time.time() < deadline and not dead:
            try:
                for mq in pc.fetch_subscribe_message_queues("%DLQ%" + group):
                    dead += pc.pull(mq, "*", 0).messages
            except Exception:
                pass
            time.sleep(0.3)
    assert [m.body for m in dead] == [b"poison"]
    assert dead[0].properties.get(P.RETRY_TOPIC, topic) == topic
    assert dead[0].properties.get(P.ORIGIN_MESSAGE_ID)


def test_broadcast_consumers_each_get_everything_with_local_offsets(server, unique, tmp_path):
    topic, group = unique("Tbc"), unique("gbc")
    with Producer(unique("pg"), server.namesrv) as p:
        for i in range(8):
            p.send(Message(topic, f"m{i}".encode()))
    a, b = Collector(), Collector()
    ca = push(server, group, topic, a, message_model=BROADCASTING, offset_store_dir=tmp_path / "a")
    cb = push(server, group, topic, b, message_model=BROADCASTING, offset_store_dir=tmp_path / "b")
    with ca, cb:
        a.wait(8)
        b.wait(8)
        time.sleep(0.8)
    assert a.bodies() == b.bodies() == sorted(f"m{i}".encode() for i in range(8))
    files = list((tmp_path / "a").rglob("offsets.json"))
    assert len(files) == 1
    table = json.loads(files[0].read_text())["offsetTable"]
    assert sum(e["offset"] for e in table if e["topic"] == topic) == 8


def test_orderly_consumption_keeps_per_key_order(server, unique):
    topic, group = unique("Tord"), unique("gord")
    with Producer(unique("pg"), server.namesrv) as p:
        for i in range(30):
            key = f"order-{i % 3}"
            p.send(Message(topic, f"{key}:{i}".encode()), sharding_key=key)
    seen: list[str] = []
    attempts: dict[str, int] = {}

    def listener(msgs, ctx):
        for m in msgs:
            body = m.body.decode()
            if body == "order-1:4" and attempts.setdefault(body, 0) < 1:
                attempts[body] += 1
                return ConsumeStatus.SUSPEND_CURRENT_QUEUE_A_MOMENT  # redelivered locally, in order
            seen.append(body)
        return ConsumeStatus.SUCCESS

    c = PushConsumer(group, server.namesrv, consume_from_where=CONSUME_FROM_FIRST_OFFSET, config=FAST)
    c.subscribe(topic, "*").register_orderly_listener(listener)
    with c:
        deadline = time.time() + 20
        while time.time() < deadline and len(seen) < 30:
            time.sleep(0.05)
    assert len(seen) == 30
    for k in range(3):
        nums = [int(s.split(":")[1]) for s in seen if s.startswith(f"order-{k}:")]
        assert nums == sorted(nums)


class TxListener:
    def __init__(self):
        self.checks = []

    def execute_local_transaction(self, msg, arg):
        return arg

    def check_local_transaction(self, msg):
        self.checks.append(msg)
        if msg.body == b"checked":
            return LocalTransactionState.COMMIT_MESSAGE
        return LocalTransactionState.ROLLBACK_MESSAGE


def test_transactions_commit_rollback_and_check_back(server, unique):
    topic, group = unique("Ttx"), unique("gtx")
    lst = TxListener()
    with TransactionProducer(unique("txpg"), server.namesrv, listener=lst) as p:
        p.send_message_in_transaction(Message(topic, b"committed"), LocalTransactionState.COMMIT_MESSAGE)
        p.send_message_in_transaction(Message(topic, b"rolled-back"), LocalTransactionState.ROLLBACK_MESSAGE)
        p.send_message_in_transaction(Message(topic, b"checked"), LocalTransactionState.UNKNOW)
        coll = Collector()
        with push(server, group, topic, coll):
            coll.wait(2, timeout=60)
            time.sleep(1.0)
    # Apache batches op records (transactionOpBatchInterval), so a check may come twice: at least once
    assert set(coll.bodies()) == {b"checked", b"committed"}
    assert b"checked" in {m.body for m in lst.checks}


def test_pull_consumer_reads_and_commits(server, unique):
    topic, group = unique("Tpull"), unique("gpull")
    with Producer(unique("pg"), server.namesrv) as p:
        for i in range(6):
            p.send(Message(topic, f"m{i}".encode(), tags="A" if i % 2 else "B"))
    with PullConsumer(group, server.namesrv) as pc:
        total = []
        for mq in pc.fetch_subscribe_message_queues(topic):
            r = pc.pull(mq, "A", pc.min_offset(mq), 32)
            assert r.status in (PullStatus.FOUND, PullStatus.NO_MATCHED_MSG, PullStatus.NO_NEW_MSG)
            total += r.messages
            r2 = pc.pull(mq, "*", r.next_begin_offset)
            assert r2.status in (PullStatus.NO_NEW_MSG, PullStatus.NO_MATCHED_MSG)
            pc.update_consume_offset(mq, r.next_begin_offset)
            assert pc.fetch_consume_offset(mq) == r.next_begin_offset
        assert sorted(m.body for m in total) == [b"m1", b"m3", b"m5"]
        mq = pc.fetch_subscribe_message_queues(topic)[0]
        t0 = time.time()
        r = pc.pull_block_if_not_found(mq, "*", pc.max_offset(mq), timeout=1.0)
        assert r.status == PullStatus.NO_NEW_MSG and time.time() - t0 >= 0.5


def test_notify_consumer_ids_changed_makes_the_others_rebalance_at_once(server, unique):
    """With the periodic rebalance 2 minutes away, only the broker's NOTIFY_CONSUMER_IDS_CHANGED can move queues."""
    topic, group = unique("Tnotify"), unique("gnotify")
    slow = ClientConfig(rebalance_interval=120.0, heartbeat_broker_interval=120.0)
    with Producer(unique("pg"), server.namesrv) as p:
        p.send(Message(topic, b"create"))

    def mine(c):
        return [q for q in c.assigned_queues() if q.topic == topic]

    ca = PushConsumer(group, server.namesrv, config=slow).subscribe(topic).register_listener(Collector()).start()
    cb = None
    try:
        deadline = time.time() + 10
        while time.time() < deadline and len(mine(ca)) != 4:
            time.sleep(0.05)
        assert len(mine(ca)) == 4
        cb = PushConsumer(group, server.namesrv, config=slow).subscribe(topic).register_listener(Collector()).start()
        deadline = time.time() + 10
        while time.time() < deadline and not (len(mine(ca)) == 2 and len(mine(cb)) == 2):
            time.sleep(0.05)
        assert len(mine(ca)) == 2 and len(mine(cb)) == 2
        cb.shutdown()  # UNREGISTER_CLIENT: the broker notifies again and ca takes everything back
        cb = None
        deadline = time.time() + 10
        while time.time() < deadline and len(mine(ca)) != 4:
            time.sleep(0.05)
        assert len(mine(ca)) == 4
    finally:
        ca.shutdown()
        if cb is not None:
            cb.shutdown()


def test_a_blocked_listener_holds_up_only_its_own_message(server, unique):
    """As Java's ConsumeMessageConcurrentlyService: other messages of the same pull go on while one
    listener call blocks, and the committed offset stops at the blocked message until it returns."""
    topic, group = unique("Tblock"), unique("gblock")
    release = threading.Event()
    seen: list[bytes] = []
    lock = threading.Lock()

    def listener(msgs, ctx):
        for m in msgs:
            if m.body == b"m0":
                release.wait(20)
            with lock:
                seen.append(m.body)
        return ConsumeStatus.CONSUME_SUCCESS

    c = push(server, group, topic, listener)
    with c, Producer(unique("pg"), server.namesrv) as p:
        mq = p.fetch_publish_message_queues(topic)[0]
        for i in range(40):  # first a run of fast calls: the consumer learns its listener is fast
            p.send(Message(topic, f"warm{i}".encode()), queue=mq)
        deadline = time.time() + 20
        while time.time() < deadline and len(seen) < 40:
            time.sleep(0.05)
        assert len(seen) == 40
        seen.clear()
        p.send_batch([Message(topic, f"m{i}".encode()) for i in range(8)], queue=mq)  # one pull
        deadline = time.time() + 20
        while time.time() < deadline:
            with lock:
                if len(seen) >= 7:
                    break
            time.sleep(0.05)
        with lock:
            assert sorted(seen) == [f"m{i}".encode() for i in range(1, 8)], seen  # all but the blocked one
        release.set()
        deadline = time.time() + 20
        while time.time() < deadline and len(seen) < 8:
            time.sleep(0.05)
        assert sorted(seen) == [f"m{i}".encode() for i in range(8)]
