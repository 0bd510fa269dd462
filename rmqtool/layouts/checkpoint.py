"""`checkpoint` (StoreCheckpoint) and `config/timercheck` (TimerCheckpoint), formats.md §8.1, §5.5.

Both are 4096-byte files overwritten in place; only the leading fields carry data.
"""

from __future__ import annotations

import struct

from construct import Int64sb, Struct

StoreCheckpoint = Struct(
    "physicMsgTimestamp" / Int64sb,  # store time of the last flushed CommitLog message
    "logicsMsgTimestamp" / Int64sb,  # store time of the last message written to a ConsumeQueue
    "indexMsgTimestamp" / Int64sb,  # endTimestamp of the last full index file flushed
    "masterFlushedOffset" / Int64sb,  # 5.0.0+
    "confirmPhyOffset" / Int64sb,  # 5.1.1+
)

TimerCheckpoint = Struct(
    "lastReadTimeMs" / Int64sb,  # next slot time to dequeue
    "lastTimerLogFlushPos" / Int64sb,
    "lastTimerQueueOffset" / Int64sb,  # next rmq_sys_wheel_timer/0 offset to enqueue
    "masterTimerQueueOffset" / Int64sb,
    "stateVersion" / Int64sb,  # dataVersion.stateVersion
    "timestamp" / Int64sb,  # dataVersion.timestamp
    "counter" / Int64sb,  # dataVersion.counter
)

STORE_CHECKPOINT = struct.Struct(">qqqqq")
TIMER_CHECKPOINT = struct.Struct(">qqqqqqq")
