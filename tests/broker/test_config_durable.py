"""Topic and group changes are on disk when the broker answers (Java's TopicConfigManager and
SubscriptionGroupManager persist in the request); consumer offsets are written periodically."""

from __future__ import annotations

from rmqtool.store.jsonconfig import read_file
from tests.broker.conftest import heartbeat_body, sub_data


def _topics(serve) -> dict:
    return read_file(serve.store / "config" / "topics.json")["topicConfigTable"]


def _groups(serve) -> dict:
    return read_file(serve.store / "config" / "subscriptionGroup.json")["subscriptionGroupTable"]


def test_a_created_topic_is_in_topics_json_when_the_answer_comes(serve, broker):
    for i in range(5):
        r = broker.request(17, {"topic": f"DurableTopic{i}", "defaultTopic": "TBW102", "readQueueNums": "2",
                                "writeQueueNums": "2", "perm": "6", "topicFilterType": "SINGLE_TAG",
                                "topicSysFlag": "0", "order": "false"})
        assert r.code == 0, r.remark
        assert _topics(serve)[f"DurableTopic{i}"]["writeQueueNums"] == 2  # read at once, not after a window
    assert broker.request(215, {"topic": "DurableTopic0"}).code == 0  # DELETE_TOPIC_IN_BROKER
    assert "DurableTopic0" not in _topics(serve)


def test_a_created_or_deleted_group_is_in_subscription_group_json_when_the_answer_comes(serve, broker):
    import json

    body = json.dumps({"groupName": "DurableGroup", "consumeEnable": True, "consumeBroadcastEnable": True,
                       "retryQueueNums": 1, "retryMaxTimes": 16, "brokerId": 0, "whichBrokerWhenConsumeSlowly": 1,
                       "notifyConsumerIdsChangedEnable": True}).encode()
    assert broker.request(200, body=body).code == 0  # UPDATE_AND_CREATE_SUBSCRIPTIONGROUP
    assert "DurableGroup" in _groups(serve)
    assert broker.request(207, {"groupName": "DurableGroup"}).code == 0  # DELETE_SUBSCRIPTIONGROUP
    assert "DurableGroup" not in _groups(serve)


def test_a_heartbeat_that_creates_a_group_answers_after_it_is_written(serve, broker):
    hb = heartbeat_body("127.0.0.1@durable", "DurableHeartbeatGroup", [sub_data("DurableTopic1")])
    assert broker.request(34, body=hb).code == 0
    assert "DurableHeartbeatGroup" in _groups(serve)
    assert "%RETRY%DurableHeartbeatGroup" in _topics(serve)
