"""JSON bodies of remoting commands: routes, heartbeats, locks, stats (protocol.md §3, §4).

Each class mirrors a RocketMQ Java class of the same name, with its field names; `to_json_obj()`
gives the dict fastjson would write (fields sorted, nulls dropped), `from_json_obj()` reads what
Java, ali-ons or the C++ client send (missing fields take Java's defaults). Encode with
`rmqtool.remoting.fastjson.dumpb`.
"""

from __future__ import annotations

import json
import struct
import zlib
from dataclasses import dataclass, field
from typing import Any

from rmqtool.layouts.javahash import java_string_hash
from rmqtool.remoting.fastjson import bean, loads

SUB_ALL = "*"


def _list(v: Any) -> list:
    return list(v) if isinstance(v, (list, tuple, set)) else []


# ---------------------------------------------------------------- routes


@dataclass
class QueueData:
    brokerName: str
    readQueueNums: int = 4
    writeQueueNums: int = 4
    perm: int = 6
    topicSysFlag: int = 0

    def to_json_obj(self) -> dict[str, Any]:
        return bean(brokerName=self.brokerName, perm=self.perm, readQueueNums=self.readQueueNums,
                    topicSysFlag=self.topicSysFlag, writeQueueNums=self.writeQueueNums)

    @classmethod
    def from_json_obj(cls, o: dict[str, Any]) -> QueueData:
        return cls(str(o.get("brokerName", "")), int(o.get("readQueueNums", 0)), int(o.get("writeQueueNums", 0)),
                   int(o.get("perm", 0)), int(o.get("topicSysFlag", 0)))


@dataclass
class BrokerData:
    cluster: str
    brokerName: str
    brokerAddrs: dict[int, str] = field(default_factory=dict)  # brokerId (0 = master) -> "ip:port"

    def to_json_obj(self) -> dict[str, Any]:
        return bean(brokerAddrs=dict(sorted(self.brokerAddrs.items())), brokerName=self.brokerName,
                    cluster=self.cluster)

    @classmethod
    def from_json_obj(cls, o: dict[str, Any]) -> BrokerData:
        addrs = {int(k): str(v) for k, v in (o.get("brokerAddrs") or {}).items()}
        return cls(str(o.get("cluster", "")), str(o.get("brokerName", "")), addrs)

    def master_addr(self) -> str | None:
        return self.brokerAddrs.get(0)


@dataclass
class TopicRouteData:
    queueDatas: list[QueueData] = field(default_factory=list)
    brokerDatas: list[BrokerData] = field(default_factory=list)
    orderTopicConf: str | None = None
    filterServerTable: dict[str, list[str]] = field(default_factory=dict)

    def to_json_obj(self) -> dict[str, Any]:
        return bean(brokerDatas=[b.to_json_obj() for b in self.brokerDatas],
                    filterServerTable=self.filterServerTable, orderTopicConf=self.orderTopicConf,
                    queueDatas=[q.to_json_obj() for q in self.queueDatas])

    @classmethod
    def from_json_obj(cls, o: dict[str, Any]) -> TopicRouteData:
        return cls([QueueData.from_json_obj(q) for q in _list(o.get("queueDatas"))],
                   [BrokerData.from_json_obj(b) for b in _list(o.get("brokerDatas"))],
                   o.get("orderTopicConf"), dict(o.get("filterServerTable") or {}))

    @classmethod
    def decode(cls, body: bytes) -> TopicRouteData:
        return cls.from_json_obj(loads(body))


@dataclass
class ClusterInfo:
    brokerAddrTable: dict[str, BrokerData] = field(default_factory=dict)
    clusterAddrTable: dict[str, list[str]] = field(default_factory=dict)

    def to_json_obj(self) -> dict[str, Any]:
        return bean(brokerAddrTable={k: v.to_json_obj() for k, v in self.brokerAddrTable.items()},
                    clusterAddrTable={k: sorted(v) for k, v in self.clusterAddrTable.items()})

    @classmethod
    def from_json_obj(cls, o: dict[str, Any]) -> ClusterInfo:
        return cls({str(k): BrokerData.from_json_obj(v) for k, v in (o.get("brokerAddrTable") or {}).items()},
                   {str(k): [str(x) for x in _list(v)] for k, v in (o.get("clusterAddrTable") or {}).items()})


@dataclass
class BrokerMemberGroup:
    """The brokers of one broker name, by id; GET_BROKER_MEMBER_GROUP's answer (Java's
    `minimumBrokerId()` is no bean getter, so fastjson writes only these three fields)."""

    cluster: str | None  # None (a request without it) is left out, as fastjson drops nulls
    brokerName: str | None
    brokerAddrs: dict[int, str] = field(default_factory=dict)  # brokerId -> "ip:port"

    def to_json_obj(self) -> dict[str, Any]:
        return bean(brokerAddrs=dict(sorted(self.brokerAddrs.items())), brokerName=self.brokerName,
                    cluster=self.cluster)

    @classmethod
    def from_json_obj(cls, o: dict[str, Any]) -> BrokerMemberGroup:
        addrs = {int(k): str(v) for k, v in (o.get("brokerAddrs") or {}).items()}
        cluster, name = o.get("cluster"), o.get("brokerName")
        return cls(None if cluster is None else str(cluster), None if name is None else str(name), addrs)


@dataclass
class GetBrokerMemberGroupResponseBody:
    brokerMemberGroup: BrokerMemberGroup | None = None

    def to_json_obj(self) -> dict[str, Any]:
        group = self.brokerMemberGroup
        return bean(brokerMemberGroup=group.to_json_obj() if group is not None else None)

    @classmethod
    def from_json_obj(cls, o: dict[str, Any]) -> GetBrokerMemberGroupResponseBody:
        group = o.get("brokerMemberGroup")
        return cls(BrokerMemberGroup.from_json_obj(group) if isinstance(group, dict) else None)

    @classmethod
    def decode(cls, body: bytes) -> GetBrokerMemberGroupResponseBody:
        return cls.from_json_obj(loads(body))


# ---------------------------------------------------------------- topics


@dataclass
class TopicConfig:
    topicName: str
    readQueueNums: int = 16
    writeQueueNums: int = 16
    perm: int = 6
    topicFilterType: str = "SINGLE_TAG"
    topicSysFlag: int = 0
    order: bool = False
    attributes: dict[str, str] = field(default_factory=dict)

    def to_json_obj(self) -> dict[str, Any]:
        return bean(attributes=self.attributes, order=self.order, perm=self.perm,
                    readQueueNums=self.readQueueNums, topicFilterType=self.topicFilterType,
                    topicName=self.topicName, topicSysFlag=self.topicSysFlag, writeQueueNums=self.writeQueueNums)

    @classmethod
    def from_json_obj(cls, o: dict[str, Any]) -> TopicConfig:
        return cls(str(o.get("topicName", "")), int(o.get("readQueueNums", 16)), int(o.get("writeQueueNums", 16)),
                   int(o.get("perm", 6)), str(o.get("topicFilterType") or "SINGLE_TAG"),
                   int(o.get("topicSysFlag", 0)), bool(o.get("order", False)), dict(o.get("attributes") or {}))

    def encode_line(self) -> str:
        """`TopicConfig.encode()`, used in compressed REGISTER_BROKER bodies."""
        return f"{self.topicName} {self.readQueueNums} {self.writeQueueNums} {self.perm} {self.topicFilterType}"

    @classmethod
    def decode_line(cls, line: str) -> TopicConfig:
        parts = line.split(" ")
        if len(parts) < 5:
            raise ValueError(f"bad TopicConfig line {line!r}")
        return cls(parts[0], int(parts[1]), int(parts[2]), int(parts[3]), parts[4])


@dataclass
class DataVersion:
    counter: int = 0
    timestamp: int = 0
    stateVersion: int = 0

    def to_json_obj(self) -> dict[str, Any]:
        return bean(counter=self.counter, stateVersion=self.stateVersion, timestamp=self.timestamp)

    @classmethod
    def from_json_obj(cls, o: dict[str, Any] | None) -> DataVersion:
        o = o or {}
        return cls(int(o.get("counter", 0)), int(o.get("timestamp", 0)), int(o.get("stateVersion", 0)))


@dataclass
class TopicConfigSerializeWrapper:
    topicConfigTable: dict[str, TopicConfig] = field(default_factory=dict)
    dataVersion: DataVersion = field(default_factory=DataVersion)

    def to_json_obj(self) -> dict[str, Any]:
        return bean(dataVersion=self.dataVersion.to_json_obj(),
                    topicConfigTable={k: v.to_json_obj() for k, v in self.topicConfigTable.items()})

    @classmethod
    def from_json_obj(cls, o: dict[str, Any]) -> TopicConfigSerializeWrapper:
        return cls({str(k): TopicConfig.from_json_obj(v) for k, v in (o.get("topicConfigTable") or {}).items()},
                   DataVersion.from_json_obj(o.get("dataVersion")))


@dataclass
class RegisterBrokerBody:
    topicConfigSerializeWrapper: TopicConfigSerializeWrapper = field(default_factory=TopicConfigSerializeWrapper)
    filterServerList: list[str] = field(default_factory=list)

    def to_json_obj(self) -> dict[str, Any]:
        return bean(filterServerList=self.filterServerList,
                    topicConfigSerializeWrapper=self.topicConfigSerializeWrapper.to_json_obj())

    @classmethod
    def decode(cls, body: bytes, compressed: bool = False) -> RegisterBrokerBody:
        """`RegisterBrokerBody.decode`: JSON, or the zlib-compressed binary form."""
        if not compressed:
            o = loads(body) if body else {}
            return cls(TopicConfigSerializeWrapper.from_json_obj(o.get("topicConfigSerializeWrapper") or {}),
                       [str(x) for x in _list(o.get("filterServerList"))])
        raw = zlib.decompress(body)
        p = 0

        def chunk() -> bytes:
            nonlocal p
            (n,) = struct.unpack_from(">i", raw, p)
            if n < 0 or p + 4 + n > len(raw):
                raise ValueError("compressed register body cut short")
            p += 4 + n
            return raw[p - n : p]

        dv = DataVersion.from_json_obj(json.loads(chunk()))
        (count,) = struct.unpack_from(">i", raw, p)
        p += 4
        table = {}
        for _ in range(count):
            tc = TopicConfig.decode_line(chunk().decode("utf-8"))
            table[tc.topicName] = tc
        filters = json.loads(chunk()) if p < len(raw) else []
        return cls(TopicConfigSerializeWrapper(table, dv), [str(x) for x in filters or []])

    def encode_compressed(self) -> bytes:
        def chunk(b: bytes) -> bytes:
            return struct.pack(">i", len(b)) + b

        w = self.topicConfigSerializeWrapper
        raw = chunk(json.dumps(w.dataVersion.to_json_obj(), separators=(",", ":")).encode())
        raw += struct.pack(">i", len(w.topicConfigTable))
        raw += b"".join(chunk(t.encode_line().encode()) for t in w.topicConfigTable.values())
        raw += chunk(json.dumps(self.filterServerList, separators=(",", ":")).encode())
        return zlib.compress(raw)


# ---------------------------------------------------------------- clients


@dataclass
class SubscriptionData:
    topic: str
    subString: str = SUB_ALL
    tagsSet: list[str] = field(default_factory=list)
    codeSet: list[int] = field(default_factory=list)
    subVersion: int = 0
    expressionType: str = "TAG"
    classFilterMode: bool = False

    def to_json_obj(self) -> dict[str, Any]:
        return bean(classFilterMode=self.classFilterMode, codeSet=self.codeSet, expressionType=self.expressionType,
                    subString=self.subString, subVersion=self.subVersion, tagsSet=self.tagsSet, topic=self.topic)

    @classmethod
    def from_json_obj(cls, o: dict[str, Any]) -> SubscriptionData:
        return cls(str(o.get("topic", "")), str(o.get("subString") or SUB_ALL),
                   [str(x) for x in _list(o.get("tagsSet"))], [int(x) for x in _list(o.get("codeSet"))],
                   int(o.get("subVersion") or 0), str(o.get("expressionType") or "TAG"),
                   bool(o.get("classFilterMode", False)))

    @classmethod
    def build(cls, topic: str, expression: str | None, expression_type: str | None = "TAG",
              sub_version: int = 0) -> SubscriptionData:
        """`FilterAPI.build`: split a TAG expression on `||`; SQL92 keeps the expression whole."""
        etype = (expression_type or "TAG").upper()
        sd = cls(topic, expression or SUB_ALL, subVersion=sub_version, expressionType=etype)
        if etype != "TAG":
            return sd
        expr = (expression or "").strip()
        if not expr or expr == SUB_ALL:
            sd.subString = SUB_ALL
            return sd
        for tag in expr.split("||"):
            tag = tag.strip()
            if tag and tag not in sd.tagsSet:
                sd.tagsSet.append(tag)
                sd.codeSet.append(java_string_hash(tag))
        return sd

    @property
    def is_all(self) -> bool:
        return self.expressionType == "TAG" and (self.subString in ("", SUB_ALL) or not self.tagsSet)


@dataclass
class ConsumerData:
    groupName: str
    consumeType: str = "CONSUME_PASSIVELY"
    messageModel: str = "CLUSTERING"
    consumeFromWhere: str = "CONSUME_FROM_LAST_OFFSET"
    subscriptionDataSet: list[SubscriptionData] = field(default_factory=list)
    unitMode: bool = False

    def to_json_obj(self) -> dict[str, Any]:
        return bean(consumeFromWhere=self.consumeFromWhere, consumeType=self.consumeType, groupName=self.groupName,
                    messageModel=self.messageModel,
                    subscriptionDataSet=[s.to_json_obj() for s in self.subscriptionDataSet], unitMode=self.unitMode)

    @classmethod
    def from_json_obj(cls, o: dict[str, Any]) -> ConsumerData:
        return cls(str(o.get("groupName", "")), str(o.get("consumeType") or "CONSUME_PASSIVELY"),
                   str(o.get("messageModel") or "CLUSTERING"),
                   str(o.get("consumeFromWhere") or "CONSUME_FROM_LAST_OFFSET"),
                   [SubscriptionData.from_json_obj(s) for s in _list(o.get("subscriptionDataSet"))
                    if isinstance(s, dict)],
                   bool(o.get("unitMode", False)))


@dataclass
class ProducerData:
    groupName: str

    def to_json_obj(self) -> dict[str, Any]:
        return bean(groupName=self.groupName)


@dataclass
class HeartbeatData:
    clientID: str
    producerDataSet: list[ProducerData] = field(default_factory=list)
    consumerDataSet: list[ConsumerData] = field(default_factory=list)

    def to_json_obj(self) -> dict[str, Any]:
        return bean(clientID=self.clientID, consumerDataSet=[c.to_json_obj() for c in self.consumerDataSet],
                    producerDataSet=[p.to_json_obj() for p in self.producerDataSet])

    @classmethod
    def from_json_obj(cls, o: dict[str, Any]) -> HeartbeatData:
        return cls(str(o.get("clientID", "")),
                   [ProducerData(str(p.get("groupName", ""))) for p in _list(o.get("producerDataSet"))
                    if isinstance(p, dict)],
                   [ConsumerData.from_json_obj(c) for c in _list(o.get("consumerDataSet")) if isinstance(c, dict)])

    @classmethod
    def decode(cls, body: bytes) -> HeartbeatData:
        o = loads(body)
        if not isinstance(o, dict):
            raise ValueError("heartbeat body is not an object")
        return cls.from_json_obj(o)


@dataclass
class ConsumerListBody:
    consumerIdList: list[str] = field(default_factory=list)

    def to_json_obj(self) -> dict[str, Any]:
        return bean(consumerIdList=self.consumerIdList)

    @classmethod
    def decode(cls, body: bytes) -> ConsumerListBody:
        return cls([str(x) for x in _list(loads(body).get("consumerIdList"))])


@dataclass(frozen=True, order=True)
class MessageQueue:
    topic: str
    brokerName: str
    queueId: int

    def to_json_obj(self) -> dict[str, Any]:
        return bean(brokerName=self.brokerName, queueId=self.queueId, topic=self.topic)

    @classmethod
    def from_json_obj(cls, o: Any) -> MessageQueue:
        if isinstance(o, tuple):  # an object map key from fastjson.loads
            o = dict(o)
        return cls(str(o.get("topic", "")), str(o.get("brokerName", "")), int(o.get("queueId", 0)))


@dataclass
class LockBatchRequestBody:
    """Also UnlockBatchRequestBody (same fields)."""

    consumerGroup: str
    clientId: str
    mqSet: list[MessageQueue] = field(default_factory=list)
    onlyThisBroker: bool = False

    def to_json_obj(self) -> dict[str, Any]:
        return bean(clientId=self.clientId, consumerGroup=self.consumerGroup,
                    mqSet=[m.to_json_obj() for m in self.mqSet], onlyThisBroker=self.onlyThisBroker)

    @classmethod
    def decode(cls, body: bytes) -> LockBatchRequestBody:
        o = loads(body)
        return cls(str(o.get("consumerGroup", "")), str(o.get("clientId", "")),
                   [MessageQueue.from_json_obj(m) for m in _list(o.get("mqSet")) if isinstance(m, dict)],
                   bool(o.get("onlyThisBroker", False)))


@dataclass
class LockBatchResponseBody:
    lockOKMQSet: list[MessageQueue] = field(default_factory=list)

    def to_json_obj(self) -> dict[str, Any]:
        return bean(lockOKMQSet=[m.to_json_obj() for m in self.lockOKMQSet])

    @classmethod
    def decode(cls, body: bytes) -> LockBatchResponseBody:
        return cls([MessageQueue.from_json_obj(m) for m in _list(loads(body).get("lockOKMQSet"))])


@dataclass
class CheckClientRequestBody:
    clientId: str
    group: str
    subscriptionData: SubscriptionData | None = None

    def to_json_obj(self) -> dict[str, Any]:
        return bean(clientId=self.clientId, group=self.group,
                    subscriptionData=self.subscriptionData.to_json_obj() if self.subscriptionData else None)

    @classmethod
    def decode(cls, body: bytes) -> CheckClientRequestBody:
        o = loads(body)
        sd = o.get("subscriptionData")
        return cls(str(o.get("clientId", "")), str(o.get("group", "")),
                   SubscriptionData.from_json_obj(sd) if isinstance(sd, dict) else None)


@dataclass
class GroupList:
    groupList: list[str] = field(default_factory=list)

    def to_json_obj(self) -> dict[str, Any]:
        return bean(groupList=self.groupList)


@dataclass
class KVTable:
    table: dict[str, str] = field(default_factory=dict)

    def to_json_obj(self) -> dict[str, Any]:
        return bean(table=self.table)


# ---------------------------------------------------------------- stats (mqadmin topicStatus, consumerProgress)


@dataclass
class TopicOffset:
    minOffset: int = 0
    maxOffset: int = 0
    lastUpdateTimestamp: int = 0

    def to_json_obj(self) -> dict[str, Any]:
        return bean(lastUpdateTimestamp=self.lastUpdateTimestamp, maxOffset=self.maxOffset, minOffset=self.minOffset)


@dataclass
class TopicStatsTable:
    offsetTable: dict[MessageQueue, TopicOffset] = field(default_factory=dict)

    def to_json_obj(self) -> dict[str, Any]:
        return bean(offsetTable=dict(self.offsetTable))

    @classmethod
    def decode(cls, body: bytes) -> TopicStatsTable:
        o = loads(body).get("offsetTable") or {}
        return cls({MessageQueue.from_json_obj(k): TopicOffset(int(v.get("minOffset", 0)), int(v.get("maxOffset", 0)),
                                                               int(v.get("lastUpdateTimestamp", 0)))
                    for k, v in o.items()})


@dataclass
class OffsetWrapper:
    brokerOffset: int = 0
    consumerOffset: int = 0
    pullOffset: int = 0
    lastTimestamp: int = 0

    def to_json_obj(self) -> dict[str, Any]:
        return bean(brokerOffset=self.brokerOffset, consumerOffset=self.consumerOffset,
                    lastTimestamp=self.lastTimestamp, pullOffset=self.pullOffset)


@dataclass
class ConsumeStats:
    offsetTable: dict[MessageQueue, OffsetWrapper] = field(default_factory=dict)
    consumeTps: float = 0.0

    def to_json_obj(self) -> dict[str, Any]:
        return bean(consumeTps=self.consumeTps, offsetTable=dict(self.offsetTable))

    @classmethod
    def decode(cls, body: bytes) -> ConsumeStats:
        o = loads(body)
        table = {MessageQueue.from_json_obj(k): OffsetWrapper(int(v.get("brokerOffset", 0)),
                                                              int(v.get("consumerOffset", 0)),
                                                              int(v.get("pullOffset", 0)),
                                                              int(v.get("lastTimestamp", 0)))
                 for k, v in (o.get("offsetTable") or {}).items()}
        return cls(table, float(o.get("consumeTps", 0.0)))


@dataclass
class Connection:
    clientId: str
    clientAddr: str
    language: str = "JAVA"
    version: int = 0

    def to_json_obj(self) -> dict[str, Any]:
        return bean(clientAddr=self.clientAddr, clientId=self.clientId, language=self.language,
                    version=self.version)


@dataclass
class ConsumerConnection:
    connectionSet: list[Connection] = field(default_factory=list)
    subscriptionTable: dict[str, SubscriptionData] = field(default_factory=dict)
    consumeType: str | None = None
    messageModel: str | None = None
    consumeFromWhere: str | None = None

    def to_json_obj(self) -> dict[str, Any]:
        return bean(connectionSet=[c.to_json_obj() for c in self.connectionSet],
                    consumeFromWhere=self.consumeFromWhere, consumeType=self.consumeType,
                    messageModel=self.messageModel,
                    subscriptionTable={k: v.to_json_obj() for k, v in self.subscriptionTable.items()})

    @classmethod
    def decode(cls, body: bytes) -> ConsumerConnection:
        o = loads(body)
        return cls([Connection(str(c.get("clientId", "")), str(c.get("clientAddr", "")), str(c.get("language", "")),
                               int(c.get("version", 0))) for c in _list(o.get("connectionSet"))],
                   {str(k): SubscriptionData.from_json_obj(v) for k, v in (o.get("subscriptionTable") or {}).items()},
                   o.get("consumeType"), o.get("messageModel"), o.get("consumeFromWhere"))
