"""BatchConsumeQueue unit: one CommitLog record of a BatchCQ topic queue, which may carry many messages.

RocketMQ 5.x: `store/queue/BatchConsumeQueue.java` (`CQ_STORE_UNIT_SIZE = 46`,
`putBatchMessagePositionInfo`, `recover`); see formats/batchconsumequeue.md. Unlike a
ConsumeQueue unit, the queue offset is not the unit's position: it is `msgBaseOffset`, and the
unit covers `batchSize` queue offsets (an inner-batch record's `INNER_BASE` and `INNER_NUM`).
"""

from __future__ import annotations

import struct

from construct import Int16sb, Int32sb, Int64sb, Struct

BcqUnit = Struct(
    "commitLogOffset" / Int64sb,  # physical offset of the record
    "size" / Int32sb,  # the record's totalSize
    "tagsCode" / Int64sb,  # String.hashCode() of TAGS (MSG_TAG_OFFSET_INDEX = 12)
    "storeTimestamp" / Int64sb,  # the record's store time (MSG_STORE_TIME_OFFSET_INDEX = 20)
    "msgBaseOffset" / Int64sb,  # queue offset of the first message (MSG_BASE_OFFSET_INDEX = 28)
    "batchSize" / Int16sb,  # messages in the record: INNER_NUM, else 1 (MSG_BATCH_SIZE_INDEX = 36)
    "compactedOffset" / Int32sb,  # INVALID_POS (-1) when written (MSG_COMPACT_OFFSET_INDEX = 38)
    "reserved" / Int32sb,  # written as 0
)

BCQ_UNIT = struct.Struct(">qiqqqhii")  # hot-path twin of BcqUnit, tested against it
INVALID_POS = -1  # BatchConsumeQueue.INVALID_POS, the compactedOffset of a fresh unit
