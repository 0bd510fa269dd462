"""The one dispatch path: CommitLog record -> ConsumeQueue unit and index keys (formats.md §8.2).

Like RocketMQ's ReputMessageService with CommitLogDispatcherBuildConsumeQueue and
CommitLogDispatcherBuildIndex. Live appends and recovery both build a `DispatchRequest` and call
`Dispatcher.dispatch`, so a rebuilt ConsumeQueue is byte-identical to a live one.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from rmqtool.layouts import properties as P
from rmqtool.layouts.constants import (
    SCHEDULE_TOPIC,
    TRANSACTION_COMMIT_TYPE,
    TRANSACTION_NOT_TYPE,
    TRANSACTION_ROLLBACK_TYPE,
    TRANSACTION_TYPE_MASK,
)
from rmqtool.layouts.javahash import java_string_hash
from rmqtool.layouts.message import MessageExt
from rmqtool.store.consumequeue import ConsumeQueueStore
from rmqtool.store.index import IndexService


@dataclass(slots=True)
class DispatchRequest:
    """What a dispatcher learns about one appended record (RocketMQ's DispatchRequest)."""

    topic: str
    queue_id: int
    commit_log_offset: int
    msg_size: int
    tags_code: int
    store_timestamp: int
    consume_queue_offset: int
    keys: str | None
    uniq_key: str | None
    sys_flag: int
    prepared_transaction_offset: int
    properties: dict[str, str]


def tags_code_of(topic: str, properties: dict[str, str], store_timestamp: int, delay_levels_ms: list[int]) -> int:
    """tagsCode (§3.2): String.hashCode() of TAGS (0 without), or the delivery time on SCHEDULE_TOPIC_XXXX."""
    tags = properties.get(P.TAGS)
    code = java_string_hash(tags) if tags else 0
    if topic == SCHEDULE_TOPIC:
        delay = properties.get(P.DELAY)
        if delay is not None:
            try:
                level = int(delay)
            except ValueError:
                return code
            level = min(level, len(delay_levels_ms))
            if level > 0:
                return store_timestamp + delay_levels_ms[level - 1]
    return code


def request_from_message(msg: MessageExt, delay_levels_ms: list[int]) -> DispatchRequest:
    """A DispatchRequest for a decoded record (recovery and re-dispatch)."""
    props = msg.properties
    return DispatchRequest(
        msg.topic, msg.queue_id, msg.commit_log_offset, msg.total_size,
        tags_code_of(msg.topic, props, msg.store_timestamp, delay_levels_ms), msg.store_timestamp,
        msg.queue_offset, props.get(P.KEYS), props.get(P.UNIQ_KEY), msg.sys_flag, msg.prepared_transaction_offset,
        props,
    )


class Dispatcher:
    """Builds ConsumeQueue units and index entries, then tells the listeners."""

    def __init__(self, cqs: ConsumeQueueStore, index: IndexService | None, clock: Callable[[], int]) -> None:
        self.cqs = cqs
        self.index = index
        self.clock = clock
        self.last_cq_store_timestamp = 0  # store time of the newest record with a CQ unit

    def dispatch(self, req: DispatchRequest) -> None:
        tran = req.sys_flag & TRANSACTION_TYPE_MASK
        if tran == TRANSACTION_NOT_TYPE or tran == TRANSACTION_COMMIT_TYPE:
            self.cqs.find_or_create(req.topic, req.queue_id).put(
                req.commit_log_offset, req.msg_size, req.tags_code, req.consume_queue_offset)
            self.last_cq_store_timestamp = req.store_timestamp
        if self.index is not None and tran != TRANSACTION_ROLLBACK_TYPE:
            self.index.build_index(req.topic, req.commit_log_offset, req.store_timestamp, req.uniq_key, req.keys,
                                   req.store_timestamp)
