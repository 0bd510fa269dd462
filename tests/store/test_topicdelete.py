"""Dropping topics from a running store (deleteTopic, cleanUnusedTopic, cleanExpiredCQ)."""

from __future__ import annotations

from rmqtool.layouts.message import MessageExt
from rmqtool.store import topicdelete
from rmqtool.store.local import LocalBroker
from tests.store.conftest import local_config


def test_delete_topics_drops_queues_and_a_new_topic_starts_at_zero(tmp_path):
    with LocalBroker.open(tmp_path, local_config()) as b:
        for i in range(3):
            b.send(MessageExt("TD_Gone", f"m{i}".encode(), queue_id=1))
            b.send(MessageExt("TD_Kept", f"m{i}".encode(), queue_id=0))
        assert b.store.get_max_offset_in_queue("TD_Gone", 1) == 3
        assert topicdelete.delete_topics(b.store, ["TD_Gone"]) == 1
        assert not (tmp_path / "consumequeue" / "TD_Gone").exists()
        assert b.store.get_max_offset_in_queue("TD_Gone", 1) == 0
        assert b.store.get_max_offset_in_queue("TD_Kept", 0) == 3
        r = b.send(MessageExt("TD_Gone", b"again", queue_id=1))
        assert r.queue_offset == 0
        assert b.store.get_max_offset_in_queue("TD_Gone", 1) == 1


def test_unused_topics_and_clean_expired_consume_queues(tmp_path):
    with LocalBroker.open(tmp_path, local_config()) as b:
        b.send(MessageExt("TD_Known", b"x", queue_id=0))
        b.send(MessageExt("TD_Orphan", b"x", queue_id=0))
        b.topics.delete("TD_Orphan")
        assert topicdelete.unused_topics(b.store, lambda t: b.topics.select(t) is not None) == ["TD_Orphan"]
        assert topicdelete.clean_expired_consume_queues(b.store) == 0  # every unit still has its message


def test_group_delete_and_offsets_by_topic(tmp_path):
    with LocalBroker.open(tmp_path, local_config()) as b:
        b.subscriptions.find("td_group")
        assert b.subscriptions.delete("td_group") and not b.subscriptions.delete("td_group")
        b.offsets.commit_offset("g1", "TD_T", 0, 5)
        b.offsets.commit_offset("g1", "TD_U", 0, 7)
        b.offsets.clean_offset_by_topic("TD_T")
        assert b.offsets.query_offset("g1", "TD_T", 0) == -1 and b.offsets.query_offset("g1", "TD_U", 0) == 7
