"""Custom headers (extFields) of the remoting requests and responses we serve and send.

Field names are RocketMQ's `*RequestHeader` / `*ResponseHeader` fields (protocol.md §3, §4).
Decoding follows `RemotingCommand.decodeCommandCustomHeader`: values arrive as strings (Java),
numbers or booleans (ali-ons), `"0"`/`"1"` for booleans (C++ 1.x); unknown keys are ignored;
a required field that is missing or unparsable raises `HeaderError` (Java would NPE later and
answer SYSTEM_ERROR). Encoding writes every non-None field as a string, as Java does.
"""

from __future__ import annotations

import dataclasses
import math
import typing
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from typing import Any, TypeVar

from rmqtool.remoting.plainheaders import plain_reader

T = TypeVar("T", bound="Header")


class HeaderError(ValueError):
    """A required header field is missing or not a number."""


def _parse_bool(v: str) -> bool:
    return v.strip().lower() == "true"  # Boolean.parseBoolean: "1" is false, as in Java


# Header fields Java declares `Long`; every other int field is an `Integer` (int32). A value
# outside its Java type fails `Integer.parseInt` / `Long.parseLong` there, so it does here too,
# before any of it reaches a struct (queueId, flag, sysFlag are packed as int32 into records).
LONG_FIELDS = frozenset({
    "brokerId", "epoch", "maxOffset", "minOffset", "confirmOffset", "heartbeatTimeoutMills",
    "heartbeatTimeoutMillis", "bornTimestamp", "storeTimestamp", "queueOffset", "commitOffset",
    "suspendTimeoutMillis", "subVersion", "nextBeginOffset", "offset", "timestamp", "beginTimestamp",
    "endTimestamp", "indexLastUpdateTimestamp", "indexLastUpdatePhyoffset", "tranStateTableOffset",
    "commitLogOffset", "suggestWhichBrokerId",
})
INT32_RANGE = (-(2**31), 2**31 - 1)
INT64_RANGE = (-(2**63), 2**63 - 1)


def _parse_int(v: str) -> int:
    v = v.strip()
    if len(v) > 40:  # no int64 is that long: int() of a 16 MiB digit string costs seconds
        raise ValueError("too long for a number")
    try:
        return int(v)
    except ValueError:
        f = float(v)  # JSON numbers such as 4.0 from JavaScript
        if not (math.isfinite(f) and f.is_integer()):
            raise ValueError(f"not an integer: {v!r}") from None
        return int(f)


@cache
def _fields(cls: type) -> list[tuple[str, type, bool]]:
    hints = typing.get_type_hints(cls)
    out = []
    for f in dataclasses.fields(cls):
        t = hints[f.name]
        args = [a for a in typing.get_args(t) if a is not type(None)]
        base = args[0] if args else t
        required = f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
        out.append((f.name, base, required))
    return out


_STR, _INT, _BOOL, _LONG = 0, 1, 2, 3
Plan = tuple[tuple[str | None, str, int, bool], ...]  # (extFields key, field name, kind, required)


@cache
def _plan(cls: type, keys: tuple[tuple[str, str], ...] | None = None) -> Plan:
    """How `from_ext` reads `cls`: per field its extFields key (the name, or the V2 letter that
    `keys` maps to it), its kind and whether it is required; worked out once per class."""
    letter = {name: key for key, name in keys} if keys else {}
    out = []
    for name, typ, required in _fields(cls):
        kind = _BOOL if typ is bool else (_LONG if name in LONG_FIELDS else _INT) if typ is int else _STR
        # with `keys`, a field that has no letter is never read (None is no extFields key)
        out.append((letter.get(name) if keys else name, name, kind, required))
    return tuple(out)


@cache
def _reader(cls: type, keys: tuple[tuple[str, str], ...] | None = None) -> Callable[[dict[str, str]], Any]:
    return plain_reader(cls, _plan(cls, keys))


def _decode(cls: type[T], ext: dict[str, str], plan: Plan) -> T:
    get = ext.get
    kw: dict[str, Any] = {}
    for key, name, kind, required in plan:
        raw = get(key)
        if raw is None or (kind and raw == ""):
            if required:
                raise HeaderError(f"the custom field <{name}> is null")
            continue
        if kind == _STR:
            kw[name] = raw
        elif kind == _BOOL:
            kw[name] = _parse_bool(raw)
        else:
            try:
                n = int(raw) if len(raw) < 24 else _parse_int(raw)  # int() strips whitespace itself
            except ValueError:
                try:
                    n = _parse_int(raw)
                except ValueError:
                    if required:
                        raise HeaderError(f"the custom field <{name}> is not a number: {_clip(raw)}") from None
                    continue
            lo, hi = INT64_RANGE if kind == _LONG else INT32_RANGE
            if not lo <= n <= hi:
                if required:
                    raise HeaderError(f"the custom field <{name}> is out of the range of a Java "
                                      f"{'long' if kind == _LONG else 'int'}: {_clip(raw)}")
                continue
            kw[name] = n
    return cls(**kw)


def _clip(raw: str) -> str:
    r = repr(raw)
    return r if len(r) <= 40 else r[:37] + "..."


@dataclass
class Header:
    """Base: `from_ext` / `to_ext` by the dataclass fields' names and types."""

    @classmethod
    def from_ext(cls: type[T], ext: dict[str, str] | None) -> T:
        ext = ext or {}
        h = _reader(cls)(ext)  # the plainly valid header, written-out reader (plainheaders.py)
        return h if h is not None else _decode(cls, ext, _plan(cls))

    def to_ext(self) -> dict[str, str]:
        out: dict[str, str] = {}
        for name, _typ, _req in _fields(type(self)):
            v = getattr(self, name)
            if v is None:
                continue
            out[name] = ("true" if v else "false") if isinstance(v, bool) else str(v)
        return out


# ---------------------------------------------------------------- name server

@dataclass
class GetRouteInfoRequestHeader(Header):
    topic: str
    acceptStandardJsonOnly: bool | None = None


@dataclass
class RegisterBrokerRequestHeader(Header):
    """REGISTER_BROKER (103). `heartbeatTimeoutMillis` (`@CFNullable`) is set only by a broker with
    `enableSlaveActingMaster` (its `brokerNotActiveTimeoutMillis`, 10 s by default): the name server
    then expires that broker after it instead of the default 120 s."""

    brokerName: str
    brokerAddr: str
    clusterName: str
    haServerAddr: str
    brokerId: int
    compressed: bool | None = None
    bodyCrc32: int | None = None
    heartbeatTimeoutMillis: int | None = None
    # `@CFNullable Boolean`: every 5.x broker sends it (its enableSlaveActingMaster); a name server
    # takes it missing as a pre-5 broker, whose slaves never register topics
    enableActingMaster: bool | None = None


@dataclass
class RegisterBrokerResponseHeader(Header):
    haServerAddr: str | None = None
    masterAddr: str | None = None


@dataclass
class UnRegisterBrokerRequestHeader(Header):
    brokerName: str
    brokerAddr: str
    clusterName: str
    brokerId: int


@dataclass
class QueryDataVersionRequestHeader(Header):
    """QUERY_DATA_VERSION (322): the broker's identity; its DataVersion JSON is the body."""

    brokerName: str
    brokerAddr: str
    clusterName: str
    brokerId: int


@dataclass
class QueryDataVersionResponseHeader(Header):
    changed: bool | None = None


@dataclass
class GetBrokerMemberGroupRequestHeader(Header):
    """GET_BROKER_MEMBER_GROUP (901). Both are `@CFNotNull` in Java, yet optional here: this header
    is no FastCodesHeader, and `decodeCommandCustomHeaderDirectly` logs and swallows its own "is
    null" exception, so Apache's name server answers a request lacking them (an empty group)."""

    clusterName: str | None = None
    brokerName: str | None = None


@dataclass
class BrokerHeartbeatRequestHeader(Header):
    """BROKER_HEARTBEAT (904). Java's `BrokerOuterAPI.sendHeartbeat` sets only the first three
    fields, so everything after `brokerName` is optional (`@CFNullable` in Java)."""

    clusterName: str
    brokerAddr: str
    brokerName: str
    brokerId: int | None = None
    epoch: int | None = None
    maxOffset: int | None = None
    confirmOffset: int | None = None
    heartbeatTimeoutMills: int | None = None
    electionPriority: int | None = None


# ---------------------------------------------------------------- send

@dataclass
class SendMessageRequestHeader(Header):
    """V1 names (code 10). V2 (310, 320) sends the same fields under the letters of `V2_LETTERS`."""

    producerGroup: str
    topic: str
    defaultTopic: str
    defaultTopicQueueNums: int
    queueId: int
    sysFlag: int
    bornTimestamp: int
    flag: int
    properties: str | None = None
    reconsumeTimes: int | None = None
    unitMode: bool | None = None
    batch: bool | None = None
    maxReconsumeTimes: int | None = None
    brokerName: str | None = None

    def to_v2_ext(self) -> dict[str, str]:
        """extFields of SEND_MESSAGE_V2 / SEND_BATCH_MESSAGE (`SendMessageRequestHeaderV2`)."""
        v1 = self.to_ext()
        return {letter: v1[name] for letter, name in V2_LETTERS.items() if name in v1}


# SendMessageRequestHeaderV2.createSendMessageRequestHeaderV1: letter -> V1 field name
V2_LETTERS: dict[str, str] = {
    "a": "producerGroup", "b": "topic", "c": "defaultTopic", "d": "defaultTopicQueueNums",
    "e": "queueId", "f": "sysFlag", "g": "bornTimestamp", "h": "flag", "i": "properties",
    "j": "reconsumeTimes", "k": "unitMode", "l": "maxReconsumeTimes", "m": "batch", "n": "brokerName",
}
_V2_KEYS = tuple(V2_LETTERS.items())


_send_readers: list[Callable[[dict[str, str]], Any]] = []  # (V2 letters, V1 names), made on first use


def send_header_from_ext(code: int, ext: dict[str, str] | None) -> SendMessageRequestHeader:
    """Decode a send header of code 10 (long names) or 310/320 (V2 letters)."""
    ext = ext or {}
    readers = _send_readers or _make_send_readers()  # no cache key of 14 pairs hashed per send
    if code != 10 or ("a" in ext and "producerGroup" not in ext):
        h = readers[0](ext)
        if h is not None:
            return h
        # read the letters in place (same result as renaming them to the V1 names first)
        return _decode(SendMessageRequestHeader, ext, _plan(SendMessageRequestHeader, _V2_KEYS))
    h = readers[1](ext)
    return h if h is not None else _decode(SendMessageRequestHeader, ext, _plan(SendMessageRequestHeader))


def _make_send_readers() -> list[Callable[[dict[str, str]], Any]]:
    _send_readers[:] = [_reader(SendMessageRequestHeader, _V2_KEYS), _reader(SendMessageRequestHeader)]
    return _send_readers


@dataclass
class SendMessageResponseHeader(Header):
    msgId: str
    queueId: int
    queueOffset: int
    transactionId: str | None = None
    batchUniqId: str | None = None
    MSG_REGION: str | None = "DefaultRegion"
    TRACE_ON: str | None = "true"


# ---------------------------------------------------------------- pull

@dataclass
class PullMessageRequestHeader(Header):
    consumerGroup: str
    topic: str
    queueId: int
    queueOffset: int
    maxMsgNums: int
    sysFlag: int
    commitOffset: int
    suspendTimeoutMillis: int
    subVersion: int
    subscription: str | None = None
    expressionType: str | None = None
    maxMsgBytes: int | None = None


@dataclass
class PullMessageResponseHeader(Header):
    suggestWhichBrokerId: int
    nextBeginOffset: int
    minOffset: int
    maxOffset: int


class PullSysFlag:
    COMMIT_OFFSET = 0x1
    SUSPEND = 0x2
    SUBSCRIPTION = 0x4
    CLASS_FILTER = 0x8
    LITE_PULL = 0x10

    @staticmethod
    def build(commit_offset: bool, suspend: bool, subscription: bool, class_filter: bool = False,
              lite_pull: bool = False) -> int:
        return (commit_offset * 1) | (suspend * 2) | (subscription * 4) | (class_filter * 8) | (lite_pull * 16)


# ---------------------------------------------------------------- offsets

@dataclass
class QueryConsumerOffsetRequestHeader(Header):
    consumerGroup: str
    topic: str
    queueId: int


@dataclass
class UpdateConsumerOffsetRequestHeader(Header):
    """UPDATE_CONSUMER_OFFSET (15). Java decodes an unparsable queueId / commitOffset to null
    (`decodeCommandCustomHeaderDirectly` logs and goes on) and the processor then answers
    INVALID_PARAMETER, so they are optional here and checked by the processor."""

    consumerGroup: str
    topic: str
    queueId: int | None = None
    commitOffset: int | None = None


@dataclass
class OffsetResponseHeader(Header):
    """QueryConsumerOffsetResponseHeader, GetMaxOffsetResponseHeader, GetMinOffsetResponseHeader,
    SearchOffsetResponseHeader: all carry just `offset`."""

    offset: int


@dataclass
class TopicQueueRequestHeader(Header):
    """GetMaxOffsetRequestHeader / GetMinOffsetRequestHeader / GetEarliestMsgStoretimeRequestHeader."""

    topic: str
    queueId: int


@dataclass
class SearchOffsetRequestHeader(Header):
    topic: str
    queueId: int
    timestamp: int
    boundaryType: str | None = None


@dataclass
class GetEarliestMsgStoretimeResponseHeader(Header):
    timestamp: int


# ---------------------------------------------------------------- messages

@dataclass
class ViewMessageRequestHeader(Header):
    offset: int
    topic: str | None = None


@dataclass
class QueryMessageRequestHeader(Header):
    topic: str
    key: str
    maxNum: int
    beginTimestamp: int
    endTimestamp: int


@dataclass
class QueryMessageResponseHeader(Header):
    indexLastUpdateTimestamp: int
    indexLastUpdatePhyoffset: int


@dataclass
class ConsumerSendMsgBackRequestHeader(Header):
    offset: int
    group: str
    delayLevel: int
    originMsgId: str | None = None
    originTopic: str | None = None
    unitMode: bool | None = None
    maxReconsumeTimes: int | None = None


# ---------------------------------------------------------------- transactions

@dataclass
class EndTransactionRequestHeader(Header):
    producerGroup: str
    tranStateTableOffset: int
    commitLogOffset: int
    commitOrRollback: int
    msgId: str
    fromTransactionCheck: bool | None = None
    transactionId: str | None = None
    topic: str | None = None


@dataclass
class RecallMessageRequestHeader(Header):
    """RECALL_MESSAGE 370 (RocketMQ 5.3+): the topic and the handle a timer message's send answered."""
    topic: str
    recallHandle: str
    producerGroup: str | None = None
    brokerName: str | None = None


@dataclass
class CheckTransactionStateRequestHeader(Header):
    tranStateTableOffset: int
    commitLogOffset: int
    msgId: str | None = None
    transactionId: str | None = None
    offsetMsgId: str | None = None
    topic: str | None = None
    bname: str | None = None


# ---------------------------------------------------------------- clients and admin

@dataclass
class UnregisterClientRequestHeader(Header):
    clientID: str
    producerGroup: str | None = None
    consumerGroup: str | None = None


@dataclass
class GetConsumerListByGroupRequestHeader(Header):
    consumerGroup: str


@dataclass
class NotifyConsumerIdsChangedRequestHeader(Header):
    consumerGroup: str


@dataclass
class CreateTopicRequestHeader(Header):
    topic: str
    defaultTopic: str
    readQueueNums: int
    writeQueueNums: int
    perm: int
    topicFilterType: str
    topicSysFlag: int | None = None
    order: bool = False
    attributes: str | None = None


@dataclass
class GetTopicStatsInfoRequestHeader(Header):
    topic: str


@dataclass
class GetTopicConfigRequestHeader(Header):
    topic: str
    lo: bool | None = None


@dataclass
class QueryTopicConsumeByWhoRequestHeader(Header):
    topic: str


@dataclass
class GetConsumeStatsRequestHeader(Header):
    consumerGroup: str
    topic: str | None = None


@dataclass
class GetConsumerConnectionListRequestHeader(Header):
    consumerGroup: str


@dataclass
class GetConsumerRunningInfoRequestHeader(Header):
    consumerGroup: str
    clientId: str
    jstackEnable: bool | None = None


def header_fields(cls: type[Header]) -> list[str]:
    """Field names of a header class, for docs and tests."""
    return [f.name for f in dataclasses.fields(cls)]

