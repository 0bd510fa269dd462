"""The name server's RouteInfoManager with masters and slaves (RouteInfoManager.registerBroker of 5.3.3)."""

from __future__ import annotations

from rmqtool.broker.nameserver import RouteInfoManager
from rmqtool.remoting.bodies import DataVersion, TopicConfig


def _reg(rim: RouteInfoManager, addr: str, bid: int, topics: dict[str, TopicConfig], *, ha: str = "",
         acting: bool | None = False, version: int = 1):
    return rim.register_broker("C", addr, "b", bid, ha, topics, DataVersion(version, version), object(),
                               enable_acting_master=acting)


def test_a_slave_is_told_its_live_master_and_the_master_nothing():
    rim = RouteInfoManager()
    assert _reg(rim, "m:1", 0, {"T": TopicConfig("T", 4, 4)}, ha="m:2") == (None, None)
    assert _reg(rim, "s:1", 1, {"T": TopicConfig("T", 4, 4)}, ha="s:2") == ("m:2", "m:1")
    route = rim.pickup_topic_route_data("T")
    assert [b.brokerAddrs for b in route.brokerDatas] == [{0: "m:1", 1: "s:1"}]
    # the master gone: a slave's answer names none, and the route keeps the slave
    rim.on_channel_destroy(rim.broker_live_table["m:1"].conn)
    assert _reg(rim, "s:1", 1, {"T": TopicConfig("T", 4, 4)}, version=2) == (None, None)
    assert [b.brokerAddrs for b in rim.pickup_topic_route_data("T").brokerDatas] == [{1: "s:1"}]


def test_topics_come_from_the_master_or_the_prime_slave_of_a_5x_broker():
    rim = RouteInfoManager()
    _reg(rim, "m:1", 0, {"T": TopicConfig("T", 4, 4)})
    _reg(rim, "s:1", 1, {"T": TopicConfig("T", 4, 4), "OnlySlave": TopicConfig("OnlySlave", 1, 1)})
    assert rim.pickup_topic_route_data("OnlySlave") is None  # not the prime slave: the master is there
    # a slave registering alone is its group's prime slave (lowest id): its topics are routed
    alone = RouteInfoManager()
    _reg(alone, "s:1", 1, {"T": TopicConfig("T", 4, 4)})
    route = alone.pickup_topic_route_data("T")
    assert route is not None and [q.perm for q in route.queueDatas] == [6]
    # ... unless it is a pre-5 broker (no enableActingMaster in its header)
    old = RouteInfoManager()
    _reg(old, "s:1", 1, {"T": TopicConfig("T", 4, 4)}, acting=None)
    assert old.pickup_topic_route_data("T") is None
    # an acting master (enableActingMaster) is routed read-only
    acting = RouteInfoManager()
    _reg(acting, "s:1", 1, {"T": TopicConfig("T", 4, 4)}, acting=True)
    assert [q.perm for q in acting.pickup_topic_route_data("T").queueDatas] == [4]
