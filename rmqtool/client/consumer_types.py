"""The push and pull consumers' shared vocabulary: message models, where to start, the listener's
context and its way to stop (`MessageModel`, `ConsumeFromWhere`, `ConsumeConcurrentlyContext`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from rmqtool.client.message import ConsumeStatus, MessageQueue
from rmqtool.layouts.constants import RETRY_GROUP_TOPIC_PREFIX
from rmqtool.layouts.message import MessageExt

CLUSTERING = "CLUSTERING"
BROADCASTING = "BROADCASTING"
CONSUME_FROM_LAST_OFFSET = "CONSUME_FROM_LAST_OFFSET"
CONSUME_FROM_FIRST_OFFSET = "CONSUME_FROM_FIRST_OFFSET"
CONSUME_FROM_TIMESTAMP = "CONSUME_FROM_TIMESTAMP"
INNER_PRODUCER_GROUP = "CLIENT_INNER_PRODUCER"


class StopConsuming(Exception):
    """Raised by a listener to leave its messages unconsumed and uncommitted (no retry is sent)."""


@dataclass
class ConsumeContext:
    message_queue: MessageQueue
    delay_level_when_next_consume: int = 0  # concurrently: 0 lets the broker pick 3 + reconsumeTimes
    orderly: bool = False


Listener = Callable[[list[MessageExt], ConsumeContext], ConsumeStatus | None]


def retry_topic(group: str) -> str:
    """`MixAll.getRetryTopic`: the group's %RETRY% topic."""
    return RETRY_GROUP_TOPIC_PREFIX + group
