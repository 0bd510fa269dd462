"""The classic HA replication wire format (DefaultHAConnection / DefaultHAClient, 4.x-5.x).

Two streams on one TCP connection to the master's haListenPort, no framing beyond these:

- slave -> master: the slave's max CommitLog offset, 8 bytes big-endian, after each write it
  makes and every haSendHeartbeatInterval as a heartbeat (`REPORT_HEADER_SIZE`);
- master -> slave: a 12-byte transfer header (the CommitLog offset the body starts at, the body
  size) followed by that many raw CommitLog bytes; size 0 is the idle heartbeat.
"""

from __future__ import annotations

import struct

from construct import Int32sb, Int64sb, Struct

ReportHeader = Struct(
    "slaveMaxOffset" / Int64sb,  # everything below it is in the slave's CommitLog
)

TransferHeader = Struct(
    "masterPhyOffset" / Int64sb,  # CommitLog offset of the first body byte
    "bodySize" / Int32sb,  # raw CommitLog bytes following (0: heartbeat)
)

REPORT_HEADER = struct.Struct(">q")
TRANSFER_HEADER = struct.Struct(">qi")
REPORT_HEADER_SIZE = REPORT_HEADER.size  # DefaultHAClient.REPORT_HEADER_SIZE
TRANSFER_HEADER_SIZE = TRANSFER_HEADER.size  # DefaultHAConnection.TRANSFER_HEADER_SIZE
# DefaultHAClient.READ_MAX_BUFFER_SIZE: a Java slave can never take a body larger than this
SLAVE_READ_MAX_BUFFER_SIZE = 4 * 1024 * 1024
