"""A client batch appended as records directly, without a MessageExt per message.

`MessageStore.put_messages` takes one object per message through the put hooks, the checks,
the encoder, the append and dispatch. A SEND_BATCH_MESSAGE (`SendMessageProcessor.sendBatchMessage`
-> `CommitLog.asyncPutMessages` with `MessageExtEncoder.encode(MessageExtBatch)`) is simpler:
one topic, one queue, one sysFlag, born time and born host for all; only flag, body and
properties differ per message. `put_batch` packs such a batch in one pass under the put lock
(each fixed part packed once with its final queue offset, position and store time, the run
copied into the mapped file with one slice assignment), then writes the queue's units in one
`put_batch` and the index keys in one `build_index_batch`.

It takes only the usual case and says so by returning None before touching anything: no
put hook that would change a message, no dispatch listener, no transaction type, the batch
fits in the current CommitLog file, no SYNC_MASTER wait on the slaves' acks. Everything else
goes through `put_messages`, which stores the same bytes (tests/store/test_batch_put.py
compares the two).
"""

from __future__ import annotations

import struct
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from rmqtool.errors import StoreError
from rmqtool.layouts import properties as P
from rmqtool.layouts.constants import (
    BORNHOST_V6_FLAG,
    END_FILE_MIN_BLANK_LENGTH,
    MAX_PROPERTIES_LENGTH,
    MESSAGE_MAGIC_CODE,
    MESSAGE_MAGIC_CODE_V2,
    SCHEDULE_TOPIC,
    STOREHOSTADDRESS_V6_FLAG,
    TRANSACTION_NOT_TYPE,
    TRANSACTION_TYPE_MASK,
)
from rmqtool.layouts.crc import crc32
from rmqtool.layouts.javahash import java_string_hash
from rmqtool.layouts.message import topic_field
from rmqtool.layouts.msgid import host_hex
from rmqtool.layouts.net import Host, pack_host

_I16 = struct.Struct(">h")
# totalSize .. bodyLength for each (bornHost v6, storeHost v6), as `encode_record_parts` packs it
_FIXED = {
    (born_v6, store_v6): struct.Struct(f">iiiiiqqiq{20 if born_v6 else 8}sq{20 if store_v6 else 8}siqi")
    for born_v6 in (False, True) for store_v6 in (False, True)
}


@dataclass(slots=True)
class BatchPutResult:
    """The outcome of one `put_batch`: where each record went, the first queue offset."""

    status: str
    store_host: Host
    wrote_offsets: list[int]
    queue_offset: int

    def offset_msg_ids(self) -> str:
        """The send answer's msgId: each record's offset msgId, comma-joined (`MessageBatch`)."""
        prefix = host_hex(self.store_host)
        return ",".join([prefix + format(o, "016X") for o in self.wrote_offsets])


class _Waiting:
    """What `HAService.handle_ha` reads of a message: its properties (WAIT)."""

    __slots__ = ("properties",)

    def __init__(self, properties: dict[str, str]) -> None:
        self.properties = properties


def hooks_pass_through(store: Any, props_list: list[dict[str, str]]) -> bool:
    """True when every put hook is the schedule hook and no message asks it for anything."""
    hooks = store.put_hooks
    if not hooks:
        return True
    if not all(getattr(h, "rmqtool_schedule_hook", False) for h in hooks):
        return False
    schedule_keys = _SCHEDULE_KEYS
    return all(d.keys().isdisjoint(schedule_keys) for d in props_list)


_SCHEDULE_KEYS = frozenset((P.DELAY, P.TIMER_DELIVER_MS, P.TIMER_DELAY_SEC, P.TIMER_DELAY_MS))


def put_batch(store: Any, topic: str, queue_id: int, sys_flag: int, born_timestamp: int, born_host: Host,
              reconsume_times: int, flags: list[int], bodies: list[bytes] | list[memoryview],
              props_list: list[dict[str, str]]) -> BatchPutResult | None:
    """Append one batch of one topic and queue, or None (nothing done) when `put_messages` must.

    The records are those `put_messages` writes for MessageExts of these fields (the store
    host is the store's, prepared transaction offset 0); `props_list` are the final property
    maps, in the order they are stored.
    """
    config = store.config
    if (store.read_only or store.closed or config.is_slave or store.dispatch_listeners
            or not store.running_flags.is_writeable() or sys_flag & TRANSACTION_TYPE_MASK != TRANSACTION_NOT_TYPE
            or topic == SCHEDULE_TOPIC or not hooks_pass_through(store, props_list)):
        return None
    ha = store.ha_service
    if ha is not None and ha.config.broker_role == "SYNC_MASTER" and ha.config.in_sync_replicas > 1:
        return None
    topic_b, topic_len = topic_field(topic)
    if not topic_b:
        return None
    store_host = store.store_host
    born_b, store_b = pack_host(born_host), pack_host(store_host)
    born_v6, store_v6 = len(born_b) == 20, len(store_b) == 20
    sys_flag &= ~(BORNHOST_V6_FLAG | STOREHOSTADDRESS_V6_FLAG)
    if born_v6:
        sys_flag |= BORNHOST_V6_FLAG
    if store_v6:
        sys_flag |= STOREHOSTADDRESS_V6_FLAG
    magic = MESSAGE_MAGIC_CODE_V2 if topic_len > 127 else MESSAGE_MAGIC_CODE
    fixed_size = 74 + (20 if born_v6 else 8) + (20 if store_v6 else 8) + len(topic_b)
    max_size = config.max_message_size
    file_size = config.mapped_file_size_commit_log
    pjoin, nvjoin, psep, i16 = P.PROPERTY_SEPARATOR.join, P.NAME_VALUE_SEPARATOR.join, P.PROPERTY_SEPARATOR, _I16.pack
    # outside the lock: everything but the queue offset, position and store time
    props_fields: list[bytes] = []
    totals: list[int] = []
    crcs: list[int] = []
    try:
        for body, props in zip(bodies, props_list, strict=True):
            props_b = (pjoin(map(nvjoin, props.items())) + psep).encode("utf-8") if props else b""
            if len(props_b) > MAX_PROPERTIES_LENGTH or len(body) > max_size:
                return None  # put_messages refuses it, with its words
            props_fields.append(i16(len(props_b)) + props_b)
            totals.append(fixed_size + len(body) + len(props_b))
            crcs.append(crc32(body) & 0x7FFFFFFF)
    except TypeError:  # a None or non-str entry: the encoder's slow path
        return None
    batch_size = sum(totals)
    if batch_size + END_FILE_MIN_BLANK_LENGTH > file_size:
        return None
    pack = _FIXED[born_v6, store_v6].pack
    cl = store.commitlog
    with cl.put_lock:
        mfq = cl.mfq
        mf = mfq.files[-1] if mfq.files else None
        if store.closed or mf is None or mf.wrote_position + batch_size + END_FILE_MIN_BLANK_LENGTH > file_size:
            return None  # a new file (and maybe a blank) first: put_messages knows how
        now = store.clock()
        table = cl.topic_queue_table
        key = (topic, queue_id)
        first_queue_offset = queue_offset = table.get(key, 0)
        start = pos = mf.wrote_position
        base = mf.from_offset
        parts: list[bytes] = []
        add = parts.extend
        offsets: list[int] = []
        units: list[tuple[int, int, int, int]] = []
        tag_codes: dict[str | None, int] = {}
        for flag, body, props, props_field, total, body_crc in zip(flags, bodies, props_list, props_fields, totals,
                                                                   crcs, strict=True):
            phys = base + pos
            add((pack(total, magic, body_crc, queue_id, flag, queue_offset, phys, sys_flag, born_timestamp, born_b,
                      now, store_b, reconsume_times, 0, len(body)), body, topic_b, props_field))
            tags = props.get(P.TAGS)
            tags_code = tag_codes.get(tags)
            if tags_code is None:
                tags_code = tag_codes[tags] = java_string_hash(tags) if tags else 0
            units.append((phys, total, tags_code, queue_offset))
            offsets.append(phys)
            queue_offset += 1
            pos += total
        cl.write_run_locked(mf, start, b"".join(parts))
        table[key] = queue_offset
        cl.last_store_timestamp = now
        store._refused = 0
        _dispatch(store, topic, queue_id, units, props_list, now)
        end = cl.max_offset
    status = "PUT_OK"
    if store.arrival_listeners:
        store._notify_arrivals(((topic, queue_id),))
    if store.sync_flush and store.flush_service is not None:
        fs = store.flush_service
        if not fs.wait_flushed(end, config.sync_flush_timeout / 1000):
            if fs.error is not None:
                raise StoreError(f"flush failed: {fs.error}")
            status = "FLUSH_DISK_TIMEOUT"
    if ha is not None:
        waiting: Iterable[_Waiting] = (_Waiting(d) for d in props_list)
        ha_status = ha.handle_ha(end, waiting)
        if ha_status is not None:
            status = str(getattr(ha_status, "value", ha_status))
    return BatchPutResult(status, store_host, offsets, first_queue_offset)


def _dispatch(store: Any, topic: str, queue_id: int, units: list[tuple[int, int, int, int]],
              props_list: list[dict[str, str]], now: int) -> None:
    """The queue's units and the index keys (`Dispatcher.dispatch_appended` for one queue)."""
    dispatcher = store.dispatcher
    try:
        dispatcher.cqs.find_or_create(topic, queue_id).put_batch(units)
        dispatcher.last_cq_store_timestamp = now
        index = dispatcher.index
        if index is not None:
            uniq, keys = P.UNIQ_KEY, P.KEYS
            index.build_index_batch([(topic, unit[0], now, props.get(uniq), props.get(keys))
                                     for unit, props in zip(units, props_list, strict=True)])
    except (StoreError, OSError) as e:
        store.dispatch_failed(e)
