"""gRPC statuses as Apache's proxy builds them (`ResponseBuilder`, `GrpcProxyException`).

Every RPC answers with an `apache.rocketmq.v2.Status` inside its response message; the gRPC
call itself ends OK. A remoting response code from the broker maps as `ResponseBuilder.buildCode`
maps it (few codes have their own gRPC code; the rest are INTERNAL_SERVER_ERROR with the
broker's remark), TOPIC_NOT_EXIST becoming TOPIC_NOT_FOUND as `TopicRouteHelper` decides.
"""

from __future__ import annotations

from typing import Any

from rmqtool.proxy.pb import definition as d
from rmqtool.remoting.codes import ResponseCode

Code = d.Code

# ResponseBuilder.RESPONSE_CODE_MAPPING
_REMOTING_TO_CODE: dict[int, int] = {
    ResponseCode.SUCCESS: Code.OK,
    ResponseCode.SYSTEM_BUSY: Code.TOO_MANY_REQUESTS,
    ResponseCode.REQUEST_CODE_NOT_SUPPORTED: Code.NOT_IMPLEMENTED,
    ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST: Code.CONSUMER_GROUP_NOT_FOUND,
}


class ProxyError(Exception):
    """`GrpcProxyException`: a gRPC code and the message the proxy gives with it."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def proxy_exception(code: int, message: str) -> ProxyError:
    """A `ProxyException` of the processors: wrapped into a GrpcProxyException, whose message is
    the wrapped exception's `toString()`, class name first, as the proxy's statuses show it."""
    return ProxyError(code, f"org.apache.rocketmq.proxy.common.ProxyException: {message}")


def status(code: int, message: str | None = None) -> Any:
    """`ResponseBuilder.buildStatus(Code, String)`: the message defaults to the code's name."""
    return d.Status(code=code, message=message if message is not None else Code.Name(code))


def ok() -> Any:
    return status(Code.OK, "OK")


def code_of_remoting(response_code: int) -> int:
    """`ResponseBuilder.buildCode` plus `TopicRouteHelper.isTopicNotExistError`."""
    if response_code == ResponseCode.TOPIC_NOT_EXIST:
        return Code.TOPIC_NOT_FOUND
    return _REMOTING_TO_CODE.get(response_code, Code.INTERNAL_SERVER_ERROR)


def code_of_remoting_plain(response_code: int) -> int:
    """`ResponseBuilder.buildStatus(int, String)`: buildCode only (no topic-not-exist special)."""
    return _REMOTING_TO_CODE.get(response_code, Code.INTERNAL_SERVER_ERROR)


def remoting_error(response_code: int, remark: str | None) -> ProxyError:
    """What a failed broker answer becomes (`MQBrokerException` through `buildStatus`)."""
    return ProxyError(code_of_remoting(response_code), remark if remark is not None else str(response_code))
