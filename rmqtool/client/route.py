"""Topic routes from the name server (protocol.md §3.1) and what a client derives from them.

Client-side view of `TopicRouteData`: parses both the standard JSON and fastjson's unquoted
integer map keys (`{0:"ip:port"}`) older name servers send.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field

from rmqtool.client.fault import TopicPublishInfo
from rmqtool.client.message import MessageQueue

PERM_READ = 4
PERM_WRITE = 2
MASTER_ID = 0

_UNQUOTED_KEY = re.compile(r'([{,])(-?\d+):')


@dataclass(slots=True)
class QueueData:
    broker_name: str
    read_queue_nums: int
    write_queue_nums: int
    perm: int = 6
    topic_sys_flag: int = 0


@dataclass(slots=True)
class BrokerData:
    cluster: str
    broker_name: str
    broker_addrs: dict[int, str] = field(default_factory=dict)

    @property
    def master_addr(self) -> str | None:
        return self.broker_addrs.get(MASTER_ID)


@dataclass(slots=True)
class TopicRouteData:
    queue_datas: list[QueueData]
    broker_datas: list[BrokerData]
    order_topic_conf: str | None = None

    @classmethod
    def decode(cls, body: bytes) -> TopicRouteData:
        text = body.decode("utf-8")
        try:
            obj = json.loads(text)
        except json.JSONDecodeError:
            obj = json.loads(_UNQUOTED_KEY.sub(r'\1"\2":', text))
        qds = [QueueData(q["brokerName"], int(q.get("readQueueNums", 0)), int(q.get("writeQueueNums", 0)),
                         int(q.get("perm", 6)), int(q.get("topicSysFlag", 0)))
               for q in obj.get("queueDatas") or []]
        bds = [BrokerData(b.get("cluster", ""), b["brokerName"],
                          {int(k): v for k, v in (b.get("brokerAddrs") or {}).items()})
               for b in obj.get("brokerDatas") or []]
        return cls(qds, bds, obj.get("orderTopicConf"))

    def broker_addr_table(self) -> dict[str, dict[int, str]]:
        return {b.broker_name: dict(b.broker_addrs) for b in self.broker_datas}

    def publish_info(self, topic: str) -> TopicPublishInfo:
        """`topicRouteData2TopicPublishInfo`: write queues of masters, by broker name; orderTopicConf wins."""
        queues: list[MessageQueue] = []
        if self.order_topic_conf:
            for part in self.order_topic_conf.split(";"):
                name, _, num = part.partition(":")
                queues += [MessageQueue(topic, name, i) for i in range(int(num or 0))]
            return TopicPublishInfo(queues, order_topic=True)
        masters = {b.broker_name for b in self.broker_datas if b.master_addr}
        for qd in sorted(self.queue_datas, key=lambda q: q.broker_name):
            if qd.perm & PERM_WRITE and qd.broker_name in masters:
                queues += [MessageQueue(topic, qd.broker_name, i) for i in range(qd.write_queue_nums)]
        return TopicPublishInfo(queues)

    def subscribe_queues(self, topic: str) -> list[MessageQueue]:
        """`topicRouteData2TopicSubscribeInfo`: read queues of every readable broker, sorted."""
        return sorted(MessageQueue(topic, qd.broker_name, i) for qd in self.queue_datas
                      if qd.perm & PERM_READ for i in range(qd.read_queue_nums))

    def with_default_topic_queue_nums(self, nums: int) -> TopicRouteData:
        """The TBW102 fallback: read = write = min(defaultTopicQueueNums, readQueueNums)."""
        qds = [QueueData(q.broker_name, min(nums, q.read_queue_nums), min(nums, q.read_queue_nums), q.perm,
                         q.topic_sys_flag) for q in self.queue_datas]
        return TopicRouteData(qds, self.broker_datas, None)
