"""IndexFile: header, hash slots and entries (formats.md §4).

RocketMQ 5.x: `IndexHeader`, `IndexFile`. File = header (40 B) + hashSlotNum int32 slots +
indexNum 20-byte entries; entry n (n >= 1) at 40 + hashSlotNum*4 + n*20.
"""

from __future__ import annotations

import struct

from construct import Int32sb, Int64sb, Struct

IndexHeader = Struct(
    "beginTimestamp" / Int64sb,  # store time of the first indexed message
    "endTimestamp" / Int64sb,  # store time of the last indexed message
    "beginPhyOffset" / Int64sb,
    "endPhyOffset" / Int64sb,
    "hashSlotCount" / Int32sb,  # how often an empty slot was taken
    "indexCount" / Int32sb,  # entries + 1 (starts at 1)
)

IndexSlot = Struct("entry" / Int32sb)  # newest entry number in the bucket, 0 = empty

IndexEntry = Struct(
    "keyHash" / Int32sb,  # abs(key.hashCode()), 0 for Integer.MIN_VALUE
    "phyOffset" / Int64sb,
    "timeDiff" / Int32sb,  # seconds since header.beginTimestamp
    "prevIndex" / Int32sb,  # previous entry in the same bucket, 0 = end of chain
)

INDEX_HEADER = struct.Struct(">qqqqii")
INDEX_ENTRY = struct.Struct(">iqii")
