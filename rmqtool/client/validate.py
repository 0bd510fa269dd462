"""Client-side checks of `Validators` (protocol.md §7.1 step 1), before anything goes on the wire.

Raise `InvalidTopic` / `InvalidMessage` (exit 2 in the CLI) with Java's messages.
"""

from __future__ import annotations

import re

from rmqtool.errors import InvalidInput, InvalidMessage, InvalidTopic
from rmqtool.layouts.constants import DEFAULT_MAX_MESSAGE_SIZE, TOPIC_MAX_LENGTH

VALID_PATTERN = re.compile(r"^[%|a-zA-Z0-9_-]+$")
CHARACTER_MAX_LENGTH = 255
NOT_ALLOWED_SEND_TOPICS = {"SCHEDULE_TOPIC_XXXX", "RMQ_SYS_TRANS_HALF_TOPIC", "RMQ_SYS_TRANS_OP_HALF_TOPIC",
                           "TRANS_CHECK_MAX_TIME_TOPIC", "SELF_TEST_TOPIC", "OFFSET_MOVED_EVENT"}


def check_topic(topic: str) -> None:
    if not topic or not topic.strip():
        raise InvalidTopic("The specified topic is blank")
    if len(topic) > TOPIC_MAX_LENGTH:
        raise InvalidTopic(f"The specified topic is longer than topic max length {TOPIC_MAX_LENGTH}.")
    if not VALID_PATTERN.match(topic):
        raise InvalidTopic(f"The specified topic[{topic}] contains illegal characters, allowing only "
                           f"{VALID_PATTERN.pattern}")


def check_group(group: str) -> None:
    if not group or not group.strip():
        raise InvalidInput("the specified group is blank")
    if len(group) > CHARACTER_MAX_LENGTH:
        raise InvalidInput("the specified group is longer than group max length 255.")
    if not VALID_PATTERN.match(group):
        raise InvalidInput(f"the specified group[{group}] contains illegal characters, allowing only "
                           f"{VALID_PATTERN.pattern}")


def check_message(topic: str, body: bytes | None, max_message_size: int = DEFAULT_MAX_MESSAGE_SIZE) -> None:
    check_topic(topic)
    if topic in NOT_ALLOWED_SEND_TOPICS:
        raise InvalidTopic(f"Sending message to topic[{topic}] is forbidden.")
    if body is None:
        raise InvalidMessage("the message body is null")
    if len(body) == 0:
        raise InvalidMessage("the message body length is zero")
    if len(body) > max_message_size:
        raise InvalidMessage(f"the message body size over max value, MAX: {max_message_size}")
