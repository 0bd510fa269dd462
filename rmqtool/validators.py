"""What RocketMQ refuses before storing: `client/.../Validators` and `common/.../topic/TopicValidator`.

Topic and group names use the characters of `^[%|a-zA-Z0-9_-]+$`; topics are at most 127
characters (255 for `%RETRY%`/`%DLQ%` topics, which the broker accepts), groups at most 120.
User sends to the NOT_ALLOWED_SEND_TOPIC set are refused. Bodies are 1 byte .. maxMessageSize
(4 MiB by default); the properties string must fit PROPERTIESLENGTH (int16, 32767 bytes).
Each failure is one line, raised as InvalidTopic / InvalidMessage (exit 2).
"""

from __future__ import annotations

import functools
import re

from rmqtool.errors import InvalidInput, InvalidMessage, InvalidTopic
from rmqtool.layouts.constants import (
    AUTO_CREATE_TOPIC_KEY,
    DEFAULT_MAX_MESSAGE_SIZE,
    DLQ_GROUP_TOPIC_PREFIX,
    MAX_PROPERTIES_LENGTH,
    RETRY_DLQ_TOPIC_MAX_LENGTH,
    RETRY_GROUP_TOPIC_PREFIX,
    SCHEDULE_TOPIC,
    TOPIC_MAX_LENGTH,
    TRANS_HALF_TOPIC,
    TRANS_OP_HALF_TOPIC,
)
from rmqtool.layouts.properties import encode_properties

GROUP_MAX_LENGTH = 120
VALID_PATTERN = "^[%|a-zA-Z0-9_-]+$"
_VALID = re.compile(r"[%|a-zA-Z0-9_-]+\Z")
SYSTEM_TOPIC_PREFIX = "rmq_sys_"

# TopicValidator.SYSTEM_TOPIC_SET (static part)
SYSTEM_TOPICS = frozenset({
    AUTO_CREATE_TOPIC_KEY, SCHEDULE_TOPIC, "BenchmarkTest", TRANS_HALF_TOPIC, "RMQ_SYS_TRACE_TOPIC",
    TRANS_OP_HALF_TOPIC, "TRANS_CHECK_MAX_TIME_TOPIC", "SELF_TEST_TOPIC", "OFFSET_MOVED_EVENT",
    "CHECKPOINT_TOPIC",
})
# TopicValidator.NOT_ALLOWED_SEND_TOPIC_SET
NOT_ALLOWED_SEND_TOPICS = frozenset({
    SCHEDULE_TOPIC, TRANS_HALF_TOPIC, TRANS_OP_HALF_TOPIC, "TRANS_CHECK_MAX_TIME_TOPIC", "SELF_TEST_TOPIC",
    "OFFSET_MOVED_EVENT",
})


def is_topic_or_group_illegal(name: str) -> bool:
    """`TopicValidator.isTopicOrGroupIllegal`: any char outside `%|a-zA-Z0-9_-`."""
    return _VALID.match(name) is None


def is_system_topic(topic: str) -> bool:
    """`TopicValidator.isSystemTopic`."""
    return topic in SYSTEM_TOPICS or topic.startswith(SYSTEM_TOPIC_PREFIX)


def is_not_allowed_send_topic(topic: str) -> bool:
    return topic in NOT_ALLOWED_SEND_TOPICS


def is_retry_or_dlq(topic: str) -> bool:
    return topic.startswith(RETRY_GROUP_TOPIC_PREFIX) or topic.startswith(DLQ_GROUP_TOPIC_PREFIX)


def check_topic(topic: str | None) -> None:
    """`TopicValidator.validateTopic` (the broker's check; retry/DLQ topics may be 255 long)."""
    if topic is None or not topic.strip():
        raise InvalidTopic("the specified topic is blank")
    if is_topic_or_group_illegal(topic):
        raise InvalidTopic(f"the specified topic {topic!r} contains illegal characters, allowing only {VALID_PATTERN}")
    limit = RETRY_DLQ_TOPIC_MAX_LENGTH if is_retry_or_dlq(topic) else TOPIC_MAX_LENGTH
    if len(topic) > limit:
        raise InvalidTopic(f"the specified topic is {len(topic)} characters long, longer than the max {limit}")


@functools.lru_cache(maxsize=1024)
def validate_topic_remark(topic: str) -> str | None:
    """`TopicValidator.validateTopic` in Java's words, for the broker's INVALID_PARAMETER answers
    (None: valid). The length limit is `check_topic`'s (255 for retry and dead-letter topics).

    Every send asks it of its topic: the answers of the last 1,024 names are kept (a look-up
    in C instead of three Python calls; bounded whatever names clients send)."""
    if not topic.strip():
        return "The specified topic is blank."
    if is_topic_or_group_illegal(topic):
        return f"The specified topic contains illegal characters, allowing only {VALID_PATTERN}"
    if len(topic) > (RETRY_DLQ_TOPIC_MAX_LENGTH if is_retry_or_dlq(topic) else TOPIC_MAX_LENGTH):
        return "The specified topic is longer than topic max length."
    return None


def check_send_topic(topic: str | None, *, strict: bool = True) -> None:
    """`checkTopic` + `isNotAllowedSendTopic`: what a producer may send to.

    `strict` (rmqtool's own sends) also refuses `TBW102` and every `rmq_sys_` topic (the timer
    wheel, revive logs), which the Java broker would store but only confuse its own services;
    `BenchmarkTest` and the trace topic stay allowed because RocketMQ's tools send to them.
    """
    check_topic(topic)
    assert topic is not None
    if is_not_allowed_send_topic(topic) or (
        strict and (topic == AUTO_CREATE_TOPIC_KEY or topic.startswith(SYSTEM_TOPIC_PREFIX))
    ):
        raise InvalidTopic(f"sending message to topic[{topic}] is forbidden (system topic)")


@functools.lru_cache(maxsize=1024)
def send_topic_ok(topic: str) -> bool:
    """Whether `check_send_topic(topic)` passes, for a caller that takes another path when it does
    not: the answers of the last 1,024 names kept (a look-up in C instead of five Python calls)."""
    try:
        check_send_topic(topic)
    except InvalidInput:
        return False
    return True


def check_group(group: str | None) -> None:
    """`Validators.checkGroup` / `TopicValidator.validateGroup`."""
    if group is None or not group.strip():
        raise InvalidInput("the specified group is blank")
    if len(group) > GROUP_MAX_LENGTH:
        raise InvalidInput(f"the specified group is {len(group)} characters long, longer than the max {GROUP_MAX_LENGTH}")
    if is_topic_or_group_illegal(group):
        raise InvalidInput(f"the specified group {group!r} contains illegal characters, allowing only {VALID_PATTERN}")


def check_body(body: bytes | None, max_size: int = DEFAULT_MAX_MESSAGE_SIZE) -> None:
    if body is None:
        raise InvalidMessage("the message body is null")
    if len(body) == 0:
        raise InvalidMessage("the message body length is zero")
    if len(body) > max_size:
        raise InvalidMessage(f"the message body size {len(body)} is over the max value {max_size}")


def check_properties(props: dict[str, str]) -> None:
    """The broker's `PROPERTIES_SIZE_EXCEEDED` (int16 PROPERTIESLENGTH) and separator sanity."""
    if props and "" not in props:
        # the usual map (str keys and values), checked on its encoded text: a separator inside
        # a key or value shows up as one \x01 / \x02 too many; anything else takes the loop below
        try:
            text = "\x02".join(map("\x01".join, props.items()))
        except TypeError:
            text = None
        n = len(props)
        if text is not None and text.count("\x01") == n and text.count("\x02") == n - 1:
            size = (len(text) if text.isascii() else len(text.encode("utf-8"))) + 1
            if size > MAX_PROPERTIES_LENGTH:
                raise InvalidMessage(f"the message properties are {size} bytes, over the max {MAX_PROPERTIES_LENGTH}")
            return
    for k, v in props.items():
        if not k or "\x01" in k or "\x02" in k or (v is not None and ("\x01" in v or "\x02" in v)):
            raise InvalidMessage(f"property {k!r} contains a separator character (\\x01 or \\x02) or is empty")
    size = len(encode_properties(props).encode("utf-8"))
    if size > MAX_PROPERTIES_LENGTH:
        raise InvalidMessage(f"the message properties are {size} bytes, over the max {MAX_PROPERTIES_LENGTH}")


def check_message(msg: object, max_size: int = DEFAULT_MAX_MESSAGE_SIZE, *, user_send: bool = True,
                  strict: bool = True) -> None:
    """`Validators.checkMessage` (+ the broker's properties length check) for a `MessageExt`."""
    topic = getattr(msg, "topic", None)
    if user_send:
        check_send_topic(topic, strict=strict)
    else:
        check_topic(topic)
    check_body(getattr(msg, "body", None), max_size)
    check_properties(getattr(msg, "properties", {}) or {})
