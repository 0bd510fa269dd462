"""ConsumeQueue unit: where one message of a topic queue sits in the CommitLog (formats.md §3.1).

RocketMQ 5.x: `ConsumeQueue.CQ_STORE_UNIT_SIZE`; see formats/consumequeue.md.
"""

from __future__ import annotations

import struct

from construct import Int32sb, Int64sb, Struct

CqUnit = Struct(
    "commitLogOffset" / Int64sb,  # physical offset of the record
    "size" / Int32sb,  # the record's totalSize; 0x7FFFFFFF in pre-fill blanks
    "tagsCode" / Int64sb,  # String.hashCode() of TAGS; the delivery time on SCHEDULE_TOPIC_XXXX
)

CQ_UNIT = struct.Struct(">qiq")  # hot-path twin of CqUnit, tested against it
CQ_BLANK_UNIT = CQ_UNIT.pack(0, 0x7FFFFFFF, 0)  # ConsumeQueue.fillPreBlank
