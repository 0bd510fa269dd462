"""What POP operations answer: results, Java's refusals (`PopError`) and their remarks."""

from __future__ import annotations

from dataclasses import dataclass, field

from rmqtool.layouts.pop import ExtraInfoError
from rmqtool.remoting.codes import ResponseCode

from .popper import PoppedMessage

FAQ_APPLY_TOPIC = "\nSee https://rocketmq.apache.org/docs/bestPractice/06FAQ for further details."
NOT_SET = "not set any response code"  # the remark of Java's createResponseCommand(Class)
MAX_POP_NUMS = 32
MAX_POLLING = 100_000  # maxPopPollingSize


class PopError(Exception):
    """A POP request refused: the response code and remark Java's broker answers with."""

    def __init__(self, code: int, remark: str | None, *, exception: bool = False) -> None:
        super().__init__(remark or str(code))
        self.code = code
        self.remark = remark
        self.exception = exception  # an exception in Java's processor: answered without a custom header


def _java_error(e: ExtraInfoError | ValueError) -> PopError:
    """An exception of ExtraInfoUtil inside a processor: Java answers SYSTEM_ERROR with its
    `toString()` and first stack element."""
    kind = "java.lang.NumberFormatException" if str(e).startswith("For input string") \
        else "java.lang.IllegalArgumentException"
    where = getattr(e, "where", None)
    return PopError(ResponseCode.SYSTEM_ERROR, f"{kind}: {e}" + (f", {where}" if where else ""), exception=True)


@dataclass
class PopResult:
    """A pop's answer: SUCCESS with messages, or POLLING_TIMEOUT / POLLING_FULL without."""

    code: int
    remark: str
    pop_time: int
    invisible_time: int
    revive_qid: int
    rest_num: int
    start_offset_info: str
    msg_offset_info: str
    order_count_info: str | None
    messages: list[PoppedMessage] = field(default_factory=list)

    @property
    def found(self) -> bool:
        return self.code == ResponseCode.SUCCESS

    def header(self) -> dict[str, str]:
        """PopMessageResponseHeader as extFields."""
        ext = {"popTime": str(self.pop_time), "invisibleTime": str(self.invisible_time),
               "reviveQid": str(self.revive_qid), "restNum": str(self.rest_num),
               "startOffsetInfo": self.start_offset_info, "msgOffsetInfo": self.msg_offset_info}
        if self.order_count_info is not None:
            ext["orderCountInfo"] = self.order_count_info
        return ext

    def body(self) -> bytes:
        return b"".join(m.raw for m in self.messages)


@dataclass
class ChangeInvisibleResult:
    """ChangeInvisibleTimeResponseHeader, and the receipt handle that now stands for the message."""

    pop_time: int
    invisible_time: int
    revive_qid: int
    extra_info: str
