"""`put_messages` for the usual batch in one pass: records, units and index keys together.

The general path (putpath.py) takes a batch through five loops: checks, the encoder
(`encode_records_parts`, whose fixed part is patched later), the CommitLog append (queue offsets,
positions, store time patched in), dispatch (ConsumeQueue units, index keys) and the results.
The usual batch of a producer (one topic, plain messages, no put hook or dispatch listener,
room in the current CommitLog file) needs none of their generality: here each record's
fixed part is packed once with its final queue offset, position and store time, as
`CommitLog.asyncPutMessages` -> `DefaultAppendMessageCallback.doAppend` writes a batch, and
its unit and index keys are gathered in the same loop (as batchput.py does for a client's
raw batch). The files and message fields come out as from the general path
(tests/store/test_put_usual.py compares them); anything else returns None before a byte is
written and the general path takes the batch.
"""

from __future__ import annotations

from collections.abc import Iterable
from itertools import repeat
from operator import and_, attrgetter
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
    TRANSACTION_TYPE_MASK,
)
from rmqtool.layouts.crc import crc32
from rmqtool.layouts.javahash import java_string_hash
from rmqtool.layouts.message import _FIXED, _I16, MessageExt, topic_field
from rmqtool.layouts.net import pack_host
from rmqtool.store.diskspace import DiskFull
from rmqtool.store.dispatch import build_index_columns

_topic_of, _born_of, _flag_of, _body_of = (attrgetter("topic"), attrgetter("born_host"), attrgetter("sys_flag"),
                                           attrgetter("body"))


def put_usual(store: Any, msgs: list[MessageExt]) -> tuple[int, Iterable[tuple[str, int]]] | None:
    """Append `msgs` (put hooks already run) if they are the usual batch; (CommitLog end, the
    queues that got units) then, the message fields set as the general path sets them.

    Usual: two or more messages, one topic (not SCHEDULE_TOPIC_XXXX) and one born host, no
    transaction type, no dispatch listener, every property map of strings, sizes within the
    limits, and the batch fits in the current CommitLog file. None otherwise, with nothing
    appended (the fields set by then are the ones the general path sets again).
    """
    n = len(msgs)
    if n < 2 or store.dispatch_listeners:
        return None
    first = msgs[0]
    topic, born_host = first.topic, first.born_host
    # in C: list.count compares by identity first, then by value
    if (topic == SCHEDULE_TOPIC or list(map(_topic_of, msgs)).count(topic) != n
            or list(map(_born_of, msgs)).count(born_host) != n
            or any(map(and_, map(_flag_of, msgs), repeat(TRANSACTION_TYPE_MASK)))):
        return None
    topic_b, topic_len = topic_field(topic)
    if not topic_b:
        return None
    config = store.config
    file_size, max_size = config.mapped_file_size_commit_log, config.max_message_size
    if max(map(len, map(_body_of, msgs))) > max_size:
        return None  # the general path says which message and why
    store_host = store.store_host
    born_b, store_b = pack_host(born_host), pack_host(store_host)
    born_v6, store_v6 = len(born_b) == 20, len(store_b) == 20
    fixed = _FIXED[born_v6, store_v6]
    pack = fixed.pack
    v6_bits = (BORNHOST_V6_FLAG if born_v6 else 0) | (STOREHOSTADDRESS_V6_FLAG if store_v6 else 0)
    v6_clear = ~(BORNHOST_V6_FLAG | STOREHOSTADDRESS_V6_FLAG)
    magic = MESSAGE_MAGIC_CODE_V2 if topic_len > 127 else MESSAGE_MAGIC_CODE
    fixed_size = fixed.size + len(topic_b) + 2
    pjoin, nvjoin, psep, i16 = P.PROPERTY_SEPARATOR.join, P.NAME_VALUE_SEPARATOR.join, P.PROPERTY_SEPARATOR, _I16.pack
    tags_name, uniq_name, keys_name = P.TAGS, P.UNIQ_KEY, P.KEYS
    tag_codes: dict[str | None, int] = {}
    fields: list[bytes] = []
    codes: list[int] = []
    uniqs: list[str | None] = []
    texts: list[str | None] = []
    add_field, add_code, add_uniq, add_text = fields.append, codes.append, uniqs.append, texts.append
    batch_size = 0
    longest_props = 0
    try:
        for msg in msgs:  # outside the lock: everything but queue offset, position and store time
            props = msg.properties
            props_b = (pjoin(map(nvjoin, props.items())) + psep).encode("utf-8") if props else b""
            plen = len(props_b)
            if plen > longest_props:
                longest_props = plen
            add_field(i16(plen) + props_b)
            body = msg.body
            total = fixed_size + len(body) + plen
            batch_size += total
            msg.store_host = store_host
            msg.sys_flag = (msg.sys_flag & v6_clear) | v6_bits
            msg.magic_code, msg.total_size, msg.body_crc = magic, total, crc32(body) & 0x7FFFFFFF
            get = props.get
            tags = get(tags_name)
            code = tag_codes.get(tags)
            if code is None:
                code = tag_codes[tags] = java_string_hash(tags) if tags else 0
            add_code(code)
            add_uniq(get(uniq_name))
            add_text(get(keys_name))
    except (TypeError, AttributeError):  # a None or non-str entry: the encoder's slow path
        return None
    if longest_props > MAX_PROPERTIES_LENGTH or batch_size + END_FILE_MIN_BLANK_LENGTH > file_size:
        return None
    cl = store.commitlog
    with cl.put_lock:
        mf = room_in_last_file(store, batch_size, file_size)
        if mf is None:
            return None
        now = store.clock()
        table = cl.topic_queue_table
        start = pos = mf.wrote_position
        base = mf.from_offset
        parts: list[bytes] = []
        add = parts.extend
        phys_list: list[int] = []
        add_phys = phys_list.append
        nexts: dict[int, int] = {}
        runs: dict[int, list[tuple[int, int, int, int]]] = {}
        for msg, field, code in zip(msgs, fields, codes, strict=True):
            qid = msg.queue_id
            queue_offset = nexts.get(qid)
            if queue_offset is None:
                queue_offset = table.get((topic, qid), 0)
                runs[qid] = []
            nexts[qid] = queue_offset + 1
            phys = base + pos
            total = msg.total_size
            body = msg.body
            add((pack(total, magic, msg.body_crc, qid, msg.flag, queue_offset, phys, msg.sys_flag, msg.born_timestamp,
                      born_b, now, store_b, msg.reconsume_times, msg.prepared_transaction_offset, len(body)),
                 body, topic_b, field))
            runs[qid].append((phys, total, code, queue_offset))
            add_phys(phys)
            msg.queue_offset, msg.commit_log_offset, msg.store_timestamp = queue_offset, phys, now
            pos += total
        cl.write_run_locked(mf, start, b"".join(parts))
        for qid, queue_offset in nexts.items():
            table[topic, qid] = queue_offset
        cl.last_store_timestamp = now
        dispatcher = store.dispatcher
        try:
            find = dispatcher.cqs.find_or_create
            for qid, units in runs.items():
                find(topic, qid).put_batch(units)
            dispatcher.last_cq_store_timestamp = now
            if dispatcher.index is not None:
                build_index_columns(dispatcher.index, [topic] * n, now, phys_list, uniqs, texts)
        except (StoreError, OSError) as e:  # as `PutPath._dispatch_locked`: the records stay
            store.dispatch_failed(e)
    return base + pos, [(topic, qid) for qid in runs]  # the CommitLog's end: `mf` is its last file


def put_one(store: Any, msg: MessageExt) -> tuple[int, int] | None:
    """Append one message (put hooks already run) in one pass, as `put_usual` does a batch:
    (its CommitLog offset, the CommitLog end) then, its fields set as the general path sets them.

    The single send of a producer: `put_messages([msg])` would take it through the encoder's
    patched fixed part, the batch append (file look-ahead, sums over a list of one) and the
    batch dispatch; here the fixed part is packed once with its final queue offset, position
    and store time (`DefaultAppendMessageCallback.doAppend`), its ConsumeQueue unit and index
    keys written as `Dispatcher.dispatch` writes one record's. The same conditions as
    `put_usual` (no transaction type, not SCHEDULE_TOPIC_XXXX, no dispatch listener, a property
    map of strings, sizes within the limits, room in the current file); None otherwise, with
    nothing appended, and the general path takes the message.
    """
    if store.dispatch_listeners or msg.sys_flag & TRANSACTION_TYPE_MASK:
        return None
    topic = msg.topic
    if topic == SCHEDULE_TOPIC:
        return None
    topic_b, topic_len = topic_field(topic)
    body = msg.body
    if not topic_b or len(body) > store.config.max_message_size:
        return None
    props = msg.properties
    try:
        props_b = (P.PROPERTY_SEPARATOR.join(map(P.NAME_VALUE_SEPARATOR.join, props.items()))
                   + P.PROPERTY_SEPARATOR).encode("utf-8") if props else b""
        get = props.get
        tags = get(P.TAGS)
        code = java_string_hash(tags) if tags else 0
        uniq, keys = get(P.UNIQ_KEY), get(P.KEYS)
    except (TypeError, AttributeError):  # a None or non-str entry: the encoder's slow path
        return None
    plen = len(props_b)
    if plen > MAX_PROPERTIES_LENGTH:
        return None
    store_host = store.store_host
    born_b, store_b = pack_host(msg.born_host), pack_host(store_host)
    born_v6, store_v6 = len(born_b) == 20, len(store_b) == 20
    fixed = _FIXED[born_v6, store_v6]
    total = fixed.size + len(body) + len(topic_b) + 2 + plen
    file_size = store.config.mapped_file_size_commit_log
    if total + END_FILE_MIN_BLANK_LENGTH > file_size:
        return None
    sys_flag = ((msg.sys_flag & ~(BORNHOST_V6_FLAG | STOREHOSTADDRESS_V6_FLAG))
                | (BORNHOST_V6_FLAG if born_v6 else 0) | (STOREHOSTADDRESS_V6_FLAG if store_v6 else 0))
    magic = MESSAGE_MAGIC_CODE_V2 if topic_len > 127 else MESSAGE_MAGIC_CODE
    body_crc = crc32(body) & 0x7FFFFFFF
    qid = msg.queue_id
    cl = store.commitlog
    with cl.put_lock:
        mf = room_in_last_file(store, total, file_size)
        if mf is None:
            return None
        # from here on the message is stored: its fields as the encoder and the append set them
        msg.store_host = store_host
        msg.sys_flag, msg.magic_code, msg.total_size, msg.body_crc = sys_flag, magic, total, body_crc
        now = store.clock()
        table = cl.topic_queue_table
        key = (topic, qid)
        queue_offset = table.get(key, 0)
        pos = mf.wrote_position
        phys = mf.from_offset + pos
        cl.write_run_locked(mf, pos, b"".join((
            fixed.pack(total, magic, body_crc, qid, msg.flag, queue_offset, phys, sys_flag, msg.born_timestamp,
                       born_b, now, store_b, msg.reconsume_times, msg.prepared_transaction_offset, len(body)),
            body, topic_b, _I16.pack(plen), props_b)))
        table[key] = queue_offset + 1
        msg.queue_offset, msg.commit_log_offset, msg.store_timestamp = queue_offset, phys, now
        cl.last_store_timestamp = now
        dispatcher = store.dispatcher
        try:  # `Dispatcher.dispatch` of this record
            dispatcher.cqs.find_or_create(topic, qid).put(phys, total, code, queue_offset)
            dispatcher.last_cq_store_timestamp = now
            index = dispatcher.index
            if index is not None:
                index.build_index(topic, phys, now, uniq, keys, now)
        except (StoreError, OSError) as e:  # as `PutPath._dispatch_locked`: the record stays
            store.dispatch_failed(e)
    return phys, phys + total


def room_in_last_file(store: Any, size: int, file_size: int) -> Any:
    """Under the put lock: the CommitLog's current file with `size` bytes reserved in it
    (`reserve_for_append`: a store past the reservation would land in a hole, SIGBUS), or None
    when the general path must take the put: no file yet, or too little room left for it and
    the end-of-file blank (a new file first), or a full disk (refused with RocketMQ's status)."""
    if store.closed:
        raise StoreError("store is closed")
    mfq = store.commitlog.mfq
    mf = mfq.files[-1] if mfq.files else None
    if mf is None or mf.wrote_position + size + END_FILE_MIN_BLANK_LENGTH > file_size:
        return None
    try:
        mfq.reserve_for_append(size, END_FILE_MIN_BLANK_LENGTH)
    except DiskFull:
        return None
    return mf
