"""A SEND_BATCH_MESSAGE body stored without a MessageExt per message (`LocalBroker.send_batch_body`).

The broker's batch path (`SendMessageProcessor.sendBatchMessage`): every inner message of the
body (`MessageDecoder.decodeMessages` layout: totalSize, magic, bodyCRC, flag, body, properties)
is stored on the request's topic and queue with its sysFlag, born time, born host and reconsume
times. The properties are what `LocalBroker.send_batch` gives a MessageExt made from the same
request (broker/send.py `_send_batch`): the inner map, the batch's own properties filling in
what it lacks, a UNIQ_KEY where the client set none, CLUSTER, in the 5.x broker's HashMap order.
A uniform body (what a Java producer sends: one body and text length, one key shape, values
of the same lengths) is taken a column at a time (batchcolumns.py `uniform_columns`); any other
goes through `_walk`, one message at a time: its text split in C (`str.split` + `dict`) and
checked without a per-entry loop. Each stored text is the inner entries plus the broker's,
in the order `plan_shape` works out once per key shape, and goes with flags, bodies and index
values to `MessageStore.put_encoded` as each record's properties field: no map is encoded twice.

Anything unusual makes `send_batch_body` return None before it changes anything, and the
caller takes the per-message path, which gives the same records or the same error: a body that
does not parse cleanly, an empty or oversized body, a property entry `decode_properties` would
drop or `check_properties` refuse, DELAY / timer keys, a retry topic, a queue id not yet chosen,
no born time, a topic not yet created or not writable, a forbidden topic.
"""

from __future__ import annotations

import struct
from operator import methodcaller
from typing import Any

from rmqtool.errors import InvalidMessage
from rmqtool.layouts import properties as P
from rmqtool.layouts.constants import MAX_PROPERTIES_LENGTH, RETRY_GROUP_TOPIC_PREFIX
from rmqtool.layouts.message import MessageExt
from rmqtool.layouts.net import Host
from rmqtool.store.batchcolumns import Plan, plan_shape, uniform_columns
from rmqtool.store.batchput import _SCHEDULE_KEYS, BatchPutResult
from rmqtool.validators import check_body, send_topic_ok

_BATCH_HEAD = struct.Struct(">iiiii")  # totalSize, magic, bodyCRC, flag, bodyLen
_I16 = struct.Struct(">h")
_split_entry = methodcaller("split", P.NAME_VALUE_SEPARATOR, 1)
# room kept for what the broker adds to a map (UNIQ_KEY, CLUSTER's key and separators)
_ADDED_ROOM = 64
_CLIENT_BORN_HOST = Host("127.0.0.1", 0)  # a MessageExt's own born host, which send_batch keeps
_Walked = tuple[list[int], list[memoryview], list[dict[str, str]], list[bytes], list["str | None"],
                list["str | None"], list["str | None"], list[tuple[int, list[str], Plan]]]


def _clean_entries(props: dict[str, str]) -> bool:
    """Entries `decode_properties` keeps as they are and `check_properties` accepts."""
    for k, v in props.items():
        if (not isinstance(k, str) or not isinstance(v, str) or not k or not v or "\x01" in k or "\x02" in k
                or "\x01" in v or "\x02" in v):
            return False
    return True


def send_batch_body(local: Any, topic: str, queue_id: int, data: bytes, batch_props: dict[str, str],
                    sys_flag: int, born_timestamp: int, born_host: Host,
                    reconsume_times: int) -> BatchPutResult | None:
    """Store the batch `data` as `send_batch` stores its decoded messages, or None (untouched)."""
    if local.read_only or queue_id < 0 or not born_timestamp or topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
        return None
    tc = local.topics.select(topic)
    if tc is None or not tc.writeable or queue_id >= max(tc.write_queue_nums, tc.read_queue_nums):
        return None
    if not send_topic_ok(topic):
        return None
    if not _clean_entries(batch_props) or not batch_props.keys().isdisjoint(_SCHEDULE_KEYS):
        return None
    extra = list(batch_props.items())
    cluster = local.config.broker_cluster_name
    room = MAX_PROPERTIES_LENGTH - len(P.encode_properties(batch_props).encode("utf-8")) - len(
        cluster.encode("utf-8")) - _ADDED_ROOM
    max_size = local.config.max_message_size
    defaults = batch_props.get(P.TAGS), batch_props.get(P.UNIQ_KEY), batch_props.get(P.KEYS)
    store = local.store
    put_encoded = getattr(store, "put_encoded", None)
    if put_encoded is not None:
        columns = uniform_columns(data, max_size, room, extra, cluster, defaults)
        if columns is not None:  # the walk below would hand put_encoded the same
            result = put_encoded(topic, queue_id, sys_flag, born_timestamp, born_host, reconsume_times, *columns)
            if result is not None:
                return result
    walked = _walk(data, max_size, room, extra, cluster, defaults)
    if walked is None:
        return None
    flags, bodies, maps, fields, tags, uniqs, keys, pending = walked
    # LocalBroker._prepare, from here on for every message: nothing below can fall back
    clock, create = local.clock, local.uniq_keys.create
    psep, uniq_key = P.PROPERTY_SEPARATOR, P.UNIQ_KEY
    uniq_head, join, i16 = uniq_key + P.NAME_VALUE_SEPARATOR, psep.join, _I16.pack
    created: dict[int, str] = {}
    for i, entries, (order, added, _, _) in pending:  # in message order, as _prepare makes them
        uniqs[i] = created[i] = uniq = create(clock())
        text = (join(order([*entries, *added, uniq_head + uniq])) + psep).encode("utf-8")
        fields[i] = i16(len(text)) + text
    if put_encoded is not None:
        result = put_encoded(topic, queue_id, sys_flag, born_timestamp, born_host, reconsume_times, flags, bodies,
                             fields, tags, uniqs, keys)
        if result is not None:
            return result
    broker_order, cluster_key = P.broker_order, P.CLUSTER
    for i, props in enumerate(maps):  # the maps themselves
        for k, v in extra:
            props.setdefault(k, v)
        if i in created:
            props[uniq_key] = created[i]
        props[cluster_key] = cluster
        maps[i] = broker_order(props, owned=True)
    result = store.put_batch(topic, queue_id, sys_flag, born_timestamp, born_host, reconsume_times, flags, bodies,
                             maps)
    if result is not None:
        return result
    # a new CommitLog file, a hook, a slave's acks...: the MessageExts put_messages needs
    store_host = local.store_host
    msgs = [MessageExt(topic, bytes(body), queue_id, flag, props, sys_flag, born_timestamp, born_host,
                       store_host=store_host, reconsume_times=reconsume_times)
            for flag, body, props in zip(flags, bodies, maps, strict=True)]
    results = store.put_messages(msgs)
    status = next((r.status for r in results if r.status != "PUT_OK"), "PUT_OK")
    return BatchPutResult(str(getattr(status, "value", status)), store.store_host,
                          [r.wrote_offset for r in results], results[0].queue_offset)


def _walk(data: bytes, max_size: int, room: int, extra: list[tuple[str, str]], cluster: str,
          defaults: tuple[str | None, str | None, str | None]) -> _Walked | None:
    """Each inner message's flag, body, map, properties field (its stored text, empty where the
    UNIQ_KEY is made later), TAGS, UNIQ_KEY and KEYS values, one at a time; None for anything
    unusual. `pending` lists the messages whose UNIQ_KEY the broker makes, with their entries."""
    unpack_head, unpack_i16, i16 = _BATCH_HEAD.unpack_from, _I16.unpack_from, _I16.pack
    psep, nvsep, split_entry = P.PROPERTY_SEPARATOR, P.NAME_VALUE_SEPARATOR, _split_entry
    plans: dict[tuple[str, ...], Plan | None] = {}
    tags_key, uniq_key, keys_key = P.TAGS, P.UNIQ_KEY, P.KEYS
    dtags, duniq, dkeys = defaults
    join = psep.join
    flags: list[int] = []
    bodies: list[memoryview] = []
    maps: list[dict[str, str]] = []
    fields: list[bytes] = []  # each map's stored text in UTF-8 after its length
    tags: list[str | None] = []
    uniqs: list[str | None] = []
    keys: list[str | None] = []
    pending: list[tuple[int, list[str], Plan]] = []  # messages whose UNIQ_KEY is made later
    view = memoryview(data)  # bodies are views of the request: copied once, into the mapped file
    p, n = 0, len(data)
    while p < n:
        if p + 20 > n:
            return None
        total, _magic, _crc, flag, blen = unpack_head(data, p)
        q = p + 20 + blen
        if blen <= 0 or blen > max_size or q + 2 > n or total < 22 + blen:
            return None
        (plen,) = unpack_i16(data, q)
        end = q + 2 + plen
        if plen < 0 or end > n or plen > room:
            return None
        if plen:
            try:
                text = data[q + 2 : end].decode("utf-8")
            except UnicodeDecodeError:  # replaced characters may not fit the room left
                return None
            entries = text.split(psep)
            if not entries[-1]:
                entries.pop()  # the usual trailing separator
            try:
                props = dict(map(split_entry, entries))
            except ValueError:  # an entry without a name-value separator: decode_properties drops it
                return None
            # every entry kept, none with a separator in its value or an empty value (names: plan_shape)
            if len(props) != len(entries) or text.count(nvsep) != len(entries) or "" in props.values():
                return None
        else:
            entries, props = [], {}
        shape = tuple(props)
        plan = plans.get(shape, False)
        if plan is False:
            plan = plans[shape] = plan_shape(shape, extra, cluster)
        if plan is None:
            return None
        get = props.get
        if plan[2]:
            pending.append((len(fields), entries, plan))
            fields.append(b"")
            uniqs.append(None)
        else:
            stored = (join(plan[0](entries + plan[1])) + psep).encode("utf-8")
            fields.append(i16(len(stored)) + stored)
            uniqs.append(get(uniq_key, duniq))
        tags.append(get(tags_key, dtags))
        keys.append(get(keys_key, dkeys))
        flags.append(flag)
        bodies.append(view[p + 20 : q])
        maps.append(props)
        p = end
    if not maps:
        return None
    return flags, bodies, maps, fields, tags, uniqs, keys, pending


def send_bodies(local: Any, topic: str, queue_id: int, bodies: list[bytes], properties: dict[str, str],
                uniq_keys: list[str], born_timestamp: int) -> BatchPutResult | None:
    """`send_batch` of one MessageExt per body with `properties` and its own UNIQ_KEY, without them.

    What `rmqtool send --batch N` stores for N stdin lines: the checks of `send_batch` (the
    first message checked whole, the other bodies for their size only, as their maps are the
    same; a refused batch raises before anything is stored), the broker's CLUSTER and HashMap
    order once for the batch, then one `MessageStore.put_bodies`. None, with nothing stored,
    when that declines (a new CommitLog file, a hook, a slave's acks, a retry topic...): the
    caller then sends MessageExts of the same fields through `send_batch`, which stores the same.
    """
    first = dict(properties)
    first[P.UNIQ_KEY] = uniq_keys[0]
    local.check_batch([MessageExt(topic, bodies[0], queue_id, properties=first, born_timestamp=born_timestamp)])
    max_size = local.config.max_message_size
    lens = list(map(len, bodies))
    if min(lens) <= 0 or max(lens) > max_size:
        for body in bodies:
            check_body(body, max_size)
    if topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
        return None
    tc = local._writable_topic(topic)
    queue_nums = max(tc.write_queue_nums, tc.read_queue_nums)
    if queue_id < 0 or queue_id >= queue_nums:
        raise InvalidMessage(f"request queueId[{queue_id}] is illegal, topic {topic} has {queue_nums} queues")
    first[P.CLUSTER] = local.config.broker_cluster_name
    stored = P.broker_order(first, owned=True)
    return local.store.put_bodies(topic, queue_id, bodies, stored, uniq_keys, born_timestamp, _CLIENT_BORN_HOST)


def send_records(local: Any, msgs: list[MessageExt]) -> BatchPutResult | None:
    """`send_batch(msgs, checked=True)` of messages of one topic with one born time, born host,
    sysFlag and reconsume count (a replay's batch), packed from their fields by one
    `MessageStore.put_batch` with a queue per message; None, with nothing stored, when they
    are not such a batch or the store declines (the caller then calls `send_batch`, which
    stores the same: what this has done to the messages is what `send_batch` does first)."""
    if not msgs or local.read_only:
        return None
    m0 = msgs[0]
    topic, born, born_host, sys_flag, reconsume = (m0.topic, m0.born_timestamp, m0.born_host, m0.sys_flag,
                                                   m0.reconsume_times)
    if topic.startswith(RETRY_GROUP_TOPIC_PREFIX) or not born:
        return None
    for m in msgs:
        if (m.topic != topic or m.born_timestamp != born or m.born_host != born_host or m.sys_flag != sys_flag
                or m.reconsume_times != reconsume or m.queue_id < 0):
            return None
    tc = local._writable_topic(topic)
    queue_nums = max(tc.write_queue_nums, tc.read_queue_nums)
    cluster, broker_order, uniq_key, cluster_key = local.config.broker_cluster_name, P.broker_order, P.UNIQ_KEY, \
        P.CLUSTER
    clock, create, store_host = local.clock, local.uniq_keys.create, local.store_host
    maps = []
    for m in msgs:  # LocalBroker.send_batch's preparation of each message
        if m.queue_id >= queue_nums:
            raise InvalidMessage(f"request queueId[{m.queue_id}] is illegal, topic {topic} has {queue_nums} queues")
        props = dict(m.properties)
        if not props.get(uniq_key):
            props[uniq_key] = create(clock())
        props[cluster_key] = cluster
        m.properties = props = broker_order(props, owned=True)
        m.store_host = store_host
        maps.append(props)
    return local.store.put_batch(topic, [m.queue_id for m in msgs], sys_flag, born, born_host, reconsume,
                                 [m.flag for m in msgs], [m.body for m in msgs], maps)
