"""The receipt handle a gRPC client holds (`ReceiptHandle` of Apache's rocketmq-common, as the
proxy's `createHandle` writes it): the broker's POP extraInfo plus the message's CommitLog offset.

Its own module so that the consumer activity and the renew task (which the proxy core owns)
both make and decode handles without importing each other.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from rmqtool.layouts.pop import real_topic
from rmqtool.proxy.status import Code, ProxyError

SEPARATOR = " "  # MessageConst.KEY_SEPARATOR


def create_handle(extra_info: str, commit_log_offset: int) -> str:
    """`ConsumerProcessor.createHandle`: the broker's extraInfo (POP_CK) and the CommitLog offset."""
    return f"{extra_info}{SEPARATOR}{commit_log_offset}"


def _java_split(text: str) -> list[str]:
    """`String.split(" ")`: the trailing empty strings go (a handle ending in a space has one field
    fewer, blanks alone none); a text without a blank is the one field."""
    parts = text.split(SEPARATOR)
    if len(parts) > 1:
        while parts and parts[-1] == "":
            parts.pop()
    return parts


def _java_int(field: str, bits: int) -> int:
    """`Long.parseLong` (bits 64) / `Integer.parseInt` (32): an optional sign and digits only, in
    range; Python's int() would also take blanks around them and underscores between. ValueError
    with Java's message otherwise."""
    try:
        if field == field.strip() and "_" not in field:
            value = int(field)
            if -(1 << (bits - 1)) <= value < 1 << (bits - 1):
                return value
    except ValueError:
        pass
    raise ValueError(f'For input string: "{field}"')  # NumberFormatException.forInputString


@dataclass
class ReceiptHandle:
    """`ReceiptHandle.decode`: eight extraInfo fields, then the CommitLog offset (-1 without)."""

    start_offset: int
    retrieve_time: int
    invisible_time: int
    revive_queue_id: int
    topic_type: str
    broker_name: str
    queue_id: int
    offset: int
    commit_log_offset: int
    text: str

    def encode(self) -> str:
        """`ReceiptHandle.encode`: the nine fields, the CommitLog offset last."""
        return SEPARATOR.join(str(v) for v in (
            self.start_offset, self.retrieve_time, self.invisible_time, self.revive_queue_id, self.topic_type,
            self.broker_name, self.queue_id, self.offset, self.commit_log_offset))

    @classmethod
    def decode(cls, text: str) -> ReceiptHandle:
        parts = _java_split(text)
        if len(parts) < 8:  # ExceptionUtils.getErrorDetailMessage of Java 5.3.3's IllegalArgumentException
            raise ProxyError(Code.INTERNAL_SERVER_ERROR,
                             f"Parse failed, dataList size {len(parts)}. IllegalArgumentException. "
                             "org.apache.rocketmq.common.consumer.ReceiptHandle.decode(ReceiptHandle.java:56)")
        try:
            clo = _java_int(parts[8], 64) if len(parts) >= 9 else -1
            return cls(_java_int(parts[0], 64), _java_int(parts[1], 64), _java_int(parts[2], 64),
                       _java_int(parts[3], 32), parts[4], parts[5], _java_int(parts[6], 32), _java_int(parts[7], 64),
                       clo, text)
        except ValueError as e:
            raise ProxyError(Code.INTERNAL_SERVER_ERROR, f"NumberFormatException: {e}") from None

    @property
    def expired(self) -> bool:
        return self.retrieve_time + self.invisible_time <= int(time.time() * 1000)

    def real_topic(self, topic: str, group: str) -> str:
        try:
            return real_topic(topic, group, self.topic_type)
        except ValueError as e:
            raise ProxyError(Code.INTERNAL_SERVER_ERROR, str(e)) from None
