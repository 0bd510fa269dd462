"""TimerLog unit and blank, timer wheel Slot (formats.md §5.2, §5.3).

RocketMQ 5.x: `TimerLog`, `TimerWheel`, `Slot`. A wheel slot's time is stored in units of
precision (seconds by default), not milliseconds.
"""

from __future__ import annotations

import struct

from construct import Const, Int32sb, Int64sb, Struct

from rmqtool.layouts.constants import BLANK_MAGIC_CODE

TimerLogUnit = Struct(
    "size" / Int32sb,  # always 52
    "prevPos" / Int64sb,  # previous unit of the same slot, -1 if none
    "magic" / Int32sb,  # DEFAULT 1 | ROLL 2 | DELETE 4
    "currWriteTime" / Int64sb,  # enqueue time, floored to precision
    "delayTime" / Int32sb,  # delayedTime - currWriteTime, ms
    "offsetPy" / Int64sb,  # CommitLog offset of the message on rmq_sys_wheel_timer
    "sizePy" / Int32sb,  # that record's totalSize
    "hashCodeOfRealTopic" / Int32sb,  # REAL_TOPIC.hashCode(), for metrics
    "reserved" / Int64sb,
)

# Written when a unit would not leave 16 bytes at the end of the file.
TimerLogBlank = Struct(
    "size" / Int32sb,  # bytes left in the file
    "zero" / Int64sb,
    "magicCode" / Const(BLANK_MAGIC_CODE, Int32sb),
)

TimerSlot = Struct(
    "timeSecs" / Int64sb,  # slot time / precisionMs
    "firstPos" / Int64sb,  # oldest TimerLog unit of the slot
    "lastPos" / Int64sb,  # newest unit: walk prevPos backwards from here
    "num" / Int32sb,  # live messages
    "magic" / Int32sb,  # unused, 0
)

TIMERLOG_UNIT = struct.Struct(">iqiqiqiiq")
TIMER_SLOT = struct.Struct(">qqqii")
