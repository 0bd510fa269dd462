"""LocalBroker: the broker's send / pull / send-back semantics around a MessageStore."""

from __future__ import annotations

import pytest

from rmqtool.errors import InvalidMessage, InvalidTopic
from rmqtool.layouts.message import MessageExt
from rmqtool.layouts.properties import broker_order
from rmqtool.store.local import LocalBroker, SubscriptionData, select_queue_by_hash
from tests.store.conftest import local_config


@pytest.fixture
def broker(tmp_path):
    clock = iter(range(1_700_000_000_000, 1_800_000_000_000, 7)).__next__
    b = LocalBroker.open(tmp_path, local_config(), clock=clock)
    yield b
    b.close()


def test_send_adds_cluster_uniq_key_in_broker_order_and_creates_topic(broker, tmp_path):
    r = broker.send(MessageExt("TopicTest", b"hello", queue_id=2, properties={"TAGS": "TagA", "WAIT": "true"}))
    props = r.msg.properties
    assert props["CLUSTER"] == "DefaultCluster" and len(props["UNIQ_KEY"]) == 32
    assert list(props) == list(broker_order(props))
    assert r.msg.queue_id == 2
    assert broker.topics.select("TopicTest").write_queue_nums == 4
    assert '"TopicTest":{' in (tmp_path / "config" / "topics.json").read_text()


def test_client_uniq_key_is_kept(broker):
    r = broker.send(MessageExt("T", b"x", properties={"UNIQ_KEY": "ABC"}))
    assert r.msg.properties["UNIQ_KEY"] == "ABC"


@pytest.mark.parametrize("msg, err", [
    (MessageExt("bad topic", b"x"), InvalidTopic),
    (MessageExt("SCHEDULE_TOPIC_XXXX", b"x"), InvalidTopic),
    (MessageExt("T", b""), InvalidMessage),
    (MessageExt("T", b"x" * (4 * 1024 * 1024 + 1)), InvalidMessage),
    (MessageExt("T", b"x", queue_id=4), InvalidMessage),
])
def test_refused_sends_write_nothing(broker, tmp_path, msg, err):
    with pytest.raises(err):
        broker.send(msg)
    assert broker.store.max_phy_offset == 0
    assert not (tmp_path / "config" / "topics.json").exists()


def test_pull_filters_by_tag_codes_and_tag_strings(broker):
    for tag in ["A", "B", "C", None, "A"]:
        broker.send(MessageExt("T", b"x", queue_id=0, properties={"TAGS": tag} if tag else {}))
    assert len(broker.pull("T", 0, 0, 32).messages) == 5
    got = broker.pull("T", 0, 0, 32, expr="A || C")
    assert [m.tags for m in got.messages] == ["A", "C", "A"]
    assert got.next_begin_offset == 5


def test_pull_rechecks_tag_strings_on_hash_collision(broker):
    # "Aa" and "BB" have the same String.hashCode(): the store's code filter passes both
    broker.send(MessageExt("T", b"x", queue_id=0, properties={"TAGS": "Aa"}))
    broker.send(MessageExt("T", b"x", queue_id=0, properties={"TAGS": "BB"}))
    assert [m.tags for m in broker.pull("T", 0, 0, expr="Aa").messages] == ["Aa"]


def test_subscription_data_build():
    s = SubscriptionData.build("T", " A ||B|| ")
    assert s.tags_set == ["A", "B"] and len(s.code_set) == 2
    assert SubscriptionData.build("T", "*").sub_all and SubscriptionData.build("T", "").sub_all


def test_sharding_key_hash_is_javas():
    # "TopicTest".hashCode() = -1902610879 -> Java: abs(-1902610879 % 4) = 3
    assert select_queue_by_hash("TopicTest", 4) == 3
    assert select_queue_by_hash("TagA", 4) == 2598919 % 4


def test_send_back_goes_to_retry_with_delay_then_dlq(broker):
    r = broker.send(MessageExt("T", b"body", properties={"TAGS": "A"}))
    first = r.msg
    back = broker.consumer_send_back("g1", first.commit_log_offset, 0)
    m = back.msg
    # the delay hook parks it on SCHEDULE_TOPIC_XXXX queue level-1 with the retry topic as REAL_TOPIC
    assert (m.topic, m.queue_id, m.properties["REAL_TOPIC"]) == ("SCHEDULE_TOPIC_XXXX", 2, "%RETRY%g1")
    assert m.reconsume_times == 1
    assert m.properties["DELAY"] == "3" and m.properties["RETRY_TOPIC"] == "T"
    assert m.properties["ORIGIN_MESSAGE_ID"] == first.offset_msg_id and m.properties["WAIT"] == "false"
    assert broker.topics.select("%RETRY%g1").write_queue_nums == 1
    # again from the retry message: level 3 + 1, ORIGIN_MESSAGE_ID kept
    m2 = broker.consumer_send_back("g1", m.commit_log_offset, 0).msg
    assert m2.properties["DELAY"] == "4" and m2.properties["ORIGIN_MESSAGE_ID"] == first.offset_msg_id
    dead = broker.consumer_send_back("g1", m2.commit_log_offset, 0, max_reconsume_times=2).msg
    assert dead.topic == "%DLQ%g1" and dead.queue_id == 0 and dead.properties["DELAY"] == "0"
    assert dead.reconsume_times == 3
    assert broker.topics.select("%DLQ%g1").perm == 6


def test_direct_retry_send_over_max_goes_to_dlq(broker):
    r = broker.send(MessageExt("%RETRY%g2", b"x", reconsume_times=17))
    assert r.msg.topic == "%DLQ%g2" and r.msg.properties["DELAY"] == "-1"
    r = broker.send(MessageExt("%RETRY%g2", b"x", reconsume_times=16))
    assert r.msg.topic == "%RETRY%g2"


def test_services_run_due_and_plugins(tmp_path):
    from rmqtool.store import local

    calls = []

    class Svc:
        name = "x"

        def run_due(self, now_ms):
            calls.append(now_ms)
            return 2

        def start(self):
            pass

        def stop(self):
            calls.append("stop")

    local.register_service_factory(lambda b: Svc())
    try:
        b = LocalBroker.open(tmp_path, local_config(), clock=lambda: 5)
        assert b.run_due(123) == 2 and 123 in calls
        b.close()
        assert "stop" in calls and b.store.closed
    finally:
        local.SERVICE_FACTORIES.clear()


def test_reopen_keeps_topics_offsets_and_messages(tmp_path):
    with LocalBroker.open(tmp_path, local_config()) as b:
        r = b.send(MessageExt("T", b"persisted", queue_id=1))
        b.offsets.commit_offset("g", "T", 1, 1)
    with LocalBroker.open(tmp_path, local_config()) as b:
        assert b.topics.select("T") is not None
        assert b.offsets.query_offset("g", "T", 1) == 1
        got = b.pull("T", 1, 0)
        assert got.messages[0].body == b"persisted"
        assert got.messages[0].properties["UNIQ_KEY"] == r.msg.properties["UNIQ_KEY"]


def test_clean_expired_service_runs_a_minute_after_open_then_every_10s(tmp_path, monkeypatch):
    now = [1_700_000_000_000]
    b = LocalBroker.open(tmp_path, local_config(), clock=lambda: now[0])
    calls = []
    monkeypatch.setattr(b.store, "clean_expired_files", lambda now_ms=None: calls.append(now_ms) or 1)
    clean = next(s for s in b.services if s.name == "clean-expired")
    assert clean.run_due(now[0]) == 0 and calls == []          # DefaultMessageStore: first after 60 s
    assert clean.run_due(now[0] + 60_000) == 1 and calls == [now[0] + 60_000]
    assert clean.run_due(now[0] + 65_000) == 0                  # cleanResourceInterval 10 s
    assert clean.run_due(now[0] + 70_000) == 1
    b.close()


def test_periodic_service_thread_starts_and_stops():
    import threading

    from rmqtool.store.local import PeriodicService

    ran = threading.Event()
    svc = PeriodicService("tick", lambda now: ran.set() or 1, 10)
    svc.start()
    assert ran.wait(5)
    svc.stop()
    assert svc._thread is None
