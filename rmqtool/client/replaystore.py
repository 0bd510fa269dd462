"""`StoreTarget.send_many` of a parsed `replay --jsonl` batch (client/replaylines.py `Lines`) from
its fields: one `MessageStore.put_batch` with a queue per message, as `LocalBroker.send_records`
stores a batch, without a MessageExt per message; results as JSON text in one comprehension.

The batch is checked as a whole for what `LocalBroker.check_batch` checks one message at a
time (the Java broker's checks: the topic, each body's size, property names, separators and
the map size); one this does not take (several topics, a topic not created yet, a retry
topic, a body or map the broker would refuse) gives None before any queue is chosen or
UNIQ_KEY made, and the caller sends its Messages through `send_many`, which stores the same
(tests/client/test_replay_lines.py compares the stores).
"""

from __future__ import annotations

import os
import re
import time
from dataclasses import dataclass
from itertools import chain
from operator import itemgetter
from typing import Any

import orjson

from rmqtool.errors import InvalidInput, InvalidMessage
from rmqtool.layouts import properties as P
from rmqtool.layouts.constants import MAX_PROPERTIES_LENGTH, RETRY_GROUP_TOPIC_PREFIX
from rmqtool.layouts.message import MessageExt
from rmqtool.layouts.msgid import host_hex
from rmqtool.layouts.net import Host
from rmqtool.store.batchput import _I16, put_fields
from rmqtool.validators import check_properties, check_send_topic

_BORN_HOST = Host("127.0.0.1", 0)  # a MessageExt's own born host, which StoreTarget's messages keep
_INT32 = 1 << 31
_NEEDS_ESCAPE = re.compile(r'["\\\x00-\x1f]')  # what a JSON encoder would escape in a string


def _maps_pass(maps: list[dict[str, str]]) -> bool:
    """`check_properties` of every map passes: checked on the batch's keys and values at once."""
    try:
        names = set().union(*maps)
        name_text = "".join(names)
        values = "".join(chain.from_iterable(map(dict.values, maps)))
    except TypeError:
        return False
    if "" in names or "\x01" in name_text or "\x02" in name_text or "\x01" in values or "\x02" in values:
        return False
    # no map is bigger than every name once (with its two separators) and every value of the batch
    bound = len(name_text.encode("utf-8")) + 2 * len(names) + (
        len(values) if values.isascii() else len(values.encode("utf-8")))
    if bound <= MAX_PROPERTIES_LENGTH:
        return True
    try:
        for m in maps:
            check_properties(m)
    except InvalidMessage:
        return False
    return True


@dataclass(slots=True)
class StoredLines:
    """The send results of a batch stored by `store_lines`: one status for the batch."""

    status: str
    topic: str
    uniq_keys: list[str]
    host_prefix: str
    offsets: list[int]
    queue_ids: list[int]
    queue_offsets: list[int]
    origins: list[str | None]

    def rows(self) -> list[dict[str, Any]]:
        """What `StoreTarget.send` + `ReplaySummary.record` make of each message."""
        status, topic, prefix = self.status, self.topic, self.host_prefix
        return [{"status": status, "msgId": u, "offsetMsgId": prefix + format(o, "016X"), "topic": topic,
                 "queueId": q, "queueOffset": qo, "originMsgId": origin}
                for u, o, q, qo, origin in zip(self.uniq_keys, self.offsets, self.queue_ids, self.queue_offsets,
                                               self.origins, strict=True)]

    def json_lines(self) -> str:
        """`rows()` as JSON Lines, the text orjson writes: status, topic and ids need no escaping."""
        origins = self.origins
        if None not in origins and not _NEEDS_ESCAPE.search("".join(origins)):  # type: ignore[arg-type]
            texts = [f'"{o}"' for o in origins]
        else:
            texts = [orjson.dumps(o).decode("utf-8") for o in origins]
        head = f'{{"status":"{self.status}","msgId":"'
        mid = f'","offsetMsgId":"{self.host_prefix}'
        tail = f'","topic":"{self.topic}","queueId":'
        return "".join([f'{head}{u}{mid}{o:016X}{tail}{q},"queueOffset":{qo},"originMsgId":{t}}}\n'
                        for u, o, q, qo, t in zip(self.uniq_keys, self.offsets, self.queue_ids, self.queue_offsets,
                                                  texts, strict=True)])


def store_lines(target: Any, batch: Any) -> StoredLines | None:
    """`StoreTarget.send_many` of a `replaylines.Lines` batch, stored from its fields; None when the
    batch is not one this takes (nothing used up: no queue chosen, no UNIQ_KEY made)."""
    topics, bodies, flags, maps = batch.topics, batch.bodies, batch.flags, batch.maps
    if not topics:
        return None
    topic = topics[0]
    broker = target.broker
    if broker.read_only or topics.count(topic) != len(topics) or topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
        return None
    tc = broker.topics.select(topic)
    if tc is None or not tc.writeable or tc.write_queue_nums < 1:
        return None  # created (or refused) by the per-message path
    if topic not in target.checked_topics:
        try:
            check_send_topic(topic)
        except InvalidInput:
            return None
        target.checked_topics.add(topic)
    lens = list(map(len, bodies))
    if min(lens) <= 0 or max(lens) > broker.config.max_message_size or not _maps_pass(maps):
        return None
    if min(flags) < -_INT32 or max(flags) >= _INT32:
        return None
    now = int(time.time() * 1000)
    n, count = tc.write_queue_nums, len(bodies)
    start = target._next.get(topic)
    if start is None:
        start = int.from_bytes(os.urandom(2), "big")
    first = start % n
    qids = [(first + i) % n for i in range(count)]
    uniqs = target.uniq.create_many(now, count)
    cluster, uniq_key, cluster_key = broker.config.broker_cluster_name, P.UNIQ_KEY, P.CLUSTER
    put = _put_templated(broker.store, topic, qids, now, flags, bodies, maps, uniqs, cluster)
    if put is not None:
        target._next[topic] = qids[-1] + 1
        return StoredLines("SEND_OK" if put.status == "PUT_OK" else put.status, topic, uniqs,
                           host_hex(put.store_host), put.wrote_offsets, qids, put.queue_offsets, batch.origins)
    for props, u in zip(maps, uniqs, strict=True):  # LocalBroker.send_batch's preparation of each map
        props[uniq_key] = u
        props[cluster_key] = cluster
    try:
        ordered = _broker_order(maps)
        store = broker.store
        put = store.put_batch(topic, qids, 0, now, _BORN_HOST, 0, flags, bodies, ordered)
        if put is None:  # a new CommitLog file, a hook...: the MessageExts send_batch stores the same from
            store_host = broker.store_host
            ms = [MessageExt(topic, b, queue_id=q, flag=f, properties=p, born_timestamp=now,
                             store_host=store_host) for b, q, f, p in zip(bodies, qids, flags, ordered, strict=True)]
            puts = broker.send_batch(ms, checked=True)
    except Exception:
        for props in maps:  # as the caller gave them (it sends them again one by one)
            del props[uniq_key], props[cluster_key]
        raise
    target._next[topic] = qids[-1] + 1
    if put is None:
        return _Rows(topic, uniqs, qids, puts, batch.origins)  # type: ignore[return-value]
    queue_offsets = put.queue_offsets or [put.queue_offset + i for i in range(count)]
    return StoredLines("SEND_OK" if put.status == "PUT_OK" else put.status, topic, uniqs, host_hex(put.store_host),
                       put.wrote_offsets, qids, queue_offsets, batch.origins)


_TEMPLATES: dict[tuple[tuple[str, ...], str], tuple[str, tuple[str, ...]]] = {}


def _template(keys: tuple[str, ...], cluster: str) -> tuple[str, tuple[str, ...]]:
    """The properties text of a map with `keys` once UNIQ_KEY and CLUSTER are added (as
    `store_lines` adds them), in the broker's order (`P.broker_order`), as a `str.format`
    template: field i is the value of keys[i], field len(keys) the UNIQ_KEY; CLUSTER's value is
    in the text. With the stored names in order."""
    found = _TEMPLATES.get((keys, cluster))
    if found is None:
        if len(_TEMPLATES) > 256:
            _TEMPLATES.clear()
        order = tuple(P.broker_order(dict.fromkeys((*keys, P.UNIQ_KEY, P.CLUSTER)), owned=True))
        index = {k: i for i, k in enumerate(keys)}
        index[P.UNIQ_KEY] = len(keys)

        def brace(text: str) -> str:
            return text.replace("{", "{{").replace("}", "}}")

        parts = [brace(k) + P.NAME_VALUE_SEPARATOR + (brace(cluster) if k == P.CLUSTER else f"{{{index[k]}}}")
                 + P.PROPERTY_SEPARATOR for k in order]
        found = _TEMPLATES[keys, cluster] = ("".join(parts), order)
    return found


def _put_templated(store: Any, topic: str, qids: list[int], now: int, flags: list[int], bodies: list[bytes],
                   maps: list[dict[str, str]], uniqs: list[str], cluster: str) -> Any:
    """`put_batch` of the maps with UNIQ_KEY and CLUSTER added, in the broker's order, when they
    all have the same names in the same order (a replayed stream's usually have): each map's
    properties text made from one template in C (`str.format`), the maps left as they are;
    None (nothing stored) otherwise, or when `batchput.put_fields` does not take the batch."""
    keys = tuple(maps[0])
    if (list(map(tuple, maps)).count(keys) != len(maps) or P.UNIQ_KEY in keys or P.CLUSTER in keys
            or P.TAGS in keys or P.KEYS in keys):
        return None
    template, order = _template(keys, cluster)
    fill = template.format
    if len(keys) > 1:
        values = itemgetter(*keys)
        texts = [fill(*values(m), u) for m, u in zip(maps, uniqs, strict=True)]
    elif keys:
        key = keys[0]
        texts = [fill(m[key], u) for m, u in zip(maps, uniqs, strict=True)]
    else:
        texts = [fill(u) for u in uniqs]
    encoded = [t.encode("utf-8") for t in texts]
    lens = list(map(len, encoded))
    longest = max(lens)
    if longest > MAX_PROPERTIES_LENGTH:
        return None
    if min(lens) == longest:  # ids of one length: one length field for all
        head = _I16.pack(longest)
        fields = [head + b for b in encoded]
    else:
        i16 = _I16.pack
        fields = [i16(len(b)) + b for b in encoded]
    return put_fields(store, topic, qids, now, _BORN_HOST, flags, bodies, fields, uniqs, order)


def _broker_order(maps: list[dict[str, str]]) -> list[dict[str, str]]:
    """`P.broker_order(m, owned=True)` of each map; the order is worked out once for a run of
    maps with the same keys (a batch's maps mostly have)."""
    out: list[dict[str, str]] = []
    add = out.append
    last: tuple[str, ...] | None = None
    order: tuple[str, ...] = ()
    same = True
    for m in maps:
        keys = tuple(m)
        if keys != last:
            last = keys
            order = tuple(P.broker_order(dict.fromkeys(keys)))
            same = order == keys
        add(m if same else {k: m[k] for k in order})
    return out


class _Rows:
    """Results of a batch `send_batch` stored with one status per message (a flush timeout...)."""

    def __init__(self, topic: str, uniqs: list[str], qids: list[int], puts: list[Any],
                 origins: list[str | None]) -> None:
        self.topic = topic
        self._rows = []
        for u, q, put, origin in zip(uniqs, qids, puts, origins, strict=True):
            status = str(getattr(put.status, "value", put.status))
            self._rows.append({"status": "SEND_OK" if status == "PUT_OK" else status, "msgId": u,
                               "offsetMsgId": put.offset_msg_id, "topic": topic, "queueId": q,
                               "queueOffset": put.queue_offset, "originMsgId": origin})

    def rows(self) -> list[dict[str, Any]]:
        return self._rows

    def json_lines(self) -> str:
        return "".join(orjson.dumps(r).decode("utf-8") + "\n" for r in self._rows)
