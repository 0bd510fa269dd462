"""A broker that registers with another process's name server (`--namesrv-addr`, broker.conf
`namesrvAddr`): REGISTER_BROKER at start and when its topics change, UNREGISTER_BROKER on shutdown,
as a Java broker does with `BrokerOuterAPI`; with `forceRegister=false`, QUERY_DATA_VERSION first."""

from __future__ import annotations

import asyncio
import threading

from rmqtool.broker.nameserver import NameServerProcessor, RouteInfoManager
from rmqtool.broker.registration import BrokerIdentity, NameServerRegistrar
from rmqtool.remoting import fastjson
from rmqtool.remoting.bodies import (
    ClusterInfo,
    DataVersion,
    TopicConfig,
    TopicConfigSerializeWrapper,
    TopicRouteData,
)
from rmqtool.remoting.codes import ResponseCode
from rmqtool.remoting.command import RemotingCommand
from rmqtool.remoting.transport import Connection, RemotingServer
from tests.broker.conftest import TEST_CONF, ServeProcess, Wire, create_topic
from tests.wire_helpers import wait_until


def _cluster(namesrv: Wire) -> ClusterInfo:
    r = namesrv.request(106)
    assert r.code == 0
    return ClusterInfo.from_json_obj(fastjson.loads(r.body))


def test_a_second_broker_joins_and_leaves_another_name_server(serve, namesrv, tmp_path):
    other = ServeProcess(tmp_path / "b-store", conf=TEST_CONF + "brokerName=broker-b\n",
                         extra_args=("--namesrv-addr", f"{serve.namesrv};127.0.0.1:1"))  # one of them is down
    try:
        assert wait_until(lambda: "broker-b" in _cluster(namesrv).brokerAddrTable, 10)
        info = _cluster(namesrv)
        assert sorted(info.clusterAddrTable["DefaultCluster"]) == ["broker-a", "broker-b"]
        assert info.brokerAddrTable["broker-b"].brokerAddrs == {0: other.broker}
        # a topic created on the second broker is routed by the first process's name server at once
        create_topic(other.broker, "OnlyOnB", 2)

        def routed() -> TopicRouteData | None:
            r = namesrv.request(105, {"topic": "OnlyOnB"})
            return TopicRouteData.decode(r.body) if r.code == 0 else None

        assert wait_until(lambda: routed() is not None, 5)
        route = routed()
        assert [(q.brokerName, q.writeQueueNums) for q in route.queueDatas] == [("broker-b", 2)]
    finally:
        code = other.stop()
    assert code == 0, other.stderr
    assert "Traceback" not in other.stderr
    assert "127.0.0.1:1" in other.stderr  # the unreachable name server was reported, once, and did not stop it
    # UNREGISTER_BROKER on shutdown: gone at once, not after the 120 s expiry
    info = _cluster(namesrv)
    assert "broker-b" not in info.brokerAddrTable
    assert info.clusterAddrTable["DefaultCluster"] == ["broker-a"]


class RecordingNameServer:
    """Our name server's processor on a thread of its own, recording the request codes it gets."""

    def __init__(self) -> None:
        self.codes: list[int] = []
        self.proc = NameServerProcessor(RouteInfoManager())
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self.server = RemotingServer(self._handle, on_close=self.proc.routes.on_channel_destroy)
        asyncio.run_coroutine_threadsafe(self.server.start(), self.loop).result(10)
        self.addr = f"127.0.0.1:{self.server.port}"

    async def _handle(self, cmd: RemotingCommand, conn: Connection) -> RemotingCommand:
        self.codes.append(cmd.code)
        return await self.proc.process(cmd, conn)

    def close(self) -> None:
        asyncio.run_coroutine_threadsafe(self.server.close(), self.loop).result(10)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(5)
        self.loop.close()


def test_need_register_asks_query_data_version():
    async def main() -> None:
        ns = NameServerProcessor(RouteInfoManager())
        good = RemotingServer(ns.process)

        async def old_namesrv(cmd: RemotingCommand, conn: Connection) -> RemotingCommand:
            return cmd.response(ResponseCode.REQUEST_CODE_NOT_SUPPORTED)

        old = RemotingServer(old_namesrv)
        await good.start()
        await old.start()
        ident = BrokerIdentity("C", "broker-n", "127.0.0.9:34911", 0, "127.0.0.9:34912")
        version = DataVersion(3, 1_700_000_000_000)
        wrapper = TopicConfigSerializeWrapper({"T": TopicConfig("T", 1, 1, 6)}, version)
        reg = NameServerRegistrar([f"127.0.0.1:{good.port}"], ident, timeout=2)
        try:
            assert await reg.need_register(version)  # not registered yet
            assert await reg.register_all(wrapper) == 1
            assert not await reg.need_register(version)
            assert await reg.need_register(DataVersion(4, 1_700_000_000_000))
            # an unreachable name server, or one without code 322, gets the registration
            for other in ("127.0.0.1:1", f"127.0.0.1:{old.port}"):
                reg.addrs = [f"127.0.0.1:{good.port}", other]
                assert await reg.need_register(version)
        finally:
            await reg.unregister_all()
            await good.close()
            await old.close()

    asyncio.run(main())


def test_force_register_false_queries_the_data_version_instead_of_registering(tmp_path):
    ns = RecordingNameServer()
    conf = TEST_CONF + "brokerName=broker-f\nforceRegister=false\nregisterNameServerPeriod=300\n"
    other = None
    try:
        other = ServeProcess(tmp_path / "f-store", conf=conf, extra_args=("--namesrv-addr", ns.addr))
        assert wait_until(lambda: ns.codes.count(322) >= 3, 10)
        assert ns.codes.count(103) == 1 and ns.codes[0] == 103  # registered once, at start
        assert "broker-f" in ns.proc.routes.broker_addr_table
        create_topic(other.broker, "OnlyOnF", 1)
        assert wait_until(lambda: ns.proc.routes.pickup_topic_route_data("OnlyOnF") is not None, 5)
        assert ns.codes.count(103) == 2  # a topic change registers at once, without asking
    finally:
        if other is not None:
            assert other.stop() == 0, other.stderr
            assert "Traceback" not in other.stderr
        ns.close()
    assert ns.codes[-1] == 104
