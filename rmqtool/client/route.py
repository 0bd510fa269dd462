"""What a client derives from a topic route (protocol.md §3.1, `MQClientInstance`).

The route itself is `rmqtool.remoting.bodies.TopicRouteData` (shared with the name server; its
parser reads both standard JSON and fastjson's unquoted integer map keys).
"""

from __future__ import annotations

from rmqtool.client.fault import TopicPublishInfo
from rmqtool.client.message import MessageQueue
from rmqtool.remoting.bodies import QueueData, TopicRouteData

PERM_READ = 4
PERM_WRITE = 2
MASTER_ID = 0

__all__ = ["MASTER_ID", "TopicRouteData", "broker_addr_table", "publish_info", "subscribe_queues",
           "with_default_topic_queue_nums"]


def broker_addr_table(route: TopicRouteData) -> dict[str, dict[int, str]]:
    return {b.brokerName: dict(b.brokerAddrs) for b in route.brokerDatas}


def publish_info(route: TopicRouteData, topic: str) -> TopicPublishInfo:
    """`topicRouteData2TopicPublishInfo`: write queues of masters, by broker name; orderTopicConf wins."""
    queues: list[MessageQueue] = []
    if route.orderTopicConf:
        for part in route.orderTopicConf.split(";"):
            name, _, num = part.partition(":")
            queues += [MessageQueue(topic, name, i) for i in range(int(num or 0))]
        return TopicPublishInfo(queues, order_topic=True)
    masters = {b.brokerName for b in route.brokerDatas if b.master_addr()}
    for qd in sorted(route.queueDatas, key=lambda q: q.brokerName):
        if qd.perm & PERM_WRITE and qd.brokerName in masters:
            queues += [MessageQueue(topic, qd.brokerName, i) for i in range(qd.writeQueueNums)]
    return TopicPublishInfo(queues)


def subscribe_queues(route: TopicRouteData, topic: str) -> list[MessageQueue]:
    """`topicRouteData2TopicSubscribeInfo`: read queues of every readable broker, sorted."""
    return sorted(MessageQueue(topic, qd.brokerName, i) for qd in route.queueDatas
                  if qd.perm & PERM_READ for i in range(qd.readQueueNums))


def with_default_topic_queue_nums(route: TopicRouteData, nums: int) -> TopicRouteData:
    """The TBW102 fallback: read = write = min(defaultTopicQueueNums, readQueueNums)."""
    qds = [QueueData(q.brokerName, min(nums, q.readQueueNums), min(nums, q.readQueueNums), q.perm, q.topicSysFlag)
           for q in route.queueDatas]
    return TopicRouteData(qds, route.brokerDatas, None)
