"""Headers of the POP requests (POP_MESSAGE, ACK_MESSAGE, CHANGE_MESSAGE_INVISIBLETIME, NOTIFICATION).

Field names and types are those of Apache RocketMQ 5.3.3's `PopMessageRequestHeader`,
`PopMessageResponseHeader`, `AckMessageRequestHeader`, `ChangeInvisibleTimeRequestHeader`,
`ChangeInvisibleTimeResponseHeader`, `NotificationRequestHeader` and `NotificationResponseHeader`
(remoting/protocol/header). Java encodes them with every non-null field as a string; the
`@CFNotNull` fields are required here (a missing one is a HeaderError, SYSTEM_ERROR).
"""

from __future__ import annotations

from dataclasses import dataclass

from rmqtool.remoting.headers import Header


@dataclass
class PopMessageRequestHeader(Header):
    consumerGroup: str
    topic: str
    queueId: int = -1
    maxMsgNums: int = 0
    invisibleTime: int = 0
    pollTime: int = 0
    bornTime: int = 0
    initMode: int = 0
    expType: str | None = None
    exp: str | None = None
    order: bool = False
    attemptId: str | None = None

    @property
    def queue_id(self) -> int:
        """`getQueueId()`: any negative id means "every queue" (-1)."""
        return -1 if self.queueId < 0 else self.queueId


@dataclass
class PopMessageResponseHeader(Header):
    popTime: int
    invisibleTime: int
    reviveQid: int
    restNum: int
    startOffsetInfo: str | None = None
    msgOffsetInfo: str | None = None
    orderCountInfo: str | None = None


@dataclass
class AckMessageRequestHeader(Header):
    consumerGroup: str
    topic: str
    queueId: int
    extraInfo: str
    offset: int


@dataclass
class ChangeInvisibleTimeRequestHeader(Header):
    consumerGroup: str
    topic: str
    queueId: int
    extraInfo: str
    offset: int
    invisibleTime: int


@dataclass
class ChangeInvisibleTimeResponseHeader(Header):
    popTime: int
    invisibleTime: int
    reviveQid: int


@dataclass
class NotificationRequestHeader(Header):
    consumerGroup: str
    topic: str
    queueId: int = -1
    pollTime: int = 0
    bornTime: int = 0
    order: bool = False
    attemptId: str | None = None


@dataclass
class NotificationResponseHeader(Header):
    hasMsg: bool = False
    pollingFull: bool = False
