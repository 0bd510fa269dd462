"""What a client hands over and gets back: `Message`, `MessageQueue`, `SendResult`, `PullResult`.

Received messages are `rmqtool.layouts.message.MessageExt`, the same type the store and the
inspectors use, so `consume` prints the same JSON as `inspect`.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from rmqtool.layouts import properties as P
from rmqtool.layouts.message import MessageExt


class MessageQueue(NamedTuple):
    """`MessageQueue`: sorts by (topic, brokerName, queueId) as `RebalanceImpl` sorts `mqAll`."""

    topic: str
    broker_name: str
    queue_id: int

    def __str__(self) -> str:  # MessageQueue.toString(): the key ConsistentHash hashes
        return f"MessageQueue [topic={self.topic}, brokerName={self.broker_name}, queueId={self.queue_id}]"


@dataclass(slots=True)
class Message:
    """A message to send (`org.apache.rocketmq.common.message.Message`).

    `tags`, `keys` and `delay_level` are stored as the TAGS, KEYS and DELAY properties, as in Java;
    `keys` may be a list (joined by spaces, the KEYS separator).
    """

    topic: str
    body: bytes = b""
    tags: str | None = None
    keys: str | Iterable[str] | None = None
    properties: dict[str, str] = field(default_factory=dict)
    flag: int = 0
    delay_level: int = 0
    transaction_id: str | None = None

    def __post_init__(self) -> None:
        if isinstance(self.body, str):
            self.body = self.body.encode("utf-8")
        self.properties = dict(self.properties)
        if self.tags:
            self.properties[P.TAGS] = self.tags
        if self.keys:
            keys = self.keys if isinstance(self.keys, str) else " ".join(self.keys)
            self.properties[P.KEYS] = keys
        if self.delay_level:
            self.properties[P.DELAY] = str(self.delay_level)
        self.properties.setdefault(P.WAIT, "true")  # Java's Message constructors: waitStoreMsgOK = true

    def put_user_property(self, name: str, value: str) -> None:
        self.properties[name] = value

    @property
    def uniq_key(self) -> str | None:
        return self.properties.get(P.UNIQ_KEY)

    @classmethod
    def from_ext(cls, ext: MessageExt, topic: str | None = None) -> Message:
        """A copy of a received/stored message, ready to be sent again (replay, fallback retry)."""
        return cls(topic or ext.topic, ext.decompressed_body(), properties=dict(ext.properties), flag=ext.flag)


class SendStatus(str, enum.Enum):
    SEND_OK = "SEND_OK"
    FLUSH_DISK_TIMEOUT = "FLUSH_DISK_TIMEOUT"
    FLUSH_SLAVE_TIMEOUT = "FLUSH_SLAVE_TIMEOUT"
    SLAVE_NOT_AVAILABLE = "SLAVE_NOT_AVAILABLE"


@dataclass(slots=True)
class SendResult:
    """`SendResult`: `msg_id` is the client UNIQ_KEY (comma-joined for a batch), `offset_msg_id` the broker's."""

    status: SendStatus
    msg_id: str
    offset_msg_id: str
    message_queue: MessageQueue
    queue_offset: int
    transaction_id: str | None = None
    region_id: str | None = None

    def to_json(self) -> dict[str, Any]:
        """The fields `rmqtool send` prints (cli.md)."""
        return {
            "status": self.status.value,
            "msgId": self.msg_id,
            "offsetMsgId": self.offset_msg_id,
            "topic": self.message_queue.topic,
            "brokerName": self.message_queue.broker_name,
            "queueId": self.message_queue.queue_id,
            "queueOffset": self.queue_offset,
        }


class PullStatus(str, enum.Enum):
    FOUND = "FOUND"
    NO_NEW_MSG = "NO_NEW_MSG"
    NO_MATCHED_MSG = "NO_MATCHED_MSG"
    OFFSET_ILLEGAL = "OFFSET_ILLEGAL"


@dataclass(slots=True)
class PullResult:
    status: PullStatus
    next_begin_offset: int
    min_offset: int
    max_offset: int
    messages: list[MessageExt] = field(default_factory=list)
    suggest_which_broker_id: int = 0


class ConsumeStatus(str, enum.Enum):
    """What a listener returns. Concurrent listeners: CONSUME_SUCCESS / RECONSUME_LATER;
    orderly listeners: SUCCESS / SUSPEND_CURRENT_QUEUE_A_MOMENT (RECONSUME_LATER means the same)."""

    CONSUME_SUCCESS = "CONSUME_SUCCESS"
    RECONSUME_LATER = "RECONSUME_LATER"
    SUCCESS = "SUCCESS"
    SUSPEND_CURRENT_QUEUE_A_MOMENT = "SUSPEND_CURRENT_QUEUE_A_MOMENT"

    @property
    def ok(self) -> bool:
        return self in (ConsumeStatus.CONSUME_SUCCESS, ConsumeStatus.SUCCESS)


class LocalTransactionState(str, enum.Enum):
    COMMIT_MESSAGE = "COMMIT_MESSAGE"
    ROLLBACK_MESSAGE = "ROLLBACK_MESSAGE"
    UNKNOW = "UNKNOW"
