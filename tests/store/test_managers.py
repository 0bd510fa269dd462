"""TopicConfigManager, ConsumerOffsetManager and SubscriptionGroupManager behave as the 5.x broker's."""

from __future__ import annotations

import pytest

from rmqtool.errors import InvalidInput, InvalidTopic
from rmqtool.store.jsonconfig import read_file
from rmqtool.store.offsets import ConsumerOffsetManager
from rmqtool.store.subscriptions import SubscriptionGroupManager
from rmqtool.store.topics import PERM_INHERIT, TopicConfigManager


def test_system_topics_are_there_from_the_start(tmp_path):
    m = TopicConfigManager(tmp_path)
    assert m.select("TBW102").perm == 7 and m.select("TBW102").write_queue_nums == 4
    assert m.select("SCHEDULE_TOPIC_XXXX").read_queue_nums == 18
    assert m.select("rmq_sys_wheel_timer").write_queue_nums == 1
    assert m.select("RMQ_SYS_TRANS_HALF_TOPIC").write_queue_nums == 1
    assert m.select("DefaultCluster").perm == 7


def test_auto_create_from_tbw102_and_persist(tmp_path):
    clock = iter(range(1000, 2000)).__next__
    m = TopicConfigManager(tmp_path, clock=clock)
    before = m.data_version.counter
    tc = m.create_in_send("TopicTest")
    assert (tc.read_queue_nums, tc.write_queue_nums, tc.perm) == (4, 4, 6)
    assert not tc.perm & PERM_INHERIT
    assert m.data_version.counter == before + 1
    data = read_file(tmp_path / "topics.json")
    assert data["topicConfigTable"]["TopicTest"]["writeQueueNums"] == 4
    assert data["topicConfigTable"]["TopicTest"]["attributes"] == {}
    m2 = TopicConfigManager(tmp_path)
    assert m2.load() and m2.select("TopicTest") == tc
    assert m2.data_version.counter == m.data_version.counter


def test_auto_create_off_refuses(tmp_path):
    m = TopicConfigManager(tmp_path, auto_create_topic_enable=False)
    with pytest.raises(InvalidTopic, match="not exist"):
        m.create_in_send("Nope")
    assert not (tmp_path / "topics.json").exists()


def test_retry_and_dlq_topics_get_one_queue(tmp_path):
    m = TopicConfigManager(tmp_path)
    assert m.create_in_send_back("%RETRY%g", 1).write_queue_nums == 1
    assert m.create_in_send_back("%DLQ%g", 1).perm == 6


def test_offsets_commit_query_and_group_topic_map(tmp_path):
    m = ConsumerOffsetManager(tmp_path)
    assert m.query_offset("g", "T", 0) == -1
    m.commit_offset("g", "T", 0, 5)
    m.commit_offset("g", "T", 3, 7)
    m.commit_offset("g", "U", 0, 1)
    m.commit_offset("h", "T", 0, 2)
    assert m.query_offset("g", "T", 3) == 7
    gtm = m.group_topic_map()
    assert sorted(gtm["g"]) == ["T", "U"] and gtm["h"] == ["T"]
    m.persist()
    text = (tmp_path / "consumerOffset.json").read_text()
    assert '"T@g":{0:5,3:7\n\t\t}' in text
    m2 = ConsumerOffsetManager(tmp_path)
    assert m2.load() and m2.offset_table == m.offset_table


def test_subscription_group_auto_create_defaults(tmp_path):
    m = SubscriptionGroupManager(tmp_path)
    cfg = m.find("groupA")
    assert (cfg.retry_max_times, cfg.retry_queue_nums) == (16, 1)
    data = read_file(tmp_path / "subscriptionGroup.json")
    assert data["subscriptionGroupTable"]["groupA"]["groupRetryPolicy"] == {"type": "CUSTOMIZED"}
    assert "TOOLS_CONSUMER" in data["subscriptionGroupTable"]
    m2 = SubscriptionGroupManager(tmp_path)
    m2.load()
    cfg.retry_max_times = 3
    m.update(cfg)
    m3 = SubscriptionGroupManager(tmp_path)
    m3.load()
    assert m3.table["groupA"].retry_max_times == 3
    with pytest.raises(InvalidInput):
        m.find("bad group!")
