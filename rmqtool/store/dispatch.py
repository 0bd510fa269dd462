"""The one dispatch path: CommitLog record -> ConsumeQueue unit and index keys (formats.md §8.2).

Like RocketMQ's ReputMessageService with CommitLogDispatcherBuildConsumeQueue and
CommitLogDispatcherBuildIndex. Recovery builds a `DispatchRequest` per record and calls
`Dispatcher.dispatch`; live appends hand a whole batch of appended records to
`Dispatcher.dispatch_appended`, which writes the same units and index entries in one pass
(tests/store/test_units.py compares the two), so a rebuilt ConsumeQueue is byte-identical to a
live one.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from rmqtool.layouts import properties as P
from rmqtool.layouts.constants import (
    BORNHOST_V6_FLAG,
    MESSAGE_MAGIC_CODE_V2,
    SCHEDULE_TOPIC,
    STOREHOSTADDRESS_V6_FLAG,
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


_HEAD = struct.Struct(">iiiiiqqiq")  # totalSize .. bornTimestamp (48 bytes)
_unpack_q = struct.Struct(">q").unpack_from
_unpack_mid = struct.Struct(">iqi").unpack_from
_unpack_i16 = struct.Struct(">h").unpack_from
_unpack_i8 = struct.Struct(">b").unpack_from


def request_from_record(buf: memoryview, pos: int, commit_log_offset: int, delay_levels_ms: list[int]) -> DispatchRequest:
    """A DispatchRequest straight from a record already checked by `check_record_fast`.

    Recovery's hot path: reads only the fields dispatch needs (no MessageExt, no body copy, no
    host decoding). Field for field the same as `request_from_message(decode_record(...))`.
    """
    (total, magic, _crc, queue_id, _flag, queue_offset, _phys, sys_flag, _born) = _HEAD.unpack_from(buf, pos)
    p = pos + 48 + (20 if sys_flag & BORNHOST_V6_FLAG else 8)
    store_ts = _unpack_q(buf, p)[0]
    p += 8 + (20 if sys_flag & STOREHOSTADDRESS_V6_FLAG else 8)
    _reconsume, prepared, body_len = _unpack_mid(buf, p)
    p += 16 + body_len
    if magic == MESSAGE_MAGIC_CODE_V2:
        topic_len = _unpack_i16(buf, p)[0]
        p += 2
    else:
        topic_len = _unpack_i8(buf, p)[0]
        p += 1
    topic = str(buf[p : p + topic_len], "utf-8", "replace")
    p += topic_len
    props_len = _unpack_i16(buf, p)[0]
    p += 2
    props = P.decode_properties(str(buf[p : p + props_len], "utf-8", "replace"))
    return DispatchRequest(
        topic, queue_id, commit_log_offset, total, tags_code_of(topic, props, store_ts, delay_levels_ms), store_ts,
        queue_offset, props.get(P.KEYS), props.get(P.UNIQ_KEY), sys_flag, prepared, props,
    )


class Dispatcher:
    """Builds ConsumeQueue units and index entries, then tells the listeners.

    `index` is the store's IndexService, None without an index, or the index process's stand-in
    (indexclient.IndexProcess) whose build calls only publish the CommitLog offset.
    """

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

    def dispatch_appended(self, msgs: list[MessageExt], store_timestamp: int, delay_levels_ms: list[int],
                          requests: list[DispatchRequest] | None = None) -> Iterable[tuple[str, int]]:
        """`dispatch` for records just appended (offsets filled in by the CommitLog), in order.

        The units of one queue are written together and the index keys of all records hashed
        together; the files come out byte for byte as from one `dispatch` per record (the path
        recovery takes). With `requests`, the DispatchRequests for the listeners are added to it.
        Returns the (topic, queueId) pairs that got units, each once, for arrival listeners.
        """
        if len(msgs) == 1 and requests is None:  # a single put: the per-record path, no batch bookkeeping
            msg = msgs[0]
            props = msg.properties
            topic = msg.topic
            tran = msg.sys_flag & TRANSACTION_TYPE_MASK
            if tran == TRANSACTION_NOT_TYPE or tran == TRANSACTION_COMMIT_TYPE:
                tags_code = tags_code_of(topic, props, store_timestamp, delay_levels_ms)
                self.cqs.find_or_create(topic, msg.queue_id).put(msg.commit_log_offset, msg.total_size, tags_code,
                                                                 msg.queue_offset)
                self.last_cq_store_timestamp = store_timestamp
                arrived: Iterable[tuple[str, int]] = ((topic, msg.queue_id),)
            else:
                arrived = ()
            if self.index is not None and tran != TRANSACTION_ROLLBACK_TYPE:
                self.index.build_index(topic, msg.commit_log_offset, store_timestamp, props.get(P.UNIQ_KEY),
                                       props.get(P.KEYS), store_timestamp)
            return arrived
        units: dict[tuple[str, int], list[tuple[int, int, int, int]]] = {}
        indexing = self.index is not None
        # the index keys in columns, one entry per indexed record, each in record order
        key_topics: list[str] = []
        key_phys: list[int] = []
        key_uniqs: list[str | None] = []
        key_texts: list[str | None] = []
        add_topic, add_phy, add_uniq, add_text = key_topics.append, key_phys.append, key_uniqs.append, key_texts.append
        has_cq_unit = False
        tag_codes: dict[str | None, int] = {}  # String.hashCode of each TAGS value, once per batch
        uniq_name, keys_name = P.UNIQ_KEY, P.KEYS
        for msg in msgs:
            props = msg.properties
            topic = msg.topic
            if topic == SCHEDULE_TOPIC:
                tags_code = tags_code_of(topic, props, store_timestamp, delay_levels_ms)
            else:
                tags = props.get(P.TAGS)
                tags_code = tag_codes.get(tags)  # type: ignore[assignment]
                if tags_code is None:
                    tags_code = tag_codes[tags] = java_string_hash(tags) if tags else 0
            sys_flag = msg.sys_flag
            tran = sys_flag & TRANSACTION_TYPE_MASK
            if tran == TRANSACTION_NOT_TYPE or tran == TRANSACTION_COMMIT_TYPE:
                queue = units.get((topic, msg.queue_id))
                if queue is None:
                    units[topic, msg.queue_id] = queue = []
                queue.append((msg.commit_log_offset, msg.total_size, tags_code, msg.queue_offset))
                has_cq_unit = True
            if indexing and tran != TRANSACTION_ROLLBACK_TYPE:
                add_topic(topic)
                add_phy(msg.commit_log_offset)
                add_uniq(props.get(uniq_name))
                add_text(props.get(keys_name))
            if requests is not None:
                requests.append(DispatchRequest(
                    topic, msg.queue_id, msg.commit_log_offset, msg.total_size, tags_code, store_timestamp,
                    msg.queue_offset, props.get(P.KEYS), props.get(P.UNIQ_KEY), sys_flag,
                    msg.prepared_transaction_offset, props))
        find = self.cqs.find_or_create
        for (topic, queue_id), queue in units.items():
            find(topic, queue_id).put_batch(queue)
        if has_cq_unit:
            self.last_cq_store_timestamp = store_timestamp
        if key_phys:
            assert self.index is not None
            build_index_columns(self.index, key_topics, store_timestamp, key_phys, key_uniqs, key_texts)
        return units.keys()


def build_index_columns(index: IndexService, topics: list[str], store_timestamp: int, phys: list[int],
                        uniq_keys: list[str | None], key_texts: list[str | None]) -> None:
    """The index keys of appended records of one store time, given column by column: the
    appenders' one call point, `index.build_index_columns` whether the index is built here
    (`IndexService`) or by a second process (indexclient.IndexProcess), with no test between."""
    index.build_index_columns(topics, store_timestamp, phys, uniq_keys, key_texts)
