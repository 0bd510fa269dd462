"""ConsumeQueueExt unit and the "ext address" a ConsumeQueue unit's tagsCode may hold instead of a tag hash.

RocketMQ 5.x: `store/ConsumeQueueExt.java` (`CqExtUnit`, `isExtAddr`, `decorate`, `unDecorate`,
`fullFillToEnd`); see formats/consumequeue_ext.md. Written only when `enableConsumeQueueExt=true`:
the CQ unit then stores `extOffset + Long.MIN_VALUE`, far below any sign-extended int32 tag hash.
"""

from __future__ import annotations

import struct

from construct import Bytes, Int16sb, Int64sb, Struct

CqExtUnit = Struct(
    "size" / Int16sb,  # unit size = MIN_EXT_UNIT_SIZE + bitMapSize; -1 ends a file, 0 the data
    "tagsCode" / Int64sb,  # the real tagsCode the CQ unit gave up for the address
    "msgStoreTime" / Int64sb,  # the record's store time
    "bitMapSize" / Int16sb,  # bytes of filterBitMap; CqExtUnit.read takes none when < 1
    "filterBitMap" / Bytes(lambda ctx: max(0, ctx.bitMapSize)),  # bloom filter bits (SQL92 / tag filters)
)

CQ_EXT_HEAD = struct.Struct(">hqqh")  # hot-path twin of CqExtUnit without the bit map, tested against it
MIN_EXT_UNIT_SIZE = 2 + 8 * 2 + 2  # CqExtUnit.MIN_EXT_UNIT_SIZE = 20
MAX_EXT_UNIT_SIZE = 0x7FFF  # Short.MAX_VALUE
END_BLANK_DATA_LENGTH = 4  # room a writer keeps at a file's end; fullFillToEnd writes int16 -1 there
END_OF_FILE = -1  # the int16 `fullFillToEnd` writes: the rest of the file is unused

LONG_MIN = -(1 << 63)
MAX_ADDR = -(1 << 31) - 1  # ConsumeQueueExt.MAX_ADDR = Integer.MIN_VALUE - 1L


def is_ext_addr(tags_code: int) -> bool:
    """`ConsumeQueueExt.isExtAddr`: a CQ tagsCode at or below MAX_ADDR is an ext address."""
    return tags_code <= MAX_ADDR


def undecorate(address: int) -> int:
    """`unDecorate`: the ext stream byte offset an address points at (addresses only)."""
    return address - LONG_MIN if is_ext_addr(address) else address


def decorate(offset: int) -> int:
    """`decorate`: the address a CQ unit stores for ext stream byte offset `offset`."""
    return offset + LONG_MIN if not is_ext_addr(offset) else offset
