"""A client batch appended as records directly, without a MessageExt per message.

`MessageStore.put_messages` takes one object per message through the put hooks, the checks,
the encoder, the append and dispatch. A SEND_BATCH_MESSAGE (`SendMessageProcessor.sendBatchMessage`
-> `CommitLog.asyncPutMessages` with `MessageExtEncoder.encode(MessageExtBatch)`) is simpler:
one topic, one queue, one sysFlag, born time and born host for all; only flag, body and
properties differ per message. `put_batch` packs such a batch in one pass under the put lock
(each fixed part packed once with its final queue offset, position and store time, the run
copied into the mapped file with one slice assignment), then writes the queue's units in one
`put_batch` and the index keys in one `build_index_batch`. `put_bodies` is the same for bodies
that share one property map but for their UNIQ_KEY (a shell's lines, `rmqtool send --batch`):
the map is encoded once and each record's properties are its two halves around its id.

It takes only the usual case and says so by returning None before touching anything: no
put hook that would change a message, no dispatch listener, no transaction type, the batch
fits in the current CommitLog file, no SYNC_MASTER wait on the slaves' acks. Everything else
goes through `put_messages`, which stores the same bytes (tests/store/test_batch_put.py
compares the two).
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from itertools import accumulate, chain, repeat
from operator import add
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
from rmqtool.layouts.msgid import create_offset_msg_ids
from rmqtool.layouts.net import Host, pack_host
from rmqtool.store.diskspace import DiskFull
from rmqtool.store.dispatch import build_index_columns

_I16 = struct.Struct(">h")
_MASK31 = 0x7FFFFFFF  # a record's bodyCRC: crc32 & 0x7FFFFFFF
# each record's UNIQ_KEY and KEYS values, the two columns of its index keys
_IndexColumns = tuple[list["str | None"], list["str | None"]]
# totalSize .. bodyLength, as `encode_record_parts` packs it, in two parts: what differs per record
# (totalSize .. physicalOffset, then the middle as one field, then bodyLength) and the middle, which
# is the same for every record of a batch (sysFlag, bornTimestamp, bornHost, storeTimestamp,
# storeHost, reconsumeTimes, preparedTransactionOffset): packed once, it saves each record five
# integer conversions (three of them 64-bit, which struct makes big-endian the slow way)
_MIDDLE = {
    (born_v6, store_v6): struct.Struct(f">iq{20 if born_v6 else 8}sq{20 if store_v6 else 8}siq")
    for born_v6 in (False, True) for store_v6 in (False, True)
}
_EACH = {size: struct.Struct(f">iiiiiqq{size}si") for size in {m.size for m in _MIDDLE.values()}}


@dataclass(slots=True)
class BatchPutResult:
    """The outcome of one `put_batch`: where each record went, the first queue offset."""

    status: str
    store_host: Host
    wrote_offsets: list[int]
    queue_offset: int
    queue_offsets: list[int] | None = None  # each record's, when they went to several queues

    def offset_msg_ids(self) -> str:
        """The send answer's msgId: each record's offset msgId, comma-joined (`MessageBatch`)."""
        return create_offset_msg_ids(self.store_host, self.wrote_offsets)


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
    return all(map(_SCHEDULE_KEYS.isdisjoint, props_list))  # in C: each map's keys against the set


_SCHEDULE_KEYS = frozenset((P.DELAY, P.TIMER_DELIVER_MS, P.TIMER_DELAY_SEC, P.TIMER_DELAY_MS))


def _refuses(store: Any, sys_flag: int, topic: str) -> bool:
    """What makes a raw batch go through `put_messages` whatever its messages are."""
    if (store.read_only or store.closed or store.config.is_slave or store.dispatch_listeners
            or not store.running_flags.is_writeable() or sys_flag & TRANSACTION_TYPE_MASK != TRANSACTION_NOT_TYPE
            or topic == SCHEDULE_TOPIC):
        return True
    ha = store.ha_service
    return ha is not None and ha.config.broker_role == "SYNC_MASTER" and ha.config.in_sync_replicas > 1


class _Layout:
    """What is the same for every record of a batch: topic field, packed hosts, sysFlag, magic."""

    __slots__ = ("topic_b", "born_b", "store_b", "sys_flag", "magic", "fixed_size", "middle", "pack")

    def __init__(self, store: Any, topic_b: bytes, topic_len: int, sys_flag: int, born_host: Host) -> None:
        self.topic_b = topic_b
        self.born_b, self.store_b = pack_host(born_host), pack_host(store.store_host)
        born_v6, store_v6 = len(self.born_b) == 20, len(self.store_b) == 20
        sys_flag &= ~(BORNHOST_V6_FLAG | STOREHOSTADDRESS_V6_FLAG)
        if born_v6:
            sys_flag |= BORNHOST_V6_FLAG
        if store_v6:
            sys_flag |= STOREHOSTADDRESS_V6_FLAG
        self.sys_flag = sys_flag
        self.magic = MESSAGE_MAGIC_CODE_V2 if topic_len > 127 else MESSAGE_MAGIC_CODE
        self.fixed_size = 74 + (20 if born_v6 else 8) + (20 if store_v6 else 8) + len(topic_b)
        middle = _MIDDLE[born_v6, store_v6]
        self.middle = middle.pack  # (sysFlag, bornTimestamp, bornHost, storeTimestamp, storeHost, reconsume, 0)
        self.pack = _EACH[middle.size].pack  # (totalSize, magic, bodyCRC, queueId, flag, queueOffset, phys,
        # the packed middle, bodyLength)



def _layout_if_fast(store: Any, topic: str, sys_flag: int, born_host: Host,
                    props_list: list[dict[str, str]]) -> _Layout | None:
    """The records' fixed layout, or None where the per-message path must take the batch."""
    if _refuses(store, sys_flag, topic) or not hooks_pass_through(store, props_list):
        return None
    topic_b, topic_len = topic_field(topic)
    if not topic_b:
        return None
    return _Layout(store, topic_b, topic_len, sys_flag, born_host)

def put_batch(store: Any, topic: str, queue_id: int | list[int], sys_flag: int, born_timestamp: int,
              born_host: Host, reconsume_times: int, flags: list[int], bodies: list[bytes] | list[memoryview],
              props_list: list[dict[str, str]]) -> BatchPutResult | None:
    """Append one batch of one topic, or None (nothing done) when `put_messages` must.

    The records are those `put_messages` writes for MessageExts of these fields (the store
    host is the store's, prepared transaction offset 0); `props_list` are the final property
    maps, in the order they are stored. `queue_id` is the batch's queue, or one per message
    (a producer's round robin): then the result has each message's queue offset.
    """
    layout = _layout_if_fast(store, topic, sys_flag, born_host, props_list)
    if layout is None:
        return None
    fixed_size = layout.fixed_size
    max_size = store.config.max_message_size
    pjoin, nvjoin, psep, i16 = P.PROPERTY_SEPARATOR.join, P.NAME_VALUE_SEPARATOR.join, P.PROPERTY_SEPARATOR, _I16.pack
    # outside the lock, in one pass: everything but the queue offset, position and store time
    props_fields: list[bytes] = []
    totals: list[int] = []
    crcs: list[int] = []
    codes: list[int] = []
    uniq_values: list[str | None] = []
    keys_values: list[str | None] = []
    add_field, add_total, add_crc, add_code, add_uniq, add_keys = (
        props_fields.append, totals.append, crcs.append, codes.append, uniq_values.append, keys_values.append)
    tag_codes: dict[str | None, int] = {}
    tags_key, uniq, keys = P.TAGS, P.UNIQ_KEY, P.KEYS
    try:
        for body, props in zip(bodies, props_list, strict=True):
            props_b = (pjoin(map(nvjoin, props.items())) + psep).encode("utf-8") if props else b""
            if len(props_b) > MAX_PROPERTIES_LENGTH or len(body) > max_size:
                return None  # put_messages refuses it, with its words
            add_field(i16(len(props_b)) + props_b)
            add_total(fixed_size + len(body) + len(props_b))
            add_crc(crc32(body) & 0x7FFFFFFF)
            get = props.get
            tags = get(tags_key)
            code = tag_codes.get(tags)
            if code is None:
                code = tag_codes[tags] = java_string_hash(tags) if tags else 0
            add_code(code)
            add_uniq(get(uniq))
            add_keys(get(keys))
    except TypeError:  # a None or non-str entry: the encoder's slow path
        return None
    return _append(store, topic, queue_id, layout, born_timestamp, reconsume_times, flags, bodies, props_fields,
                   totals, crcs, codes, (uniq_values, keys_values), props_list)


def put_encoded(store: Any, topic: str, queue_id: int, sys_flag: int, born_timestamp: int, born_host: Host,
                reconsume_times: int, flags: list[int], bodies: list[memoryview] | list[bytes],
                props_fields: Sequence[bytes], tags: list[str | None], uniqs: list[str | None],
                keys: list[str | None]) -> BatchPutResult | None:
    """`put_batch` of maps already encoded (`props_fields`, each record's properties field: the
    length, then the map's stored text in UTF-8) with their TAGS, UNIQ_KEY and KEYS values, or
    None (nothing done) when `put_batch` must.

    A SEND_BATCH_MESSAGE's maps are the inner text's entries re-ordered around the broker's
    (store/sendbatch.py): encoding them again from dicts cost more than the rest of the
    record. No put hook may need the maps (the caller has checked them for the schedule
    hook's keys). An HA service is no reason to decline: `_refuses` already leaves a SYNC_MASTER
    that waits for slaves' acks (whose wait reads each map's WAIT) to `put_batch`, and any other
    role's `handle_ha` only wakes the HA connections. (`rmqtool serve` always has one, listening
    for slaves: declining here sent every batch it took through the map path.)
    """
    layout = _layout_if_fast(store, topic, sys_flag, born_host, [])
    if layout is None:
        return None
    lens = list(map(len, bodies))
    flens = list(map(len, props_fields))
    if max(flens) > MAX_PROPERTIES_LENGTH + 2 or max(lens) > store.config.max_message_size:
        return None  # put_messages refuses it, with its words
    totals = list(map(add, repeat(layout.fixed_size - 2), map(add, lens, flens)))  # a field has 2 length bytes
    crcs = list(map(_MASK31.__and__, map(crc32, bodies)))
    tag_codes = {t: java_string_hash(t) if t else 0 for t in set(tags)}
    codes = list(map(tag_codes.__getitem__, tags))
    return _append(store, topic, queue_id, layout, born_timestamp, reconsume_times, flags, bodies, props_fields,
                   totals, crcs, codes, (uniqs, keys), [])


def put_bodies(store: Any, topic: str, queue_id: int, bodies: list[bytes], properties: dict[str, str],
               uniq_keys: list[str], born_timestamp: int, born_host: Host, *, flag: int = 0,
               sys_flag: int = 0) -> BatchPutResult | None:
    """Append bodies that share one property map but for their UNIQ_KEY (a shell's lines), or None.

    `properties` is the final map in stored order with a UNIQ_KEY entry; each record stores it
    with that value replaced by its own of `uniq_keys`. The map is encoded once and split around
    that value, the tag hashed once, the index keys of every record are its UNIQ_KEY and the
    map's KEYS: the same records as `put_batch` of one map per body (tests/store/test_put_bodies.py).
    """
    if len(uniq_keys) != len(bodies) or not bodies:
        return None
    layout = _layout_if_fast(store, topic, sys_flag, born_host, [properties])
    if layout is None:
        return None
    uniq = P.UNIQ_KEY
    if not properties.get(uniq) or not all(uniq_keys):
        return None
    mark = "\x00uniq\x00"
    try:
        text = P.PROPERTY_SEPARATOR.join(map(P.NAME_VALUE_SEPARATOR.join, {**properties, uniq: mark}.items()))
        head, tail = (text + P.PROPERTY_SEPARATOR).encode("utf-8").split(mark.encode(), 1)
        uniq_b = [u.encode("utf-8") for u in uniq_keys]
    except (TypeError, AttributeError, ValueError):
        return None
    n = len(bodies)
    lengths = list(map(len, uniq_b))
    if min(lengths) == max(lengths):  # the usual case: ids of one length, one length field
        plen = len(head) + lengths[0] + len(tail)
        if plen > MAX_PROPERTIES_LENGTH:
            return None
        head = _I16.pack(plen) + head
        props_fields = [head + u + tail for u in uniq_b]
        fixed = layout.fixed_size + plen
        totals = [fixed + b for b in map(len, bodies)]
    else:
        i16, props_fields = _I16.pack, []
        for u in uniq_b:
            plen = len(head) + len(u) + len(tail)
            if plen > MAX_PROPERTIES_LENGTH:
                return None
            props_fields.append(i16(plen) + head + u + tail)
        totals = [layout.fixed_size + len(b) + len(f) - 2 for b, f in zip(bodies, props_fields, strict=True)]
    lens = list(map(len, bodies))
    if max(lens) > store.config.max_message_size or min(lens) <= 0:
        return None
    crcs = [c & 0x7FFFFFFF for c in map(crc32, bodies)]
    tags = properties.get(P.TAGS)
    codes = [java_string_hash(tags) if tags else 0] * n
    keys = properties.get(P.KEYS)
    return _append(store, topic, queue_id, layout, born_timestamp, 0, [flag] * n, bodies, props_fields, totals,
                   crcs, codes, (list(uniq_keys), [keys] * n), [properties] * n)


def put_fields(store: Any, topic: str, queue_ids: list[int], born_timestamp: int, born_host: Host,
               flags: list[int], bodies: list[bytes], props_fields: list[bytes], uniq_keys: list[str],
               keys: tuple[str, ...]) -> BatchPutResult | None:
    """`put_batch` of maps already encoded, or None (nothing done) when `put_batch` must.

    `props_fields` are each record's properties field (length and text), of maps with the
    names `keys` in stored order, neither TAGS nor KEYS among them (tags code 0, the index
    keys are each record's UNIQ_KEY of `uniq_keys`): a replayed batch whose maps differ only
    in their values (client/replaystore.py) encodes them with one template. A SYNC_MASTER
    waiting for acks, which reads each message's map (WAIT), is left to `put_batch` by `_refuses`.
    """
    if P.TAGS in keys or P.KEYS in keys:
        return None
    layout = _layout_if_fast(store, topic, 0, born_host, [dict.fromkeys(keys)])
    if layout is None:
        return None
    fixed = layout.fixed_size - 2  # each field has its two length bytes
    totals = [fixed + b + p for b, p in zip(map(len, bodies), map(len, props_fields), strict=True)]
    crcs = [c & 0x7FFFFFFF for c in map(crc32, bodies)]
    n = len(bodies)
    return _append(store, topic, queue_ids, layout, born_timestamp, 0, flags, bodies, props_fields, totals, crcs,
                   [0] * n, (list(uniq_keys), [None] * n), [])


def _append(store: Any, topic: str, queue_id: int | list[int], layout: _Layout, born_timestamp: int, reconsume_times: int,
            flags: list[int], bodies: list[bytes] | list[memoryview], props_fields: Sequence[bytes], totals: list[int],
            crcs: list[int], tag_codes: list[int], index_keys: _IndexColumns,
            props_list: list[dict[str, str]]) -> BatchPutResult | None:
    """The records under the put lock, their units and index keys; the flush and HA waits after."""
    config = store.config
    file_size = config.mapped_file_size_commit_log
    batch_size = sum(totals)
    if batch_size + END_FILE_MIN_BLANK_LENGTH > file_size:
        return None
    pack, magic, topic_b = layout.pack, layout.magic, layout.topic_b
    cl = store.commitlog
    with cl.put_lock:
        mfq = cl.mfq
        mf = mfq.files[-1] if mfq.files else None
        if store.closed or mf is None or mf.wrote_position + batch_size + END_FILE_MIN_BLANK_LENGTH > file_size:
            return None  # a new file (and maybe a blank) first: put_messages knows how
        try:  # the reservation every append makes (a store past it lands in a hole: SIGBUS)
            mfq.reserve_for_append(batch_size, END_FILE_MIN_BLANK_LENGTH)
        except DiskFull:
            return None  # nothing changed yet: put_messages refuses it with RocketMQ's status
        now = store.clock()
        middle = layout.middle(layout.sys_flag, born_timestamp, layout.born_b, now, layout.store_b, reconsume_times, 0)
        table = cl.topic_queue_table
        start = pos = mf.wrote_position
        base = mf.from_offset
        parts: list[bytes] = []
        add = parts.extend
        offsets: list[int] = []
        add_offset = offsets.append
        queue_offsets: list[int] | None = None
        if isinstance(queue_id, int):  # one queue: every column in C (map over the columns)
            key = (topic, queue_id)
            first_queue_offset = table.get(key, 0)
            n = len(totals)
            queue_offsets_run = range(first_queue_offset, first_queue_offset + n)
            offsets = list(accumulate(totals, initial=base + start))
            del offsets[-1]  # the end of the run
            heads = map(pack, totals, repeat(magic), crcs, repeat(queue_id), flags, queue_offsets_run, offsets,
                        repeat(middle), map(len, bodies))
            parts = list(chain.from_iterable(zip(heads, bodies, repeat(topic_b), props_fields)))
            runs: dict[int, Any] = {queue_id: (offsets, totals, tag_codes, first_queue_offset)}  # columns
            table[key] = first_queue_offset + n
        else:  # a queue per message: each queue's offsets run on from the table's
            nexts: dict[int, int] = {}
            runs = {}
            queue_offsets = []
            add_queue_offset = queue_offsets.append
            for qid, flag, body, props_field, total, body_crc, tags_code in zip(queue_id, flags, bodies, props_fields,
                                                                               totals, crcs, tag_codes, strict=True):
                queue_offset = nexts.get(qid)
                if queue_offset is None:
                    queue_offset = table.get((topic, qid), 0)
                    runs[qid] = []
                nexts[qid] = queue_offset + 1
                phys = base + pos
                add((pack(total, magic, body_crc, qid, flag, queue_offset, phys, middle, len(body)), body, topic_b,
                     props_field))
                runs[qid].append((phys, total, tags_code, queue_offset))
                add_offset(phys)
                add_queue_offset(queue_offset)
                pos += total
            for qid, queue_offset in nexts.items():
                table[topic, qid] = queue_offset
            first_queue_offset = queue_offsets[0]
        cl.write_run_locked(mf, start, b"".join(parts))
        cl.last_store_timestamp = now
        store._refused = 0
        _dispatch(store, topic, runs, offsets, index_keys, now)
        end = cl.max_offset
    status = "PUT_OK"
    if store.arrival_listeners:
        store._notify_arrivals([(topic, qid) for qid in runs])
    if store.sync_flush and store.flush_service is not None:
        fs = store.flush_service
        if not fs.wait_flushed(end, config.sync_flush_timeout / 1000):
            if fs.error is not None:
                raise StoreError(f"flush failed: {fs.error}")
            status = "FLUSH_DISK_TIMEOUT"
    ha = store.ha_service
    if ha is not None:
        waiting: Iterable[_Waiting] = (_Waiting(d) for d in props_list)
        ha_status = ha.handle_ha(end, waiting)
        if ha_status is not None:
            status = str(getattr(ha_status, "value", ha_status))
    return BatchPutResult(status, store.store_host, offsets, first_queue_offset, queue_offsets)


def _dispatch(store: Any, topic: str, runs: dict[int, Any], offsets: list[int], index_keys: _IndexColumns,
              now: int) -> None:
    """Each queue's units and the index keys in record order (`Dispatcher.dispatch_appended`).

    A queue's run is its units (offset, size, tagsCode, queue offset), or for a batch to one
    queue the columns (offsets, sizes, tagsCodes) and the first queue offset."""
    dispatcher = store.dispatcher
    try:
        find = dispatcher.cqs.find_or_create
        for qid, units in runs.items():
            if type(units) is tuple:
                find(topic, qid).put_columns(*units)
            else:
                find(topic, qid).put_batch(units)
        dispatcher.last_cq_store_timestamp = now
        index = dispatcher.index
        if index is not None and offsets:
            uniqs, texts = index_keys
            build_index_columns(index, [topic] * len(offsets), now, offsets, uniqs, texts)
    except (StoreError, OSError) as e:
        store.dispatch_failed(e)
