"""Put-time rewrite of delay-level and timer messages (`HookUtils.handleScheduleMessage`, formats.md §5.1, §6).

Registered on `MessageStore.put_hooks`. Order matters and follows the broker: a message with a
DELAY level loses its TIMER_* request keys and takes the delay-level path; otherwise a message
with TIMER_DELAY_SEC / TIMER_DELAY_MS / TIMER_DELIVER_MS is parked on `rmq_sys_wheel_timer`.
"""

from __future__ import annotations

from collections.abc import Callable

from rmqtool.errors import InvalidMessage
from rmqtool.layouts import properties as P
from rmqtool.layouts.constants import TIMER_TOPIC
from rmqtool.layouts.message import MessageExt
from rmqtool.store.schedule import (
    delay_level_of,
    is_delivering,
    is_schedulable,
    transform_delay_level_message,
)

TIMER_REQUEST_KEYS = (P.TIMER_DELIVER_MS, P.TIMER_DELAY_SEC, P.TIMER_DELAY_MS)
ALLOWED_PRECISIONS = (100, 200, 500, 1000)
_SCHEDULE_KEYS = frozenset((P.DELAY, *TIMER_REQUEST_KEYS))


def snap_precision(precision_ms: int) -> int:
    """`MessageStoreConfig.setTimerPrecisionMs`: snap down to one of 100, 200, 500, 1000."""
    for p in reversed(ALLOWED_PRECISIONS):
        if precision_ms >= p:
            return p
    return ALLOWED_PRECISIONS[0]


def check_if_timer_message(msg: MessageExt) -> bool:
    """`HookUtils.checkIfTimerMessage`, including its side effect on delay-level messages."""
    if delay_level_of(msg) > 0:
        for key in TIMER_REQUEST_KEYS:
            msg.properties.pop(key, None)
        return False
    if msg.topic == TIMER_TOPIC or P.TIMER_OUT_MS in msg.properties:
        return False
    return any(key in msg.properties for key in TIMER_REQUEST_KEYS)


def requested_deliver_ms(msg: MessageExt, now_ms: int) -> int:
    """The delivery time a client asked for: TIMER_DELAY_SEC, else TIMER_DELAY_MS, else TIMER_DELIVER_MS."""
    props = msg.properties
    try:
        if props.get(P.TIMER_DELAY_SEC) is not None:
            return now_ms + int(props[P.TIMER_DELAY_SEC]) * 1000
        if props.get(P.TIMER_DELAY_MS) is not None:
            return now_ms + int(props[P.TIMER_DELAY_MS])
        return int(props[P.TIMER_DELIVER_MS])
    except (KeyError, ValueError):
        raise InvalidMessage("timer message: TIMER_DELAY_SEC / TIMER_DELAY_MS / TIMER_DELIVER_MS is not an "
                             "integer (WHEEL_TIMER_MSG_ILLEGAL)") from None


def round_deliver_ms(deliver_ms: int, precision_ms: int) -> int:
    """The broker's rounding: an exact multiple moves one precision back, anything else floors.

    The result is the wheel slot; the slot fires once the clock reaches slot + precision, i.e.
    at the first precision boundary at or after the requested time.
    """
    if deliver_ms % precision_ms == 0:
        return deliver_ms - precision_ms
    return deliver_ms // precision_ms * precision_ms


def transform_timer_message(msg: MessageExt, now_ms: int, precision_ms: int, max_delay_sec: int) -> MessageExt:
    """`HookUtils.transformTimerMessage`: park a future timer message on rmq_sys_wheel_timer/0."""
    deliver_ms = requested_deliver_ms(msg, now_ms)
    if deliver_ms > now_ms:
        if deliver_ms - now_ms > max_delay_sec * 1000:
            raise InvalidMessage(
                f"timer message due in {deliver_ms - now_ms} ms, more than timerMaxDelaySec={max_delay_sec} s "
                f"allows (WHEEL_TIMER_MSG_ILLEGAL)")
        deliver_ms = round_deliver_ms(deliver_ms, precision_ms)
        msg.properties[P.TIMER_OUT_MS] = str(deliver_ms)
        msg.properties[P.REAL_TOPIC] = msg.topic
        msg.properties[P.REAL_QID] = str(msg.queue_id)
        msg.properties = P.broker_order(msg.properties)
        msg.topic = TIMER_TOPIC
        msg.queue_id = 0
    elif P.TIMER_DEL_UNIQKEY in msg.properties:
        raise InvalidMessage("a timer delete (TIMER_DEL_UNIQKEY) must have a delivery time in the future "
                             "(WHEEL_TIMER_MSG_ILLEGAL)")
    return msg


def make_schedule_hook(config: object, clock: Callable[[], int], max_delay_level: int) -> Callable[[MessageExt], MessageExt]:
    """The put hook for a store with this config (`handleScheduleMessage`)."""
    precision = snap_precision(int(getattr(config, "timer_precision_ms", 1000)))
    max_delay_sec = int(getattr(config, "timer_max_delay_sec", 259_200))
    wheel_enabled = bool(getattr(config, "timer_wheel_enable", True))

    def handle_schedule_message(msg: MessageExt) -> MessageExt:
        if msg.properties.keys().isdisjoint(_SCHEDULE_KEYS):
            return msg  # neither DELAY nor a timer request: nothing below would change it
        if is_delivering() or not is_schedulable(msg):
            return msg
        if msg.topic != TIMER_TOPIC and check_if_timer_message(msg):
            if not wheel_enabled:
                raise InvalidMessage("timer messages need timerWheelEnable=true (WHEEL_TIMER_NOT_ENABLE)")
            transform_timer_message(msg, clock(), precision, max_delay_sec)
        if delay_level_of(msg) > 0:
            transform_delay_level_message(msg, max_delay_level)
        return msg

    handle_schedule_message.rmqtool_schedule_hook = True  # type: ignore[attr-defined]
    # a message with none of these keys it returns as it is: `put_message` need not call it
    handle_schedule_message.property_keys = _SCHEDULE_KEYS  # type: ignore[attr-defined]
    return handle_schedule_message
