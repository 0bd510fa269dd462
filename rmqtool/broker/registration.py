"""Registration with name servers in other processes: `BrokerOuterAPI` (protocol.md §3).

With `namesrvAddr` (broker.conf) or `--namesrv-addr`, `rmqtool serve`'s broker also joins an
existing cluster: like a Java broker it sends REGISTER_BROKER (103) with its topic table to each
listed name server at start, every `registerNameServerPeriod` (30 s) and whenever a topic changes,
and UNREGISTER_BROKER (104) on a clean shutdown. Clients of that name server (Apache's own
included) then route to this broker. Each name server gets its own connection, made again after
a failure; one that is down does not hold up the others.

With `forceRegister=false` the periodic registration first asks QUERY_DATA_VERSION (322), as
Java's `BrokerController.needRegister` does, and is skipped when every name server already holds
the broker's DataVersion: the query alone keeps the broker alive there, and a large topic table is
not sent again every 30 s.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import zlib
from dataclasses import dataclass

from rmqtool.remoting import fastjson
from rmqtool.remoting.bodies import DataVersion, RegisterBrokerBody, TopicConfigSerializeWrapper
from rmqtool.remoting.codes import RequestCode, ResponseCode
from rmqtool.remoting.command import RemotingCommand
from rmqtool.remoting.headers import (
    QueryDataVersionRequestHeader,
    QueryDataVersionResponseHeader,
    RegisterBrokerRequestHeader,
    RegisterBrokerResponseHeader,
    UnRegisterBrokerRequestHeader,
)
from rmqtool.remoting.transport import Connection, connect

log = logging.getLogger("rmqtool.broker")


def parse_namesrv_addr(text: str | None) -> list[str]:
    """`namesrvAddr`: `host:port` entries separated by `;` (RocketMQ), commas and spaces accepted."""
    if not text:
        return []
    out = []
    for part in text.replace(",", ";").replace(" ", ";").split(";"):
        part = part.strip()
        if part and part not in out:
            out.append(part)
    return out


@dataclass
class BrokerIdentity:
    cluster_name: str
    broker_name: str
    broker_addr: str
    broker_id: int
    ha_server_addr: str


class NameServerRegistrar:
    """REGISTER_BROKER / UNREGISTER_BROKER towards a list of name servers."""

    def __init__(self, addrs: list[str], identity: BrokerIdentity, *, timeout: float = 6.0) -> None:
        self.addrs = addrs
        self.identity = identity
        self.timeout = timeout
        self._conns: dict[str, Connection] = {}
        self.last_errors: dict[str, str] = {}  # name server -> why its last registration failed
        # the last round's RegisterBrokerResult (haServerAddr, masterAddr) per name server, in
        # namesrvAddr order, None where it failed: a slave takes its master from the first one
        self.last_results: list[tuple[str | None, str | None] | None] = []

    async def _conn(self, addr: str) -> Connection:
        conn = self._conns.get(addr)
        if conn is None or _is_closed(conn):
            conn = await connect(addr, timeout=self.timeout)
            self._conns[addr] = conn
        return conn

    async def _call(self, addr: str, cmd: RemotingCommand) -> RemotingCommand:
        try:
            return await (await self._conn(addr)).request(cmd, self.timeout)
        except BaseException:
            old = self._conns.pop(addr, None)
            if old is not None:
                with contextlib.suppress(Exception):
                    await old.close()
            raise

    def register_command(self, wrapper: TopicConfigSerializeWrapper) -> RemotingCommand:
        """The request a Java 5.x broker sends: JSON body (compression is deprecated), its CRC in the header."""
        ident = self.identity
        body = fastjson.dumpb(RegisterBrokerBody(wrapper, []).to_json_obj())
        header = RegisterBrokerRequestHeader(ident.broker_name, ident.broker_addr, ident.cluster_name,
                                             ident.ha_server_addr, ident.broker_id, compressed=False,
                                             bodyCrc32=zlib.crc32(body) & 0x7FFFFFFF, enableActingMaster=False)
        return RemotingCommand.request(RequestCode.REGISTER_BROKER, header.to_ext(), body)

    async def register_all(self, wrapper: TopicConfigSerializeWrapper) -> int:
        """Register with every name server at once; returns how many accepted."""
        cmd = self.register_command(wrapper)
        results = await asyncio.gather(*(self._register(addr, cmd) for addr in self.addrs))
        self.last_results = list(results)
        return sum(r is not None for r in results)

    def first_result(self) -> tuple[str | None, str | None] | None:
        """`handleRegisterBrokerResult`: the first name server's answer that came back."""
        return next((r for r in self.last_results if r is not None), None)

    async def need_register(self, version: DataVersion) -> bool:
        """`BrokerOuterAPI.needRegister`: does any name server lack this DataVersion?

        As in Java, a name server that answers changed=true, returns another DataVersion, or cannot
        be asked says yes. Java counts any other non-SUCCESS answer as "unchanged", which leaves a
        broker unregistered where the name server does not know code 322; we register there.
        """
        ident = self.identity
        ext = QueryDataVersionRequestHeader(ident.broker_name, ident.broker_addr, ident.cluster_name,
                                            ident.broker_id).to_ext()
        body = fastjson.dumpb(version)

        async def changed(addr: str) -> bool:
            try:
                resp = await self._call(addr, RemotingCommand.request(RequestCode.QUERY_DATA_VERSION, dict(ext), body))
                if resp.code != ResponseCode.SUCCESS:
                    return True
                if QueryDataVersionResponseHeader.from_ext(resp.ext_fields).changed is not False:
                    return True  # Java: `changed == null || changed`
                return bool(resp.body) and DataVersion.from_json_obj(fastjson.loads(resp.body)) != version
            except Exception:  # noqa: BLE001 - unreachable or a bad answer: register, which reports it
                return True

        return any(await asyncio.gather(*(changed(a) for a in self.addrs)))

    async def _register(self, addr: str, template: RemotingCommand) -> tuple[str | None, str | None] | None:
        """One REGISTER_BROKER; the answer's (haServerAddr, masterAddr), None when it failed."""
        cmd = RemotingCommand.request(template.code, dict(template.ext_fields), template.body)
        try:
            resp = await self._call(addr, cmd)
        except (OSError, asyncio.TimeoutError, ConnectionError) as e:
            self._failed(addr, f"unreachable: {e}")
            return None
        except Exception as e:  # noqa: BLE001 - a name server's fault never stops the broker
            self._failed(addr, str(e))
            return None
        if resp.code != ResponseCode.SUCCESS:
            self._failed(addr, f"code {resp.code}: {resp.remark}")
            return None
        if addr in self.last_errors:
            log.info("registered with name server %s again", addr)
        self.last_errors.pop(addr, None)
        try:
            h = RegisterBrokerResponseHeader.from_ext(resp.ext_fields or {})
        except Exception:  # noqa: BLE001 - an answer without the header: nothing learned
            return (None, None)
        return (h.haServerAddr or None, h.masterAddr or None)

    def _failed(self, addr: str, why: str) -> None:
        if self.last_errors.get(addr) != why:
            log.warning("register broker to name server %s failed: %s", addr, why)
        self.last_errors[addr] = why

    async def unregister_all(self) -> None:
        """`unregisterBrokerAll` on shutdown, then close the connections."""
        ident = self.identity
        ext = UnRegisterBrokerRequestHeader(ident.broker_name, ident.broker_addr, ident.cluster_name,
                                            ident.broker_id).to_ext()

        async def one(addr: str) -> None:
            with contextlib.suppress(Exception):
                await self._call(addr, RemotingCommand.request(RequestCode.UNREGISTER_BROKER, dict(ext)))

        await asyncio.gather(*(one(a) for a in self.addrs))
        for conn in list(self._conns.values()):
            with contextlib.suppress(Exception):
                await conn.close()
        self._conns.clear()


def _is_closed(conn: Connection) -> bool:
    closed = getattr(conn, "closed", False)
    return closed.is_set() if isinstance(closed, asyncio.Event) else bool(closed)
