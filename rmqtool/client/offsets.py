"""Where a consumer keeps its offsets: on the broker (clustering) or in a local JSON file (broadcasting).

The offset stored is the next one to consume (§4.6). Java: `RemoteBrokerOffsetStore`,
`LocalFileOffsetStore` (whose fastjson file has object map keys; ours is plain JSON, one entry per queue).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
from pathlib import Path
from typing import TYPE_CHECKING

from rmqtool.client.exceptions import BrokerError
from rmqtool.client.message import MessageQueue
from rmqtool.client.route import MASTER_ID
from rmqtool.errors import RemotingError
from rmqtool.remoting.codes import RequestCode, ResponseCode
from rmqtool.remoting.command import RemotingCommand
from rmqtool.remoting.headers import (
    OffsetResponseHeader,
    QueryConsumerOffsetRequestHeader,
    UpdateConsumerOffsetRequestHeader,
)

if TYPE_CHECKING:
    from rmqtool.client.instance import ClientInstance

log = logging.getLogger("rmqtool.client")


class OffsetStore:
    def __init__(self) -> None:
        self.table: dict[MessageQueue, int] = {}
        self.enabled = True  # False: never write offsets anywhere (consume --no-commit)

    def update(self, mq: MessageQueue, offset: int, increase_only: bool = True) -> None:
        old = self.table.get(mq)
        if old is None or not increase_only or offset > old:
            self.table[mq] = offset

    def read_memory(self, mq: MessageQueue) -> int:
        return self.table.get(mq, -1)

    async def _broker_addr(self, mq: MessageQueue, *, only_master_first: bool) -> str | None:
        """`findBrokerAddressInSubscribe` for `mq`'s broker group (the master first, or with
        `only_master_first` only the master), then after a route refresh any broker of the group."""
        found = self.instance.find_broker_address_in_subscribe(mq.broker_name, MASTER_ID, only_master_first)
        if found is None:
            with contextlib.suppress(RemotingError):
                await self.instance.update_route(mq.topic)
            found = self.instance.find_broker_address_in_subscribe(mq.broker_name, MASTER_ID, False)
        return found[0] if found is not None else None

    async def read(self, mq: MessageQueue) -> int:
        """From the persistent place: >= 0 an offset, -1 none yet, -2 could not ask."""
        raise NotImplementedError

    async def persist(self, mq: MessageQueue, oneway: bool = False) -> None:
        raise NotImplementedError

    async def persist_all(self, mqs: set[MessageQueue], oneway: bool = True) -> None:
        for mq in list(self.table):
            if mq in mqs:
                await self.persist(mq, oneway)

    def remove(self, mq: MessageQueue) -> None:
        self.table.pop(mq, None)


class RemoteBrokerOffsetStore(OffsetStore):
    def __init__(self, instance: ClientInstance, group: str) -> None:
        super().__init__()
        self.instance, self.group = instance, group

    async def read(self, mq: MessageQueue) -> int:
        """`fetchConsumeOffsetFromBroker`: the master, after a route refresh any broker of the
        group (its slave, which copies the master's offsets, when the master is gone)."""
        addr = await self._broker_addr(mq, only_master_first=True)
        if addr is None:
            return -2
        req = RemotingCommand.request(RequestCode.QUERY_CONSUMER_OFFSET,
                                      QueryConsumerOffsetRequestHeader(self.group, mq.topic, mq.queue_id).to_ext())
        try:
            resp = await self.instance.invoke(addr, req)
        except RemotingError:
            return -2
        if resp.code == ResponseCode.SUCCESS:
            try:
                off = OffsetResponseHeader.from_ext(resp.ext_fields).offset
            except ValueError:
                return -1
            self.update(mq, off, False)
            return off
        return -1  # QUERY_NOT_FOUND and other broker answers (MQBrokerException in Java)

    async def persist(self, mq: MessageQueue, oneway: bool = False) -> None:
        off = self.table.get(mq)
        if off is None or off < 0 or not self.enabled:
            return
        # updateConsumeOffsetToBroker: the master, else any broker of the group (its slave keeps
        # the offset until the master's copy overwrites it), a route refresh in between
        addr = await self._broker_addr(mq, only_master_first=False)
        if addr is None:
            return
        req = RemotingCommand.request(RequestCode.UPDATE_CONSUMER_OFFSET, UpdateConsumerOffsetRequestHeader(
            self.group, mq.topic, mq.queue_id, off).to_ext(), oneway=oneway)
        try:
            if oneway:
                await self.instance.invoke_oneway(addr, req)
            else:
                resp = await self.instance.invoke(addr, req)
                if resp.code != ResponseCode.SUCCESS:
                    raise BrokerError(resp.code, resp.remark, addr)
        except RemotingError as e:
            log.debug("offset commit of %s failed: %s", mq, e)


def default_local_offset_dir() -> Path:
    return Path(os.environ.get("rocketmq.client.localOffsetStoreDir", Path.home() / ".rocketmq_offsets"))


class LocalFileOffsetStore(OffsetStore):
    """`<dir>/<clientId>/<group>/offsets.json`; written atomically (tmp + rename, like `MixAll.string2File`)."""

    def __init__(self, path: Path) -> None:
        super().__init__()
        self.path = path
        self._loaded: dict[MessageQueue, int] = {}
        if path.exists():
            try:
                data = json.loads(path.read_text())
                for e in data.get("offsetTable", []):
                    self._loaded[MessageQueue(e["topic"], e["brokerName"], int(e["queueId"]))] = int(e["offset"])
            except (OSError, ValueError, KeyError, TypeError) as e:
                log.warning("ignoring unreadable offsets file %s: %s", path, e)

    async def read(self, mq: MessageQueue) -> int:
        off = self._loaded.get(mq, -1)
        if off >= 0:
            self.update(mq, off, False)
        return off

    async def persist(self, mq: MessageQueue, oneway: bool = False) -> None:
        await self.persist_all({mq}, oneway)

    async def persist_all(self, mqs: set[MessageQueue], oneway: bool = True) -> None:
        if not self.enabled:
            return
        merged = dict(self._loaded)
        merged.update({mq: off for mq, off in self.table.items() if off >= 0})
        self._loaded = merged
        doc = {"offsetTable": [{"topic": mq.topic, "brokerName": mq.broker_name, "queueId": mq.queue_id,
                                "offset": off} for mq, off in sorted(merged.items())]}
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_suffix(".json.tmp")
        tmp.write_text(json.dumps(doc, indent=1))
        os.replace(tmp, self.path)
