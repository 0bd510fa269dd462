"""The timer store's pure rules: the timer fields of a record, the delete key, the roll window.

What `TimerMessageStore` decides from numbers alone (formats.md §5.4-5.6), apart from the files
and services: `peek_timer_fields` reads TIMER_OUT_MS / REAL_TOPIC / TIMER_DEL_UNIQKEY straight from
a record's properties (the enqueue's hot path), `roll_target` is `doEnqueue`'s roll rule.
"""

from __future__ import annotations

import struct

from rmqtool.layouts import properties as P
from rmqtool.layouts.constants import MESSAGE_MAGIC_CODE_V2, TIMER_BLANK_SLOTS, TIMER_SLOTS_TOTAL

LONG_MAX = 2**63 - 1
DEFAULT_TIMERLOG_FILE_SIZE = 100 * 1024 * 1024
# the put statuses that count as stored
PUT_OK = ("PUT_OK", "FLUSH_DISK_TIMEOUT", "FLUSH_SLAVE_TIMEOUT", "SLAVE_NOT_AVAILABLE")

_I32 = struct.Struct(">i")
_I16 = struct.Struct(">h")
_KEY_OUT = "\x02" + P.TIMER_OUT_MS + "\x01"
_KEY_REAL_TOPIC = "\x02" + P.REAL_TOPIC + "\x01"
_KEY_DEL = "\x02" + P.TIMER_DEL_UNIQKEY + "\x01"


def _prop(text: str, key: str) -> str | None:
    i = text.find(key)
    if i < 0:
        return None
    i += len(key)
    j = text.find("\x02", i)
    return text[i:] if j < 0 else text[i:j]


def peek_timer_fields(raw: bytes) -> tuple[int, str | None, bool] | None:
    """(TIMER_OUT_MS, REAL_TOPIC, has TIMER_DEL_UNIQKEY) of a record, parsing nothing else.

    Returns TIMER_OUT_MS = -1 when it is missing or not a number (the message is then handed
    over at once rather than lost), None when the bytes are not a record.
    """
    try:
        magic = _I32.unpack_from(raw, 4)[0]
        sys_flag = _I32.unpack_from(raw, 36)[0]
        p = 48 + (20 if sys_flag & 0x10 else 8) + 8 + (20 if sys_flag & 0x20 else 8) + 12
        p += 4 + _I32.unpack_from(raw, p)[0]
        if magic == MESSAGE_MAGIC_CODE_V2:
            p += 2 + _I16.unpack_from(raw, p)[0]
        else:
            p += 1 + raw[p]
        props_len = _I16.unpack_from(raw, p)[0]
        text = "\x02" + bytes(raw[p + 2: p + 2 + props_len]).decode("utf-8", "replace")
    except (struct.error, IndexError):
        return None
    out = _prop(text, _KEY_OUT)
    try:
        delayed = int(out) if out is not None else -1
    except ValueError:
        delayed = -1
    return delayed, _prop(text, _KEY_REAL_TOPIC), _KEY_DEL in text


def build_delete_key(real_topic: str | None, uniq_key: str) -> str:
    """`TimerMessageStore.buildDeleteKey`: what TIMER_DEL_UNIQKEY must hold to cancel a message."""
    return f"{real_topic}+{uniq_key}"


def roll_window_slots(configured: int, slots_total: int = TIMER_SLOTS_TOTAL) -> int:
    """`timerRollWindowSlots`: the configured value unless it is < 2 or > slotsTotal - 60."""
    if configured > slots_total - TIMER_BLANK_SLOTS or configured < 2:
        return slots_total - TIMER_BLANK_SLOTS
    return configured


def roll_target(delayed_time: int, write_time: int, window_slots: int, precision_ms: int) -> tuple[int, bool]:
    """`doEnqueue`'s roll rule: (slot time to use, rolled?)."""
    window = window_slots * precision_ms
    if delayed_time - write_time < window:
        return delayed_time, False
    if delayed_time - write_time - window < window_slots // 3 * precision_ms:
        return write_time + (window_slots // 2) * precision_ms, True  # give the next roll room
    return write_time + window, True
