"""The receipt handle a gRPC client holds (`ReceiptHandle` of Apache's rocketmq-common, as the
proxy's `createHandle` writes it): the broker's POP extraInfo plus the message's CommitLog offset.

Its own module so that the consumer activity and the renew task (which the proxy core owns)
both decode handles without importing each other.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from rmqtool.layouts.pop import real_topic
from rmqtool.proxy.status import Code, ProxyError


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

    @classmethod
    def decode(cls, text: str) -> ReceiptHandle:
        parts = text.split(" ")
        if len(parts) < 8:  # ExceptionUtils.getErrorDetailMessage of Java 5.3.3's IllegalArgumentException
            raise ProxyError(Code.INTERNAL_SERVER_ERROR,
                             f"Parse failed, dataList size {len(parts)}. IllegalArgumentException. "
                             "org.apache.rocketmq.common.consumer.ReceiptHandle.decode(ReceiptHandle.java:56)")
        try:
            clo = int(parts[8]) if len(parts) >= 9 else -1
            return cls(int(parts[0]), int(parts[1]), int(parts[2]), int(parts[3]), parts[4], parts[5],
                       int(parts[6]), int(parts[7]), clo, text)
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
