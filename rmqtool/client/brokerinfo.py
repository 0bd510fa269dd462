"""One-off questions to a broker that a command asks while doing something else."""

from __future__ import annotations

import asyncio
import json

from rmqtool.remoting.codes import RequestCode
from rmqtool.remoting.command import RemotingCommand
from rmqtool.remoting.transport import connect


async def _runtime_info(addr: str, timeout: float) -> dict[str, str]:
    conn = await connect(addr, timeout=timeout)
    try:
        resp = await conn.request(RemotingCommand.request(RequestCode.GET_BROKER_RUNTIME_INFO), timeout)
    finally:
        await conn.close()
    if resp.code != 0 or not resp.body:
        return {}
    table = json.loads(resp.body).get("table", {})
    return table if isinstance(table, dict) else {}


def commitlog_max_offset(addr: str, timeout: float = 3.0) -> int | None:
    """GET_BROKER_RUNTIME_INFO's commitLogMaxOffset (as mqadmin brokerStatus shows it), None if unknown."""
    try:
        table = asyncio.run(_runtime_info(addr, timeout))
        return int(table["commitLogMaxOffset"])
    except Exception:  # unreachable, not a broker, no such field: the lag stays unknown
        return None
