"""Request checks of Apache's proxy (`GrpcValidator`, client `Validators`), with its messages."""

from __future__ import annotations

import re

from rmqtool.proxy.status import Code, ProxyError
from rmqtool.validators import is_system_topic

TOPIC_MAX_LENGTH = 127  # client Validators.TOPIC_MAX_LENGTH
GROUP_MAX_LENGTH = 120
_LEGAL = re.compile(r"[%|a-zA-Z0-9_-]+\Z")
_PATTERN = "^[%|a-zA-Z0-9_-]+$"
SYS_GROUP_PREFIX = "CID_RMQ_SYS_"
# Guava's CharMatcher.javaIsoControl: U+0000-U+001F and U+007F-U+009F
_CONTROL = re.compile("[\u0000-\u001f\u007f-\u009f]")


def is_blank(s: str) -> bool:
    return not s.strip()


def contains_control_character(s: str) -> bool:
    return _CONTROL.search(s) is not None


def validate_topic(name: str) -> None:
    """`GrpcValidator.validateTopic`: ILLEGAL_TOPIC for a bad name or a system topic."""
    if not name or is_blank(name):
        raise ProxyError(Code.ILLEGAL_TOPIC, "The specified topic is blank")
    if len(name) > TOPIC_MAX_LENGTH:
        raise ProxyError(Code.ILLEGAL_TOPIC, f"The specified topic is longer than topic max length {TOPIC_MAX_LENGTH}.")
    if _LEGAL.match(name) is None:
        raise ProxyError(Code.ILLEGAL_TOPIC,
                         f"The specified topic[{name}] contains illegal characters, allowing only {_PATTERN}")
    if is_system_topic(name):
        raise ProxyError(Code.ILLEGAL_TOPIC, "cannot access system topic")


def validate_consumer_group(name: str) -> None:
    """`GrpcValidator.validateConsumerGroup`."""
    if not name or is_blank(name):
        raise ProxyError(Code.ILLEGAL_CONSUMER_GROUP, "the specified group is blank")
    if len(name) > GROUP_MAX_LENGTH:
        raise ProxyError(Code.ILLEGAL_CONSUMER_GROUP,
                         f"the specified group[{name}] is longer than group max length: {GROUP_MAX_LENGTH}.")
    if _LEGAL.match(name) is None:
        raise ProxyError(Code.ILLEGAL_CONSUMER_GROUP,
                         f"the specified group[{name}] contains illegal characters, allowing only {_PATTERN}")
    if name.startswith(SYS_GROUP_PREFIX):
        raise ProxyError(Code.ILLEGAL_CONSUMER_GROUP, "cannot use system consumer group")


def validate_tag(tag: str) -> None:
    if tag:
        if is_blank(tag):
            raise ProxyError(Code.ILLEGAL_MESSAGE_TAG, "tag cannot be the char sequence of whitespace")
        if "|" in tag:
            raise ProxyError(Code.ILLEGAL_MESSAGE_TAG, "tag cannot contain '|'")
        if contains_control_character(tag):
            raise ProxyError(Code.ILLEGAL_MESSAGE_TAG, "tag cannot contain control character")


def validate_invisible_time(ms: int, min_ms: int = 0, max_ms: int = 12 * 3600 * 1000) -> None:
    """`GrpcValidator.validateInvisibleTime` (maxInvisibleTimeMills: 12 h)."""
    if ms < min_ms:
        raise ProxyError(Code.ILLEGAL_INVISIBLE_TIME, f"the invisibleTime is too small. min is {min_ms}")
    if max_ms > 0 and ms > max_ms:
        raise ProxyError(Code.ILLEGAL_INVISIBLE_TIME, f"the invisibleTime is too large. max is {max_ms}")
