"""`HARuntimeInfo`: the body of GET_BROKER_HA_STATUS (907), which `mqadmin haStatus` prints.

fastjson writes the bean's getters in name order: `isActivated()` becomes `activated`,
`isInSync()` `inSync`, `isMaster()` `master`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from rmqtool.remoting.fastjson import bean


@dataclass
class HAConnectionRuntimeInfo:
    """One slave connected to this master."""

    addr: str = ""
    slaveAckOffset: int = 0
    diff: int = 0
    inSync: bool = False
    transferredByteInSecond: int = 0
    transferFromWhere: int = 0

    def to_json_obj(self) -> dict[str, Any]:
        return bean(addr=self.addr, diff=self.diff, inSync=self.inSync, slaveAckOffset=self.slaveAckOffset,
                    transferFromWhere=self.transferFromWhere, transferredByteInSecond=self.transferredByteInSecond)

    @classmethod
    def from_json_obj(cls, o: dict[str, Any]) -> HAConnectionRuntimeInfo:
        return cls(str(o.get("addr") or ""), int(o.get("slaveAckOffset") or 0), int(o.get("diff") or 0),
                   bool(o.get("inSync")), int(o.get("transferredByteInSecond") or 0),
                   int(o.get("transferFromWhere") or 0))


@dataclass
class HAClientRuntimeInfo:
    """A slave's view of its master."""

    masterAddr: str | None = None
    transferredByteInSecond: int = 0
    maxOffset: int = 0
    lastReadTimestamp: int = 0
    lastWriteTimestamp: int = 0
    masterFlushOffset: int = 0
    activated: bool = False

    def to_json_obj(self) -> dict[str, Any]:
        return bean(activated=self.activated, lastReadTimestamp=self.lastReadTimestamp,
                    lastWriteTimestamp=self.lastWriteTimestamp, masterAddr=self.masterAddr,
                    masterFlushOffset=self.masterFlushOffset, maxOffset=self.maxOffset,
                    transferredByteInSecond=self.transferredByteInSecond)

    @classmethod
    def from_json_obj(cls, o: dict[str, Any]) -> HAClientRuntimeInfo:
        return cls(o.get("masterAddr"), int(o.get("transferredByteInSecond") or 0), int(o.get("maxOffset") or 0),
                   int(o.get("lastReadTimestamp") or 0), int(o.get("lastWriteTimestamp") or 0),
                   int(o.get("masterFlushOffset") or 0), bool(o.get("activated")))


@dataclass
class HARuntimeInfo:
    master: bool = True
    masterCommitLogMaxOffset: int = 0
    inSyncSlaveNums: int = 0
    haConnectionInfo: list[HAConnectionRuntimeInfo] = field(default_factory=list)
    haClientRuntimeInfo: HAClientRuntimeInfo = field(default_factory=HAClientRuntimeInfo)

    def to_json_obj(self) -> dict[str, Any]:
        return bean(haClientRuntimeInfo=self.haClientRuntimeInfo.to_json_obj(),
                    haConnectionInfo=[c.to_json_obj() for c in self.haConnectionInfo],
                    inSyncSlaveNums=self.inSyncSlaveNums, master=self.master,
                    masterCommitLogMaxOffset=self.masterCommitLogMaxOffset)

    @classmethod
    def from_json_obj(cls, o: dict[str, Any]) -> HARuntimeInfo:
        return cls(bool(o.get("master")), int(o.get("masterCommitLogMaxOffset") or 0),
                   int(o.get("inSyncSlaveNums") or 0),
                   [HAConnectionRuntimeInfo.from_json_obj(c) for c in o.get("haConnectionInfo") or []],
                   HAClientRuntimeInfo.from_json_obj(o.get("haClientRuntimeInfo") or {}))
