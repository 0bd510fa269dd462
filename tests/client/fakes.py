"""A scripted name server + brokers on loopback, to pin the producer's wire behaviour exactly.

Each broker answers sends with the next code of its script (SUCCESS when the script is empty),
or closes the connection for the pseudo-code DROP; every request is recorded. Runs its own event
loop on a thread, like a separate process would, so the client under test is untouched.
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Callable
from dataclasses import dataclass, field

from rmqtool.layouts.msgid import create_offset_msg_id
from rmqtool.layouts.net import Host
from rmqtool.remoting.codes import RequestCode, ResponseCode
from rmqtool.remoting.command import RemotingCommand
from rmqtool.remoting.transport import Connection, RemotingServer

DROP = -1  # close the connection instead of answering


@dataclass
class FakeBroker:
    name: str
    script: list[int] = field(default_factory=list)
    requests: list[RemotingCommand] = field(default_factory=list)
    server: RemotingServer | None = None
    next_offset: int = 0
    conns: list[Connection] = field(default_factory=list)
    hook: Callable[[RemotingCommand], RemotingCommand | None] | None = None

    @property
    def addr(self) -> str:
        assert self.server is not None
        return f"127.0.0.1:{self.server.port}"

    def sends(self) -> list[RemotingCommand]:
        return [r for r in self.requests if r.code in (RequestCode.SEND_MESSAGE_V2, RequestCode.SEND_BATCH_MESSAGE)]

    async def handle(self, cmd: RemotingCommand, conn: Connection) -> RemotingCommand | None:
        self.requests.append(cmd)
        if conn not in self.conns:
            self.conns.append(conn)
        if self.hook is not None:
            resp = self.hook(cmd)
            if resp is not None:
                return resp
        if cmd.code in (RequestCode.SEND_MESSAGE_V2, RequestCode.SEND_BATCH_MESSAGE):
            code = self.script.pop(0) if self.script else ResponseCode.SUCCESS
            if code == DROP:
                await conn.close()
                return None
            off = self.next_offset
            self.next_offset += 1
            assert self.server is not None
            return cmd.response(code, {"msgId": create_offset_msg_id(Host("127.0.0.1", self.server.port), off * 100),
                                       "queueId": cmd.ext_fields["e"], "queueOffset": off,
                                       "MSG_REGION": "DefaultRegion", "TRACE_ON": "true"},
                                remark=None if code in (0, 10, 11, 12) else f"scripted {code}")
        if cmd.is_oneway:
            return None
        return cmd.response(ResponseCode.SUCCESS)


class FakeCluster:
    def __init__(self, *broker_names: str, queues: int = 4, topics: tuple[str, ...] = ("T",)) -> None:
        self.brokers = {n: FakeBroker(n) for n in broker_names}
        self.queues = queues
        self.topics = set(topics) | {"TBW102"}
        self.namesrv: RemotingServer | None = None
        self.ns_requests: list[RemotingCommand] = []
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, daemon=True)

    @property
    def namesrv_addr(self) -> str:
        assert self.namesrv is not None
        return f"127.0.0.1:{self.namesrv.port}"

    def route(self, topic: str) -> bytes:
        return json.dumps({
            "brokerDatas": [{"brokerAddrs": {"0": b.addr}, "brokerName": b.name, "cluster": "C"}
                            for b in self.brokers.values()],
            "filterServerTable": {},
            "queueDatas": [{"brokerName": b.name, "perm": 6, "readQueueNums": self.queues,
                            "topicSysFlag": 0, "writeQueueNums": self.queues} for b in self.brokers.values()],
        }).encode()

    async def _ns(self, cmd: RemotingCommand, conn: Connection) -> RemotingCommand | None:
        self.ns_requests.append(cmd)
        if cmd.code == RequestCode.GET_ROUTEINFO_BY_TOPIC:
            topic = cmd.ext_fields["topic"]
            if topic not in self.topics:
                return cmd.response(ResponseCode.TOPIC_NOT_EXIST, remark=f"No topic route info in name server for the topic: {topic}")
            return cmd.response(0, body=self.route(topic))
        return cmd.response(ResponseCode.REQUEST_CODE_NOT_SUPPORTED)

    async def _start(self) -> None:
        self.namesrv = RemotingServer(self._ns)
        await self.namesrv.start()
        for b in self.brokers.values():
            b.server = RemotingServer(b.handle)
            await b.server.start()

    def start(self) -> FakeCluster:
        self._thread.start()
        asyncio.run_coroutine_threadsafe(self._start(), self.loop).result(5)
        return self

    def call(self, coro):
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(10)

    def stop(self) -> None:
        async def close():
            for s in [self.namesrv, *(b.server for b in self.brokers.values())]:
                if s is not None:
                    await s.close()
        self.call(close())
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(5)
