"""A Java producer's SEND_BATCH_MESSAGE body taken a column at a time (store/sendbatch.py).

`DefaultMQProducer.send(Collection)` encodes each message with `MessageDecoder.encodeMessage`:
totalSize, magic, bodyCRC, flag, body, properties. One producer's batch is usually uniform:
bodies of one length, property texts of one length with the same keys in the same order (the
client's HashMap order) and values of the same lengths (TAGS, WAIT, a UNIQ_KEY of 32 hex
digits). `uniform_columns` proves that for the whole body with a few C calls (one
`Struct.iter_unpack` over records of one size, one `bytes.translate` of all texts to their
separators against the first text's, one AND of them all as an integer for the names), checks
the first text as the per-message walk checks each, takes every value out with one `Struct`
made for the first text's skeleton (2026-12-05: 344k -> 300k instructions a batch of 32 from
benchmarks/java, against translating and splitting every text), and builds every stored
properties field from one `itemgetter` over all the values and the shape's constant pieces
(names, the broker's entries, the length field), joined once. The
result is what the walk (`sendbatch._walk`) hands `MessageStore.put_encoded` for the same body;
anything else gets None and the walk.

`plan_shape` is the stored order of a key shape, shared by both.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from operator import itemgetter, methodcaller
from typing import Any

from rmqtool.layouts import properties as P
from rmqtool.layouts.constants import MAX_PROPERTIES_LENGTH
from rmqtool.store.batchput import _SCHEDULE_KEYS

# a key shape's stored order (indexes into inner entries + added ones), added entries, UNIQ_KEY to
# make, the indexes themselves
Plan = tuple[Callable[[list[str]], tuple[str, ...]], list[str], bool, list[int]]
# flags, bodies, properties fields, TAGS, UNIQ_KEY and KEYS values: `put_encoded`'s columns
Columns = tuple[list[int], list[bytes], tuple[bytes, ...], list["str | None"], list["str | None"],
                list["str | None"]]

_BATCH_HEAD = struct.Struct(">iiiii")  # totalSize, magic, bodyCRC, flag, bodyLen
_I16 = struct.Struct(">h")
_split_entry = methodcaller("split", P.NAME_VALUE_SEPARATOR, 1)
_SEPARATORS = bytes(b if b in (1, 2) else 0 for b in range(256))  # a text's skeleton: where its separators are
_records: dict[tuple[int, int], struct.Struct] = {}  # (bodyLen, propertiesLength) -> one record's layout


class _Template:
    """What every stored field of a uniform batch of one shape, skeleton and size shares."""

    __slots__ = ("values", "mask", "expected", "getter", "consts", "split", "tags_at", "uniq_at", "keys_at")

    def __init__(self, text: bytes, value_spans: list[tuple[int, int]], count: int,
                 getter: Callable[[tuple[bytes, ...]], tuple[bytes, ...]], consts: tuple[bytes, ...],
                 field_size: int, at: tuple[int, int, int]) -> None:
        # every text's values, message by message, in one C call: the names and separators
        # between them are skipped, and checked below against the first text's
        fmt, pos = [], 0
        for start, end in value_spans:
            fmt.append(f"{start - pos}x{end - start}s")
            pos = end
        fmt.append(f"{len(text) - pos}x")
        self.values = struct.Struct("".join(fmt) * count).unpack
        # the joined texts as one integer, its value bytes masked out, equal to the first text's
        # names and separators `count` times: one AND and one comparison for every name
        keep = bytearray(b"\xff" * len(text))
        blank = bytearray(text)
        for start, end in value_spans:
            keep[start:end] = bytes(end - start)
            blank[start:end] = bytes(end - start)
        self.mask = int.from_bytes(bytes(keep) * count, "big")
        self.expected = int.from_bytes(bytes(blank) * count, "big")
        self.getter, self.consts = getter, consts
        self.split = struct.Struct(f"{field_size}s" * count).unpack  # the joined fields, one by one
        self.tags_at, self.uniq_at, self.keys_at = at


_templates: dict[tuple[Any, ...], _Template | None] = {}


def plan_shape(shape: tuple[str, ...], extra: list[tuple[str, str]], cluster: str) -> Plan | None:
    """How a map of inner keys `shape` (in the body's order) is stored: the entries the broker
    adds, and the HashMap order of them all as indexes into the inner entries followed by
    those; None when a key is empty or asks the schedule hook for something.

    As `_send_batch` + `LocalBroker._prepare` build it: the batch's properties fill in what
    the map lacks, a UNIQ_KEY where it has none, CLUSTER set (in its place if present), then
    `broker_order`."""
    if "" in shape or not _SCHEDULE_KEYS.isdisjoint(shape):
        return None
    nvsep = P.NAME_VALUE_SEPARATOR
    where = {k: i for i, k in enumerate(shape)}
    added: list[str] = []
    for k, v in extra:
        if k not in where:
            where[k] = len(shape) + len(added)
            added.append(k + nvsep + v)
    need_uniq = P.UNIQ_KEY not in where
    if need_uniq:
        where[P.UNIQ_KEY] = -1  # placed below, after CLUSTER's entry
    where[P.CLUSTER] = len(shape) + len(added)
    added.append(P.CLUSTER + nvsep + cluster)
    if need_uniq:
        where[P.UNIQ_KEY] = len(shape) + len(added)  # the id generated for each message
    order = P.broker_order(dict.fromkeys(where, ""), owned=True)
    positions = [where[k] for k in order]
    return itemgetter(*positions), added, need_uniq, positions


def _template(text: str, shape: tuple[str, ...], extra: list[tuple[str, str]], cluster: str,
              k: int) -> _Template | None:
    """The stored fields of `k` messages whose texts have the first one's (`text`) inner keys
    `shape` and separators in the same places: each is the length, then the plan's order of the
    inner entries and the broker's, as constant pieces around each inner value; the getter picks,
    from all values (message by message) followed by the pieces, every field's items in turn.
    None where the walk must decide (a UNIQ_KEY to make, a key `plan_shape` refuses, an inner
    entry not stored, no room)."""
    plan = plan_shape(shape, extra, cluster)
    if plan is None or plan[2]:
        return None
    added, positions = plan[1], plan[3]
    m = len(shape)
    if len(positions) != m + len(added):  # an inner CLUSTER entry the broker's replaces: its length varies
        return None
    added_b = [a.encode("utf-8") for a in added]
    raw = text.encode("ascii")
    stored = len(raw) + sum(len(a) + 1 for a in added_b)
    if stored > MAX_PROPERTIES_LENGTH:
        return None
    consts: list[bytes] = []
    refs: list[int] = []  # one field: -1 - i for constant i, else the inner value's index
    piece = _I16.pack(stored)
    for w in positions:
        if w < m:
            consts.append(piece + shape[w].encode("ascii") + b"\x01")
            refs += (-len(consts), w)
            piece = b"\x02"
        else:
            piece += added_b[w - m] + b"\x02"
    consts.append(piece)
    refs.append(-len(consts))
    base = k * m  # the constants follow the values
    items = [base - 1 - r if r < 0 else j * m + r for j in range(k) for r in refs]
    at = tuple(shape.index(key) if key in shape else -1 for key in (P.TAGS, P.UNIQ_KEY, P.KEYS))
    spans, pos = [], 0
    for entry in text.split(P.PROPERTY_SEPARATOR)[:-1]:  # name, separator, value, separator
        start = pos + entry.index(P.NAME_VALUE_SEPARATOR) + 1
        pos += len(entry) + 1
        spans.append((start, pos - 1))
    return _Template(raw, spans, k, itemgetter(*items), tuple(consts), stored + 2, at)  # type: ignore[arg-type]


def uniform_columns(data: bytes, max_size: int, room: int, extra: list[tuple[str, str]], cluster: str,
                    defaults: tuple[str | None, str | None, str | None]) -> Columns | None:
    """`put_encoded`'s columns for a body of uniform ASCII messages that each carry a UNIQ_KEY
    (or have the batch's), exactly as the walk makes them; None when the body is anything else.

    `room` and `max_size` are the walk's limits for a text and a body, `extra` the batch's
    own properties, `defaults` its TAGS, UNIQ_KEY and KEYS (for messages without their own)."""
    n = len(data)
    if n < 22:
        return None
    blen = _BATCH_HEAD.unpack_from(data)[4]
    if blen <= 0 or blen > max_size or blen + 22 > n:
        return None
    plen = _I16.unpack_from(data, 20 + blen)[0]
    if plen <= 0 or plen > room or n % (22 + blen + plen):
        return None
    record = _records.get((blen, plen))
    if record is None:
        if len(_records) > 64:
            _records.clear()
        record = _records[blen, plen] = struct.Struct(f">i8xii{blen}sh{plen}s")  # magic and bodyCRC unread
    totals, flags, blens, bodies, plens, texts = zip(*record.iter_unpack(data), strict=True)
    k = len(texts)
    if blens.count(blen) != k or plens.count(plen) != k or min(totals) < 22 + blen:
        return None  # records of other sizes: the walk finds where they start
    first = texts[0]
    joined = b"".join(texts)
    skeleton = first.translate(_SEPARATORS)
    # each text ASCII and ending with the separator, its separators where the first text has them
    if first[-1] != 2 or not joined.isascii() or joined.translate(_SEPARATORS) != skeleton * k:
        return None
    text = first.decode("ascii")
    psep = P.PROPERTY_SEPARATOR
    entries = text.split(psep)
    entries.pop()  # after the trailing separator
    try:
        props = dict(map(_split_entry, entries))
    except ValueError:
        return None
    if len(props) != len(entries) or text.count(P.NAME_VALUE_SEPARATOR) != len(entries) or "" in props.values():
        return None  # the walk's checks of each text: the others have the same separators
    shape = tuple(props)
    # the skeleton places every value: texts of one shape and length may still differ there
    key = (skeleton, shape, tuple(kv for kv in extra if kv[0] not in props), cluster, k)
    template = _templates.get(key, False)
    if template is False:
        if len(_templates) > 256:
            _templates.clear()
        template = _templates[key] = _template(text, shape, extra, cluster, k)
    if template is None:
        return None
    if int.from_bytes(joined, "big") & template.mask != template.expected:
        return None  # another message has other keys (or the same keys in another order)
    values = template.values(joined)
    m = len(shape)
    run = b"".join(template.getter(values + template.consts))
    fields = template.split(run)  # each message's field: one C call

    def column(at: int, default: str | None) -> list[str | None]:
        if at < 0:
            return [default] * k
        items = values[at::m]
        if items.count(items[0]) == k:  # one value for all (a batch's TAGS): decoded once
            return [items[0].decode()] * k
        return list(map(bytes.decode, items))

    dtags, duniq, dkeys = defaults
    return (list(flags), list(bodies), fields, column(template.tags_at, dtags), column(template.uniq_at, duniq),
            column(template.keys_at, dkeys))
