"""CommitLog record, end-of-file blank and client batch element (formats.md §2).

RocketMQ 5.x: `MessageDecoder`, `MessageExtEncoder`, `CommitLog.DefaultAppendMessageCallback`.
See formats/commitlog.md. The construct declarations are the truth; `rmqtool.layouts.codec`
holds the precompiled `struct` codecs for hot paths, tested against these.
"""

from __future__ import annotations

from construct import (
    Bytes,
    Const,
    IfThenElse,
    Int8sb,
    Int16sb,
    Int32sb,
    Int64sb,
    Rebuild,
    Struct,
    len_,
    this,
)

from rmqtool.layouts.constants import (
    BLANK_MAGIC_CODE,
    BORNHOST_V6_FLAG,
    MESSAGE_MAGIC_CODE_V2,
    STOREHOSTADDRESS_V6_FLAG,
)

HostV4 = Struct("ip" / Bytes(4), "port" / Int32sb)
HostV6 = Struct("ip" / Bytes(16), "port" / Int32sb)

CommitLogRecord = Struct(
    "totalSize" / Int32sb,  # whole record including this field
    "magicCode" / Int32sb,  # MESSAGE_MAGIC_CODE (v1) or _V2
    "bodyCRC" / Int32sb,  # crc32(stored body) & 0x7FFFFFFF
    "queueId" / Int32sb,
    "flag" / Int32sb,  # Message.flag, opaque to the broker
    "queueOffset" / Int64sb,  # ConsumeQueue index; 0 for PREPARED/ROLLBACK
    "physicalOffset" / Int64sb,  # = file base + position
    "sysFlag" / Int32sb,  # MessageSysFlag bits
    "bornTimestamp" / Int64sb,
    "bornHost" / IfThenElse(this.sysFlag & BORNHOST_V6_FLAG, HostV6, HostV4),
    "storeTimestamp" / Int64sb,
    "storeHost" / IfThenElse(this.sysFlag & STOREHOSTADDRESS_V6_FLAG, HostV6, HostV4),
    "reconsumeTimes" / Int32sb,
    "preparedTransactionOffset" / Int64sb,  # COMMIT record: offset of the half message
    "bodyLength" / Rebuild(Int32sb, len_(this.body)),
    "body" / Bytes(this.bodyLength),
    "topicLength"
    / Rebuild(IfThenElse(this.magicCode == MESSAGE_MAGIC_CODE_V2, Int16sb, Int8sb), len_(this.topic)),
    "topic" / Bytes(this.topicLength),  # UTF-8
    "propertiesLength" / Rebuild(Int16sb, len_(this.properties)),
    "properties" / Bytes(this.propertiesLength),  # UTF-8, name\x01value\x02...
)

# The 8 bytes written when a record does not fit the rest of a file; `maxBlank` counts from here
# to the end of the file. The bytes after it are not written (zeros in a new file).
CommitLogBlank = Struct(
    "maxBlank" / Int32sb,
    "magicCode" / Const(BLANK_MAGIC_CODE, Int32sb),
)

# One element of a client batch body (`MessageDecoder.encodeMessage`), the body of
# SEND_BATCH_MESSAGE and of NEED_UNWRAP records.
BatchElement = Struct(
    "totalSize" / Rebuild(Int32sb, 4 + 4 + 4 + 4 + 4 + len_(this.body) + 2 + len_(this.properties)),
    "magicCode" / Int32sb,  # 0 from the Java client
    "bodyCRC" / Int32sb,  # 0 from the Java client
    "flag" / Int32sb,
    "bodyLength" / Rebuild(Int32sb, len_(this.body)),
    "body" / Bytes(this.bodyLength),
    "propertiesLength" / Rebuild(Int16sb, len_(this.properties)),
    "properties" / Bytes(this.propertiesLength),
)


def record_size(body_len: int, topic_len: int, props_len: int, born_v6: bool = False,
                store_v6: bool = False, v2: bool = False) -> int:
    """`MessageExtEncoder.calMsgLength`: 74 + B + S + T + body + topic + properties."""
    return (74 + (20 if born_v6 else 8) + (20 if store_v6 else 8) + (2 if v2 else 1)
            + max(body_len, 0) + topic_len + max(props_len, 0))
