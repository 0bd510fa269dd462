"""Validators agree with RocketMQ's Validators/TopicValidator."""

from __future__ import annotations

import pytest

from rmqtool.errors import InvalidInput, InvalidMessage, InvalidTopic
from rmqtool.layouts.message import MessageExt
from rmqtool.validators import check_group, check_message, check_send_topic, check_topic, is_system_topic


@pytest.mark.parametrize("topic", ["TopicTest", "a", "%RETRY%g", "a|b", "A-b_9", "x" * 127, "%DLQ%" + "g" * 250])
def test_good_topics(topic):
    check_topic(topic)


@pytest.mark.parametrize("topic", ["", "  ", "a b", "a.b", "topic/x", "é", "x" * 128, "%RETRY%" + "g" * 249])
def test_bad_topics(topic):
    with pytest.raises(InvalidTopic):
        check_topic(topic)


@pytest.mark.parametrize("topic", ["SCHEDULE_TOPIC_XXXX", "RMQ_SYS_TRANS_HALF_TOPIC", "RMQ_SYS_TRANS_OP_HALF_TOPIC",
                                   "SELF_TEST_TOPIC", "OFFSET_MOVED_EVENT", "TRANS_CHECK_MAX_TIME_TOPIC", "TBW102",
                                   "rmq_sys_wheel_timer"])
def test_system_topics_refused_for_sends(topic):
    with pytest.raises(InvalidTopic, match="forbidden"):
        check_send_topic(topic)


def test_java_exact_mode_only_refuses_not_allowed_set():
    check_send_topic("TBW102", strict=False)
    check_send_topic("BenchmarkTest")
    assert is_system_topic("TBW102") and is_system_topic("rmq_sys_x") and not is_system_topic("TopicTest")


def test_groups():
    check_group("rmqtool")
    for bad in ("", "a b", "g" * 121):
        with pytest.raises(InvalidInput):
            check_group(bad)


def test_message_limits():
    check_message(MessageExt("T", b"x"))
    check_message(MessageExt("T", b"x" * 4194304))
    with pytest.raises(InvalidMessage, match="zero"):
        check_message(MessageExt("T", b""))
    with pytest.raises(InvalidMessage, match="over the max"):
        check_message(MessageExt("T", b"x" * 4194305))
    with pytest.raises(InvalidMessage, match="32767"):
        check_message(MessageExt("T", b"x", properties={"K": "v" * 32765}))
    check_message(MessageExt("T", b"x", properties={"K": "v" * (32767 - 3)}))


def test_send_topic_ok_answers_as_check_send_topic_and_keeps_its_answers():
    from rmqtool.validators import send_topic_ok

    for topic in ("TopicTest", "%RETRY%g", "bad topic", "TBW102", "rmq_sys_wheel_timer", "SCHEDULE_TOPIC_XXXX",
                  "x" * 128, "x" * 127):
        try:
            check_send_topic(topic)
            passes = True
        except InvalidInput:  # InvalidTopic among them
            passes = False
        assert send_topic_ok(topic) is passes, topic
        assert send_topic_ok(topic) is passes, topic  # the kept answer
    assert send_topic_ok.cache_info().maxsize == 1024
