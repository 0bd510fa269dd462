"""The properties string of a CommitLog record (formats.md §2.7).

`name \\x01 value \\x02` per entry, UTF-8. Decoding follows
`MessageDecoder.string2messageProperties`: split on \\x02, split each segment of 3+ chars at the
first \\x01, drop segments with an empty key or value.
"""

from __future__ import annotations

from rmqtool.layouts.constants import NAME_VALUE_SEPARATOR, PROPERTY_SEPARATOR
from rmqtool.layouts.javahash import hashmap_order

# MessageConst keys used across the code base.
KEYS = "KEYS"
TAGS = "TAGS"
WAIT = "WAIT"
DELAY = "DELAY"
RETRY_TOPIC = "RETRY_TOPIC"
REAL_TOPIC = "REAL_TOPIC"
REAL_QID = "REAL_QID"
TRAN_MSG = "TRAN_MSG"
PGROUP = "PGROUP"
ORIGIN_MESSAGE_ID = "ORIGIN_MESSAGE_ID"
UNIQ_KEY = "UNIQ_KEY"
CLUSTER = "CLUSTER"
MAX_RECONSUME_TIMES = "MAX_RECONSUME_TIMES"
RECONSUME_TIME = "RECONSUME_TIME"
SHARDING_KEY = "__SHARDINGKEY"
TRANSACTION_ID = "__transactionId__"
TRANSACTION_CHECK_TIMES = "TRANSACTION_CHECK_TIMES"
TRAN_PREPARED_QUEUE_OFFSET = "TRAN_PREPARED_QUEUE_OFFSET"
CHECK_IMMUNITY_TIME_IN_SECONDS = "CHECK_IMMUNITY_TIME_IN_SECONDS"
MIN_OFFSET = "MIN_OFFSET"
MAX_OFFSET = "MAX_OFFSET"
TIMER_DELAY_SEC = "TIMER_DELAY_SEC"
TIMER_DELAY_MS = "TIMER_DELAY_MS"
TIMER_DELIVER_MS = "TIMER_DELIVER_MS"
TIMER_OUT_MS = "TIMER_OUT_MS"
TIMER_ENQUEUE_MS = "TIMER_ENQUEUE_MS"
TIMER_DEQUEUE_MS = "TIMER_DEQUEUE_MS"
TIMER_ROLL_TIMES = "TIMER_ROLL_TIMES"
TIMER_DEL_UNIQKEY = "TIMER_DEL_UNIQKEY"
BORN_TIMESTAMP = "BORN_TIMESTAMP"
TRACE_CONTEXT = "TRACE_CONTEXT"
DLQ_ORIGIN_TOPIC = "DLQ_ORIGIN_TOPIC"
DLQ_ORIGIN_MESSAGE_ID = "DLQ_ORIGIN_MESSAGE_ID"
INNER_NUM = "INNER_NUM"
INNER_BASE = "INNER_BASE"
TRANSIENT_PREFIX = "__RMQ.TRANSIENT."


def encode_properties(props: dict[str, str]) -> str:
    """`messageProperties2String`: entries in the dict's order, values that are None skipped.

    Every stored record pays for this, so the usual map (str keys and values, no None) is
    joined by `str.join` in C; anything else takes the per-entry formatting, which gives the
    same text.
    """
    if not props:
        return ""
    if None not in props.values():
        try:
            return PROPERTY_SEPARATOR.join(map(NAME_VALUE_SEPARATOR.join, props.items())) + PROPERTY_SEPARATOR
        except TypeError:  # a non-str key or value: formatted below, as the f-string does
            pass
    return "".join(
        f"{k}{NAME_VALUE_SEPARATOR}{v}{PROPERTY_SEPARATOR}" for k, v in props.items() if v is not None
    )


def decode_properties(text: str) -> dict[str, str]:
    """`string2messageProperties`, including its silent drops."""
    out: dict[str, str] = {}
    if not text:
        return out
    for seg in text.split(PROPERTY_SEPARATOR):
        if len(seg) < 3:
            continue
        i = seg.find(NAME_VALUE_SEPARATOR)
        if 0 < i < len(seg) - 1:
            out[seg[:i]] = seg[i + 1 :]
    return out


_ORDER_CACHE: dict[tuple[tuple[str, ...], int], tuple[str, ...]] = {}


def broker_order(props: dict[str, str], initial_capacity: int = 128, *, owned: bool = False) -> dict[str, str]:
    """The map re-ordered as a 5.1.0+ broker stores it (`new HashMap<>(128)` in insertion order).

    A new dict, or with `owned=True` (the caller's own copy) `props` itself when its order is
    already the broker's.

    The order depends only on the key sequence, which most messages share (a broker applies
    this to every message it stores), so it is memoised on it.
    """
    key = (tuple(props), initial_capacity)
    order = _ORDER_CACHE.get(key)
    if order is None:
        if len(_ORDER_CACHE) > 4096:
            _ORDER_CACHE.clear()
        order = _ORDER_CACHE[key] = tuple(hashmap_order(list(key[0]), initial_capacity))
    if order == key[0]:
        return props if owned else dict(props)  # already in HashMap order
    return {k: props[k] for k in order}
