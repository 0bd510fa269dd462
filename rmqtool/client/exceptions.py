"""Client errors. All are `RemotingError`s (exit 3 in the CLI) except invalid input (exit 2)."""

from __future__ import annotations

from typing import TYPE_CHECKING, TypeVar

from rmqtool.errors import RemotingError

if TYPE_CHECKING:
    from rmqtool.remoting.command import RemotingCommand
    from rmqtool.remoting.headers import Header

H = TypeVar("H", bound="Header")


class ClientError(RemotingError):
    """`MQClientException`: no route, no name server, producer not started, sends exhausted."""


class BrokerError(RemotingError):
    """`MQBrokerException`: the broker answered with a response code that is not a success."""

    def __init__(self, code: int, remark: str | None, addr: str = "") -> None:
        super().__init__(f"broker {addr} answered code {code}: {remark or ''}".rstrip(": "))
        self.code = code
        self.remark = remark
        self.addr = addr


def response_header(resp: RemotingCommand, header_cls: type[H], addr: str, what: str) -> H:
    """The typed header of a success response; one the broker got wrong is a `BrokerError`, not a ValueError."""
    try:
        return header_cls.from_ext(resp.ext_fields)
    except ValueError as e:
        raise BrokerError(resp.code, f"bad {what} response header: {e}", addr) from None
