"""POP consumption state as Apache RocketMQ 5.x writes it: revive-log records and receipt handles.

A broker serving POP keeps its in-flight state as messages on `rmq_sys_REVIVE_LOG_<cluster>`:
a checkpoint (tag `ck`, Java's `PopCheckPoint`) per queue read of a pop, an ack (tag `ack`,
`AckMsg`) or batch ack (tag `bAck`, `BatchAckMsg`) per acknowledgement. Their bodies are
fastjson's `JSON.toJSONString` of those beans: fields sorted by their JSON name, nulls left out,
and for a checkpoint also the getter-only `reviveTime` (popTime + invisibleTime). The receipt
handle a consumer acks with is `ExtraInfoUtil.buildExtraInfo`: eight space-separated fields.
Everything here was checked against records and answers of Apache's broker 5.3.3.
"""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass, field
from typing import Any

CK_TAG = "ck"
ACK_TAG = "ack"
BATCH_ACK_TAG = "bAck"
REVIVE_TOPIC_PREFIX = "rmq_sys_REVIVE_LOG_"
REVIVE_GROUP = "CID_RMQ_SYS_REVIVE_GROUP"
POP_ORDER_REVIVE_QUEUE = 999  # KeyBuilder.POP_ORDER_REVIVE_QUEUE: orderly pops write no checkpoint
ACK_TIME_INTERVAL = 1000  # PopAckConstants.ackTimeInterval: a ck is delivered this much before its revive time
RETRY_QUEUE_NUM = 1  # PopAckConstants.retryQueueNum
RETRY_GROUP_TOPIC_PREFIX = "%RETRY%"
SPLIT = "@"
FIRST_POP_TIME = "1ST_POP_TIME"  # MessageConst.PROPERTY_FIRST_POP_TIME
POP_CK = "POP_CK"  # MessageConst.PROPERTY_POP_CK
POP_CK_OFFSET = "POP_CK_OFFSET"

NORMAL_TOPIC, RETRY_TOPIC, RETRY_TOPIC_V2 = "0", "1", "2"


def revive_topic(cluster: str) -> str:
    """`PopAckConstants.buildClusterReviveTopic`."""
    return REVIVE_TOPIC_PREFIX + cluster


# -- KeyBuilder ---------------------------------------------------------------------------------
def pop_retry_topic_v1(topic: str, group: str) -> str:
    return f"{RETRY_GROUP_TOPIC_PREFIX}{group}_{topic}"


def pop_retry_topic_v2(topic: str, group: str) -> str:
    return f"{RETRY_GROUP_TOPIC_PREFIX}{group}+{topic}"


def pop_retry_topic(topic: str, group: str, v2: bool = False) -> str:
    """`KeyBuilder.buildPopRetryTopic`: `%RETRY%group_topic`, or `%RETRY%group+topic` with enableRetryTopicV2."""
    return pop_retry_topic_v2(topic, group) if v2 else pop_retry_topic_v1(topic, group)


def is_pop_retry_topic_v2(topic: str) -> bool:
    return topic.startswith(RETRY_GROUP_TOPIC_PREFIX) and "+" in topic


def parse_normal_topic(topic: str, group: str) -> str:
    """`KeyBuilder.parseNormalTopic(topic, cid)`: the topic a pop retry topic of `group` stands for."""
    if not topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
        return topic
    v2 = f"{RETRY_GROUP_TOPIC_PREFIX}{group}+"
    if topic.startswith(v2):
        return topic[len(v2):]
    return topic[len(f"{RETRY_GROUP_TOPIC_PREFIX}{group}_"):]


def retry_flag(topic: str) -> str:
    """`ExtraInfoUtil.getRetry(topic)`: "0" normal, "1" retry topic, "2" a 5.x `+` retry topic."""
    if is_pop_retry_topic_v2(topic):
        return RETRY_TOPIC_V2
    if topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
        return RETRY_TOPIC
    return NORMAL_TOPIC


def real_topic(topic: str, group: str, flag: str) -> str:
    """`ExtraInfoUtil.getRealTopic(topic, cid, retry)`; ValueError for another flag (as Java)."""
    if flag == NORMAL_TOPIC:
        return topic
    if flag == RETRY_TOPIC:
        return pop_retry_topic_v1(topic, group)
    if flag == RETRY_TOPIC_V2:
        return pop_retry_topic_v2(topic, group)
    raise ValueError("getRetry fail, format is wrong")


# -- fastjson bodies ----------------------------------------------------------------------------
_PLAIN = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789%_-+.:|@ ")


def _json_str(s: str) -> str:
    if _PLAIN.issuperset(s):  # topic and group names: nothing to escape (the hot path)
        return f'"{s}"'
    return json.dumps(s, ensure_ascii=False)


def _dump(fields: dict[str, Any]) -> bytes:
    """fastjson's bean output: keys sorted, nulls skipped, no whitespace."""
    parts = []
    for k in sorted(fields):
        v = fields[k]
        if v is None:
            continue
        if isinstance(v, str):
            enc = _json_str(v)
        elif isinstance(v, list):
            enc = "[" + ",".join(str(int(x)) for x in v) + "]"
        else:
            enc = str(int(v))
        parts.append(f'"{k}":{enc}')
    return ("{" + ",".join(parts) + "}").encode("utf-8")


def _load(body: bytes | str, what: str) -> dict[str, Any]:
    try:
        data = json.loads(body)
    except (ValueError, UnicodeDecodeError) as e:
        raise ValueError(f"{what} body is not JSON: {e}") from None
    if not isinstance(data, dict):
        raise ValueError(f"{what} body is not a JSON object")
    return data


def _get(data: dict[str, Any], names: tuple[str, ...], kind: type, default: Any) -> Any:
    for n in names:
        if n in data and data[n] is not None:
            v = data[n]
            try:
                if kind is int:
                    if isinstance(v, bool):
                        raise TypeError
                    return int(v)
                if kind is str:
                    return str(v)
                if kind is list:
                    return [int(x) for x in v]
            except (TypeError, ValueError):
                raise ValueError(f"field {n!r} is not a {kind.__name__}: {v!r}") from None
    return default


@dataclass
class PopCheckPoint:
    """`PopCheckPoint`: the messages one pop took from one queue (offset `so` + each diff in `d`)."""

    start_offset: int
    pop_time: int
    invisible_time: int
    num: int
    queue_id: int
    topic: str
    cid: str
    bit_map: int = 0
    revive_offset: int = 0
    queue_offset_diff: list[int] | None = None
    broker_name: str | None = None
    re_put_times: str | None = None

    @property
    def revive_time(self) -> int:
        return self.pop_time + self.invisible_time

    def to_json(self) -> bytes:
        return _dump({"so": self.start_offset, "pt": self.pop_time, "it": self.invisible_time, "bm": self.bit_map,
                      "n": self.num, "q": self.queue_id, "t": self.topic, "c": self.cid, "ro": self.revive_offset,
                      "d": self.queue_offset_diff, "bn": self.broker_name, "rp": self.re_put_times,
                      "reviveTime": self.revive_time})

    @classmethod
    def from_json(cls, body: bytes | str) -> PopCheckPoint:
        d = _load(body, "checkpoint")
        return cls(start_offset=_get(d, ("so", "startOffset"), int, 0), pop_time=_get(d, ("pt", "popTime"), int, 0),
                   invisible_time=_get(d, ("it", "invisibleTime"), int, 0), num=_get(d, ("n", "num"), int, 0),
                   queue_id=_get(d, ("q", "queueId"), int, 0), topic=_get(d, ("t", "topic"), str, None),
                   cid=_get(d, ("c", "cid"), str, None), bit_map=_get(d, ("bm", "bitMap"), int, 0),
                   revive_offset=_get(d, ("ro", "reviveOffset"), int, 0),
                   queue_offset_diff=_get(d, ("d", "queueOffsetDiff"), list, None),
                   broker_name=_get(d, ("bn", "brokerName"), str, None),
                   re_put_times=_get(d, ("rp", "rePutTimes"), str, None))

    def add_diff(self, diff: int) -> None:
        if self.queue_offset_diff is None:
            self.queue_offset_diff = []
        self.queue_offset_diff.append(diff)

    def index_of_ack(self, ack_offset: int) -> int:
        """`indexOfAck`: the bit of `ack_offset`, -1 when this checkpoint does not hold it."""
        if ack_offset < self.start_offset:
            return -1
        if not self.queue_offset_diff:  # checkpoints of old brokers: consecutive offsets
            return ack_offset - self.start_offset if ack_offset - self.start_offset < self.num else -1
        try:
            return self.queue_offset_diff.index(ack_offset - self.start_offset)
        except ValueError:
            return -1

    def ack_offset_by_index(self, index: int) -> int:
        if not self.queue_offset_diff:
            return self.start_offset + index
        return self.start_offset + self.queue_offset_diff[index]

    def offsets(self) -> list[int]:
        return [self.ack_offset_by_index(i) for i in range(self.num)]

    def acked(self, index: int) -> bool:
        return bool(self.bit_map >> index & 1)

    def merge_key(self) -> str:
        """The key PopReviveService matches acks with (topic + cid + queueId + startOffset + popTime + brokerName)."""
        return f"{self.topic}{self.cid}{self.queue_id}{self.start_offset}{self.pop_time}{self.broker_name}"

    def unique_id(self) -> str:
        """`genCkUniqueId`: the UNIQ_KEY of the checkpoint record."""
        return SPLIT.join((self.topic, str(self.queue_id), str(self.start_offset), self.cid, str(self.pop_time),
                           str(self.broker_name), CK_TAG))

    def parse_re_put_times(self) -> int:
        if self.re_put_times is None:
            return 0
        try:
            return int(self.re_put_times)
        except ValueError:
            return 127


@dataclass
class AckMsg:
    """`AckMsg` (tag `ack`); with `ack_offset_list` a `BatchAckMsg` (tag `bAck`, `ao` is -1)."""

    ack_offset: int
    start_offset: int
    consumer_group: str
    topic: str
    queue_id: int
    pop_time: int
    broker_name: str | None = None
    ack_offset_list: list[int] | None = None

    @property
    def is_batch(self) -> bool:
        return self.ack_offset_list is not None

    @property
    def tag(self) -> str:
        return BATCH_ACK_TAG if self.is_batch else ACK_TAG

    def acked_offsets(self) -> list[int]:
        return list(self.ack_offset_list or []) if self.is_batch else [self.ack_offset]

    def to_json(self) -> bytes:
        return _dump({"ao": self.ack_offset, "so": self.start_offset, "c": self.consumer_group, "t": self.topic,
                      "q": self.queue_id, "pt": self.pop_time, "bn": self.broker_name, "aol": self.ack_offset_list})

    @classmethod
    def from_json(cls, body: bytes | str, *, batch: bool = False) -> AckMsg:
        d = _load(body, "batch ack" if batch else "ack")
        aol = _get(d, ("aol", "ackOffsetList"), list, None)
        return cls(ack_offset=_get(d, ("ao", "ackOffset"), int, 0), start_offset=_get(d, ("so", "startOffset"), int, 0),
                   consumer_group=_get(d, ("c", "consumerGroup"), str, None), topic=_get(d, ("t", "topic"), str, None),
                   queue_id=_get(d, ("q", "queueId"), int, 0), pop_time=_get(d, ("pt", "popTime"), int, 0),
                   broker_name=_get(d, ("bn", "brokerName"), str, None),
                   ack_offset_list=(aol if aol is not None else []) if batch else None)

    def merge_key(self, default_broker: str = "") -> str:
        bn = self.broker_name if self.broker_name and self.broker_name.strip() else default_broker
        return f"{self.topic}{self.consumer_group}{self.queue_id}{self.start_offset}{self.pop_time}{bn}"

    def unique_id(self) -> str:
        """`genAckUniqueId` (Java's appendAck writes it for batch acks too, after genBatchAckUniqueId)."""
        return SPLIT.join((self.topic, str(self.queue_id), str(self.ack_offset), self.consumer_group,
                           str(self.pop_time), str(self.broker_name), ACK_TAG))


# -- receipt handles (ExtraInfoUtil) ----------------------------------------------------------
@dataclass(frozen=True)
class ExtraInfo:
    """A receipt handle: `ckOffset popTime invisibleTime reviveQid retry brokerName queueId queueOffset`."""

    ck_offset: int
    pop_time: int
    invisible_time: int
    revive_qid: int
    retry: str
    broker_name: str
    queue_id: int
    queue_offset: int

    def __str__(self) -> str:
        return " ".join(str(x) for x in (self.ck_offset, self.pop_time, self.invisible_time, self.revive_qid,
                                         self.retry, self.broker_name, self.queue_id, self.queue_offset))

    @property
    def is_order(self) -> bool:
        return self.revive_qid == POP_ORDER_REVIVE_QUEUE

    def real_topic(self, topic: str, group: str) -> str:
        return real_topic(topic, group, self.retry)


def build_extra_info(ck_offset: int, pop_time: int, invisible_time: int, revive_qid: int, topic: str,
                     broker_name: str, queue_id: int, queue_offset: int) -> str:
    """`ExtraInfoUtil.buildExtraInfo` (the eight-field form)."""
    return str(ExtraInfo(ck_offset, pop_time, invisible_time, revive_qid, retry_flag(topic), broker_name, queue_id,
                         queue_offset))


# the getter of each field and the line of its throw in 5.3.3's ExtraInfoUtil.java (Java's remark names it)
_FIELD_GETTERS = (("getCkQueueOffset", 42), ("getPopTime", 49), ("getInvisibleTime", 56), ("getReviveQid", 63),
                  ("getRetry", 95), ("getBrokerName", 102), ("getQueueId", 109), ("getQueueOffset", 116))


class ExtraInfoError(ValueError):
    """A receipt handle Java's ExtraInfoUtil refuses (the broker answers SYSTEM_ERROR).

    `where` is the stack element Java's remark ends with (`RemotingHelper.exceptionSimpleDesc`)."""

    def __init__(self, message: str, where: str | None = None) -> None:
        super().__init__(message)
        self.where = where


def split_extra_info(text: str | None) -> list[str]:
    if text is None:
        raise ExtraInfoError("split extraInfo is null",
                             "org.apache.rocketmq.remoting.protocol.header.ExtraInfoUtil.split(ExtraInfoUtil.java:35)")
    return text.split(" ")


def extra_field(parts: list[str], index: int) -> str:
    """Field `index` of a split receipt handle, with ExtraInfoUtil's complaint when it is missing."""
    if len(parts) <= index:
        getter, line = _FIELD_GETTERS[index]
        raise ExtraInfoError(f"{getter} fail, extraInfoStrs length {len(parts)}",
                             f"org.apache.rocketmq.remoting.protocol.header.ExtraInfoUtil.{getter}"
                             f"(ExtraInfoUtil.java:{line})")
    return parts[index]


def extra_int(parts: list[str], index: int) -> int:
    v = extra_field(parts, index)
    try:
        return int(v)
    except ValueError:
        raise ExtraInfoError(f'For input string: "{v}"') from None


def parse_extra_info(text: str | None) -> ExtraInfo:
    """All eight fields of a receipt handle; ExtraInfoError as Java's getters fail."""
    p = split_extra_info(text)
    return ExtraInfo(extra_int(p, 0), extra_int(p, 1), extra_int(p, 2), extra_int(p, 3), extra_field(p, 4),
                     extra_field(p, 5), extra_int(p, 6), extra_int(p, 7))


def append_offset_info(parts: list[str], topic: str, queue_id: int, value: str) -> None:
    """One `retry queueId value` entry of startOffsetInfo / msgOffsetInfo / orderCountInfo."""
    parts.append(f"{retry_flag(topic)} {queue_id} {value}")


def parse_offset_info(text: str | None) -> dict[str, list[int]]:
    """`parseStartOffsetInfo` / `parseMsgOffsetInfo`: {"retry@queueId": [values]}."""
    out: dict[str, list[int]] = {}
    if not text:
        return out
    for one in text.split(";"):
        f = one.split(" ")
        if len(f) != 3:
            raise ValueError(f"parse offset info error, {text}")
        key = f"{f[0]}@{f[1]}"
        if key in out:
            raise ValueError(f"parse offset info error, duplicate, {text}")
        out[key] = [int(x) for x in f[2].split(",")]
    return out


# -- batch ack request body (BatchAckMessageRequestBody) -----------------------------------------
@dataclass
class BatchAck:
    """One entry of BATCH_ACK_MESSAGE's body: the acked offsets as a BitSet from `start_offset`."""

    consumer_group: str
    topic: str
    retry: str
    start_offset: int
    queue_id: int
    revive_queue_id: int
    pop_time: int
    invisible_time: int
    bits: list[int] = field(default_factory=list)  # indexes set in the BitSet

    def to_json_obj(self) -> dict[str, Any]:
        return {"b": base64.b64encode(bitset_bytes(self.bits)).decode(), "c": self.consumer_group,
                "it": self.invisible_time, "pt": self.pop_time, "q": self.queue_id, "r": self.retry,
                "rq": self.revive_queue_id, "so": self.start_offset, "t": self.topic}

    @classmethod
    def from_json_obj(cls, d: dict[str, Any]) -> BatchAck:
        raw = d.get("b", d.get("bitSet"))
        bits: list[int] = []
        if isinstance(raw, str):
            try:
                bits = bitset_indexes(base64.b64decode(raw, validate=True))
            except ValueError:
                raise ValueError(f"batch ack bitSet is not base64: {raw!r}") from None
        elif isinstance(raw, list):  # a byte array written as numbers
            bits = bitset_indexes(bytes(int(x) & 0xFF for x in raw))
        return cls(consumer_group=_get(d, ("c", "consumerGroup"), str, None), topic=_get(d, ("t", "topic"), str, None),
                   retry=_get(d, ("r", "retry"), str, NORMAL_TOPIC), start_offset=_get(d, ("so", "startOffset"), int, 0),
                   queue_id=_get(d, ("q", "queueId"), int, 0), revive_queue_id=_get(d, ("rq", "reviveQueueId"), int, 0),
                   pop_time=_get(d, ("pt", "popTime"), int, 0), invisible_time=_get(d, ("it", "invisibleTime"), int, 0),
                   bits=bits)


def bitset_bytes(indexes: list[int]) -> bytes:
    """`BitSet.toByteArray()`: little-endian bytes, no trailing zero bytes."""
    if not indexes:
        return b""
    n = 0
    for i in indexes:
        n |= 1 << i
    return n.to_bytes((n.bit_length() + 7) // 8, "little")


def bitset_indexes(data: bytes) -> list[int]:
    n = int.from_bytes(data, "little")
    return [i for i in range(n.bit_length()) if n >> i & 1]


def encode_batch_ack_body(broker_name: str | None, acks: list[BatchAck]) -> bytes:
    body: dict[str, Any] = {"acks": [a.to_json_obj() for a in acks]}
    if broker_name is not None:
        body["brokerName"] = broker_name
    return json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode()


def decode_batch_ack_body(body: bytes) -> tuple[str | None, list[BatchAck]]:
    d = _load(body, "batch ack request")
    acks = d.get("acks") or []
    if not isinstance(acks, list) or not all(isinstance(a, dict) for a in acks):
        raise ValueError("batch ack request: acks is not a list of objects")
    bn = d.get("brokerName")
    return (str(bn) if bn is not None else None), [BatchAck.from_json_obj(a) for a in acks]
