"""Client errors. All are `RemotingError`s (exit 3 in the CLI) except invalid input (exit 2)."""

from __future__ import annotations

from rmqtool.errors import RemotingError


class ClientError(RemotingError):
    """`MQClientException`: no route, no name server, producer not started, sends exhausted."""


class BrokerError(RemotingError):
    """`MQBrokerException`: the broker answered with a response code that is not a success."""

    def __init__(self, code: int, remark: str | None, addr: str = "") -> None:
        super().__init__(f"broker {addr} answered code {code}: {remark or ''}".rstrip(": "))
        self.code = code
        self.remark = remark
        self.addr = addr
