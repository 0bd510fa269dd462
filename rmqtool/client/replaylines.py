"""`replay --jsonl` lines into replayed messages' fields, without a MessageExt or Message per line.

Why: the per-message path parses a line into a `MessageExt` (`from_json_lines`), builds the
replayed `Message` from it (`replay_message`), a second `MessageExt` for the store
(`StoreTarget.send_many`), checks each map entry by entry (`LocalBroker.check_batch`) and
makes a result dict per message: together about as much CPU as the whole store put. Here a
batch of lines becomes four lists (topic, body, flag, final property map) in one loop over
orjson's dicts, is checked as a batch (what the Java broker checks: the topic, body sizes,
property names, separators and the map size), goes to the store with one
`MessageStore.put_batch` (a queue per message, as `LocalBroker.send_records` does), and its
results become JSON text in one comprehension.

The fields are those of the per-message path (tests/client/test_replay_lines.py compares
them for random lines, and the stores written byte for byte): a line of an unusual shape is
turned into its fields by that path itself (`from_json_lines` + `replay_message`, the same
errors). Storing the batch is client/replaystore.py's.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import orjson

from rmqtool.client.message import Message
from rmqtool.client.replay import DROPPED_PROPERTIES, from_json_lines, replay_message
from rmqtool.client.replaycolumns import loads_all, uniform_fields
from rmqtool.errors import InvalidInput
from rmqtool.layouts import properties as P

_INT32 = 1 << 31


class _Unusual(Exception):
    """A line the per-message path turns into fields (its own checks and errors)."""


@dataclass(slots=True)
class Lines:
    """A batch of replayed messages as fields: what `replay_message` gives, WAIT included."""

    topics: list[str]
    bodies: list[bytes]
    flags: list[int]
    maps: list[dict[str, str]]
    origins: list[str | None]
    error: InvalidInput | None = None  # a bad line: the ones before it are in the lists

    def messages(self) -> list[Message]:
        return [Message(t, b, properties=p, flag=f)
                for t, b, f, p in zip(self.topics, self.bodies, self.flags, self.maps, strict=True)]


def parse_lines(lines: list[bytes], first_line: int, *, to_topic: str | None = None,
                warn: Callable[[str], None] | None = None) -> Lines:
    """The replayed messages of `lines` (line numbers from `first_line`), as `from_json_lines`
    followed by `replay_message` gives them; empty lines are skipped, a bad one ends the batch."""
    objs = loads_all(lines)
    if objs is not None:
        fields = uniform_fields(objs, to_topic)
        if fields is not None:  # lines of one shape: checked and built column by column
            return Lines(*fields)
    topics: list[str] = []
    bodies: list[bytes] = []
    flags: list[int] = []
    maps: list[dict[str, str]] = []
    origins: list[str | None] = []
    out = Lines(topics, bodies, flags, maps, origins)
    loads, dropped = orjson.loads, DROPPED_PROPERTIES
    tags_key, keys_key, uniq_key, origin_key, dlq_origin_key, wait_key = (P.TAGS, P.KEYS, P.UNIQ_KEY,
                                                                          P.ORIGIN_MESSAGE_ID,
                                                                          P.DLQ_ORIGIN_MESSAGE_ID, P.WAIT)
    join, drop = "".join, dropped.intersection
    add_topic, add_body, add_flag, add_map, add_origin = (topics.append, bodies.append, flags.append, maps.append,
                                                          origins.append)
    for i, line in enumerate(lines):
        try:
            o = loads(line) if objs is None else objs[i]
            get = o.get
            text = get("body")
            if type(text) is not str or "bodyBase64" in o:
                raise _Unusual
            body = text.encode()
            src = get("properties")
            if not src:
                src = {}
            elif type(src) is not dict:
                raise _Unusual
            else:
                join(src.values())  # TypeError unless every value is a str (as consume prints them)
            tags = get("tags")
            if tags and tags_key not in src:
                src[tags_key] = str(tags)
            keys = get("keys")
            if keys and keys_key not in src:
                src[keys_key] = str(keys)
            topic = to_topic or get("topic")
            if not topic:
                raise _Unusual
            flag = get("flag") or 0
            if type(flag) is not int or not -_INT32 <= flag < _INT32:
                raise _Unusual
            queue_id, queue_offset, store_time, born_time = (get("queueId"), get("queueOffset"),
                                                             get("storeTimestamp"), get("bornTimestamp"))
            if ((queue_id and type(queue_id) is not int) or (queue_offset and type(queue_offset) is not int)
                    or (store_time and type(store_time) is not int) or (born_time and type(born_time) is not int)):
                raise _Unusual
            msg_id = get("msgId")
            if msg_id and uniq_key not in src and origin_key not in src:
                src[origin_key] = str(msg_id)
            store_host, offset = get("storeHost"), get("commitLogOffset")
            if store_host and offset is not None and type(offset) is not int:
                raise _Unusual
            origin = src.get(origin_key) or src.get(dlq_origin_key) or src.get(uniq_key)
            if not origin and (store_time or (store_host and offset is not None)):
                raise _Unusual  # the origin would be an offset msgId
            props = src  # loads' own dict: the dropped names taken out in place, the others keep their order
            for name in drop(src):
                del props[name]
            if origin:
                props[origin_key] = origin
            props[wait_key] = "true"  # the Message's own, after the user map (WAIT is dropped)
            topic = str(topic)
        except Exception:  # noqa: BLE001 - any shape the loop above does not take: the per-message path
            try:
                for item in from_json_lines([line], to_topic=to_topic, warn=warn, first_line=first_line + i):
                    msg = replay_message(item)
                    topics.append(item.topic)
                    bodies.append(msg.body)
                    flags.append(msg.flag)
                    maps.append(msg.properties)
                    origins.append(msg.properties.get(origin_key))
            except InvalidInput as e:
                out.error = e
                break
            continue
        add_topic(topic)
        add_body(body)
        add_flag(flag)
        add_map(props)
        add_origin(origin or props.get(origin_key))
    return out


