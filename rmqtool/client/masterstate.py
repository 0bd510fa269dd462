"""What a slave's master holds now, for `inspect store` on the slave's store (its replica lag).

The questions are the ones mqadmin asks: GET_BROKER_HA_STATUS 907 (`haStatus`: the master's
CommitLog max offset and its slave connections, `DefaultHAService.getRuntimeInfo`), with
GET_BROKER_RUNTIME_INFO 28's `commitLogMaxOffset` for a broker without it (4.x),
GET_ALL_TOPIC_CONFIG 21 for the master's queues and GET_MAX_OFFSET 30 per queue (`brokerStatus`,
`topicStatus`). The address may be a name server instead: GET_BROKER_CLUSTER_INFO 106 names the
master (brokerId 0) of the store's brokerName, as `clusterList` shows it.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass, field

from rmqtool.errors import RemotingError
from rmqtool.remoting import fastjson
from rmqtool.remoting.bodies import ClusterInfo
from rmqtool.remoting.bodies_ha import HAConnectionRuntimeInfo, HARuntimeInfo
from rmqtool.remoting.codes import RequestCode, ResponseCode
from rmqtool.remoting.command import RemotingCommand
from rmqtool.remoting.transport import Connection, connect

BATCH = 64  # GET_MAX_OFFSET requests in flight on the one connection


@dataclass
class MasterState:
    addr: str  # the master's broker address
    namesrv: str | None  # the name server that named it, if one did
    broker_name: str | None
    commitlog_max_offset: int
    queue_max_offsets: dict[tuple[str, int], int] = field(default_factory=dict)
    slaves: list[HAConnectionRuntimeInfo] | None = None  # None: the broker has no 907


async def _request(conn: Connection, code: int, ext: dict[str, object] | None, timeout: float) -> RemotingCommand:
    return await conn.request(RemotingCommand.request(code, ext or {}), timeout)


async def _find_master(conn: Connection, addr: str, broker_name: str | None, timeout: float) -> tuple[str, str]:
    """`addr` is a name server: the master's address of `broker_name` (or of its only broker name)."""
    resp = await _request(conn, RequestCode.GET_BROKER_CLUSTER_INFO, None, timeout)
    if resp.code != ResponseCode.SUCCESS:
        raise RemotingError(f"{addr} is neither a broker nor a name server (code {resp.code}: {resp.remark})")
    info = ClusterInfo.from_json_obj(fastjson.loads(resp.body or b"{}"))
    names = sorted(info.brokerAddrTable)
    if broker_name is None:
        if len(names) != 1:
            raise RemotingError(f"name server {addr} lists brokers {', '.join(names) or '(none)'}: "
                                "the store's broker.conf has no brokerName to choose; pass the master's address")
        broker_name = names[0]
    bd = info.brokerAddrTable.get(broker_name)
    if bd is None:
        raise RemotingError(f"name server {addr} does not list broker {broker_name}")
    master = bd.master_addr()
    if master is None:
        raise RemotingError(f"name server {addr} lists no master (brokerId 0) of {broker_name}")
    return master, broker_name


async def _max_offsets(conn: Connection, queues: list[tuple[str, int]], timeout: float) -> dict[tuple[str, int], int]:
    out: dict[tuple[str, int], int] = {}
    for i in range(0, len(queues), BATCH):
        chunk = queues[i:i + BATCH]
        resps = await asyncio.gather(*(_request(conn, RequestCode.GET_MAX_OFFSET,
                                                {"topic": t, "queueId": q}, timeout) for t, q in chunk))
        for key, resp in zip(chunk, resps, strict=True):
            if resp.code == ResponseCode.SUCCESS:
                out[key] = int((resp.ext_fields or {}).get("offset", 0))
    return out


async def _master_topics(conn: Connection, timeout: float) -> list[tuple[str, int]]:
    resp = await _request(conn, RequestCode.GET_ALL_TOPIC_CONFIG, None, timeout)
    if resp.code != ResponseCode.SUCCESS or not resp.body:
        return []
    table = (fastjson.loads(resp.body) or {}).get("topicConfigTable") or {}
    return [(str(t), q) for t, tc in table.items() if isinstance(tc, dict)
            for q in range(int(tc.get("readQueueNums") or 0))]


async def _commitlog_state(conn: Connection, timeout: float) -> tuple[int | None, list[HAConnectionRuntimeInfo] | None,
                                                                      bool]:
    """(max offset, slave connections, is a master) from 907, else (max offset, None, True) from 28;
    (None, None, False) when the peer answers neither (a name server)."""
    resp = await _request(conn, RequestCode.GET_BROKER_HA_STATUS, None, timeout)
    if resp.code == ResponseCode.SUCCESS and resp.body:
        ha = HARuntimeInfo.from_json_obj(fastjson.loads(resp.body))
        return ha.masterCommitLogMaxOffset, ha.haConnectionInfo, ha.master
    resp = await _request(conn, RequestCode.GET_BROKER_RUNTIME_INFO, None, timeout)
    if resp.code == ResponseCode.SUCCESS and resp.body:
        table = json.loads(resp.body).get("table") or {}
        if "commitLogMaxOffset" in table:
            return int(table["commitLogMaxOffset"]), None, table.get("brokerActive", "true") != "false"
    return None, None, False


async def _state(addr: str, broker_name: str | None, queues: list[tuple[str, int]], timeout: float) -> MasterState:
    namesrv = None
    conn = await connect(addr, timeout=timeout)
    try:
        max_offset, slaves, is_master = await _commitlog_state(conn, timeout)
        if max_offset is None:  # a name server: ask the master it names
            namesrv = addr
            addr, broker_name = await _find_master(conn, addr, broker_name, timeout)
            await conn.close()
            conn = await connect(addr, timeout=timeout)
            max_offset, slaves, is_master = await _commitlog_state(conn, timeout)
            if max_offset is None:
                raise RemotingError(f"{addr} (the master {namesrv} names) does not answer as a broker")
        if not is_master:
            raise RemotingError(f"{addr} is a slave, not a master: pass its master's address")
        wanted = sorted(set(queues) | set(await _master_topics(conn, timeout)))
        offsets = await _max_offsets(conn, wanted, timeout)
    finally:
        await conn.close()
    return MasterState(addr, namesrv, broker_name, int(max_offset), offsets, slaves)


def master_state(addr: str, broker_name: str | None, queues: list[tuple[str, int]],
                 timeout: float = 3.0) -> MasterState:
    """The master at `addr` (a broker, or a name server that names it); RemotingError with the
    reason when it cannot be asked."""
    try:
        return asyncio.run(_state(addr, broker_name, queues, timeout))
    except RemotingError:
        raise
    except (OSError, TimeoutError, asyncio.TimeoutError) as e:
        raise RemotingError(f"{addr}: {e.__class__.__name__}: {e}".rstrip(": ")) from None
    except (ValueError, TypeError, AttributeError) as e:
        raise RemotingError(f"{addr}: an answer that does not parse ({e})") from None
