"""Which broker of a group a pull goes to (PullAPIWrapper + MQClientInstance.findBrokerAddressInSubscribe),
and where offsets go (RemoteBrokerOffsetStore), against fake master and slave brokers."""

from __future__ import annotations

import pytest

from rmqtool.client.instance import ClientInstance
from rmqtool.client.message import MessageQueue
from rmqtool.client.offsets import RemoteBrokerOffsetStore
from rmqtool.client.pull import FLAG_COMMIT_OFFSET, FLAG_SUSPEND, pull_kernel
from rmqtool.client.subscription import SubscriptionData
from rmqtool.remoting.codes import RequestCode, ResponseCode
from tests.client.fakes import FakeCluster

MQ = MessageQueue("T", "broker-a", 0)


def test_find_broker_address_in_subscribe_as_java():
    inst = ClientInstance("127.0.0.1:9876")
    inst.broker_addrs = {"g": {0: "m:1", 1: "s1:1", 2: "s2:1"}, "slaves": {2: "s2:1", 3: "s3:1"}}
    assert inst.find_broker_address_in_subscribe("g", 0, True) == ("m:1", False)
    assert inst.find_broker_address_in_subscribe("g", 1, True) == ("s1:1", True)
    assert inst.find_broker_address_in_subscribe("g", 5, True) is None
    assert inst.find_broker_address_in_subscribe("g", 5, False) == ("m:1", False)  # any: the lowest id
    # the master is gone: its slave; a slave id missing: the next id, still a slave
    assert inst.find_broker_address_in_subscribe("slaves", 0, True) is None
    assert inst.find_broker_address_in_subscribe("slaves", 0, False) == ("s2:1", True)
    assert inst.find_broker_address_in_subscribe("slaves", 1, True) == ("s2:1", True)
    assert inst.find_broker_address_in_subscribe("nope", 0, False) is None


@pytest.fixture
def group():
    """Two fake brokers standing for broker-a's master (0) and slave (1)."""
    fc = FakeCluster("master", "slave").start()
    inst = ClientInstance(fc.namesrv_addr)
    inst.start()
    try:
        yield fc, inst
    finally:
        inst.shutdown()
        fc.stop()


def _answer_pulls(broker, suggest: int):
    def hook(cmd):
        if cmd.code == RequestCode.PULL_MESSAGE:
            return cmd.response(ResponseCode.PULL_NOT_FOUND, {"suggestWhichBrokerId": str(suggest),
                                                              "nextBeginOffset": "0", "minOffset": "0",
                                                              "maxOffset": "0"})
        return None
    broker.hook = hook


def _pulls(broker):
    return [r for r in broker.requests if r.code == RequestCode.PULL_MESSAGE]


def test_pulls_follow_suggest_which_broker_id_and_never_commit_on_a_slave(group):
    fc, inst = group
    master, slave = fc.brokers["master"], fc.brokers["slave"]
    inst.broker_addrs = {"broker-a": {0: master.addr, 1: slave.addr}}
    _answer_pulls(master, 1)  # the data is out of memory: read it from broker 1
    _answer_pulls(slave, 0)  # the slave is not lagging: back to the master
    sub = SubscriptionData("T", "*")
    flag = FLAG_COMMIT_OFFSET | FLAG_SUSPEND

    def pull():
        return inst.run(pull_kernel(inst, "g", MQ, sub, 0, 32, flag, 5, 0, 5))

    pull()
    assert len(_pulls(master)) == 1 and not _pulls(slave)
    assert int(_pulls(master)[0].ext_fields["sysFlag"]) & FLAG_COMMIT_OFFSET
    pull()  # suggested 1: the slave, the commit flag cleared (PullSysFlag.clearCommitOffsetFlag)
    assert len(_pulls(slave)) == 1
    assert not int(_pulls(slave)[0].ext_fields["sysFlag"]) & FLAG_COMMIT_OFFSET
    pull()  # the slave said 0
    assert len(_pulls(master)) == 2
    # the master leaves the route: pulls go to the slave whatever was suggested
    inst.broker_addrs = {"broker-a": {1: slave.addr}}
    inst.pull_from_which_node[("g", MQ)] = 0
    pull()
    assert len(_pulls(slave)) == 2


def test_offsets_go_to_the_master_else_to_the_slave(group):
    fc, inst = group
    master, slave = fc.brokers["master"], fc.brokers["slave"]
    store = RemoteBrokerOffsetStore(inst, "g")
    store.update(MQ, 7, False)
    inst.broker_addrs = {"broker-a": {0: master.addr, 1: slave.addr}}
    inst.run(store.persist(MQ))
    assert [r.ext_fields["commitOffset"] for r in master.requests
            if r.code == RequestCode.UPDATE_CONSUMER_OFFSET] == ["7"]
    inst.routes.clear()
    inst.broker_addrs = {"broker-a": {1: slave.addr}}
    fc.topics.discard("T")  # the route refresh in between finds nothing better
    inst.run(store.persist(MQ))
    assert [r.ext_fields["commitOffset"] for r in slave.requests
            if r.code == RequestCode.UPDATE_CONSUMER_OFFSET] == ["7"]
