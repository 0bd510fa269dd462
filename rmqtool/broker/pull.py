"""PULL_MESSAGE (11) with tag / SQL92 filtering and long polling (protocol.md §4.5, §7.6).

`PullMessageProcessor` of the Java broker: checks (group, topic, queue, subscription), one store
read, the GetMessageStatus -> response code table, and, when nothing new is there and the client
allows suspending, a hold until a message arrives on the queue or the hold time ends. The hold
ends before the client's own timeout: at most suspendTimeoutMillis (minus a margin), never
beyond 25 s. Filtered-out messages are skipped over by nextBeginOffset.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from rmqtool.broker.durable import Later
from rmqtool.broker.sql92 import SelectorError, compile_selector
from rmqtool.layouts.message import MessageExt
from rmqtool.remoting.bodies import SubscriptionData
from rmqtool.remoting.codes import ResponseCode
from rmqtool.remoting.command import RESPONSE_FLAG, RemotingCommand
from rmqtool.remoting.headers import PullMessageRequestHeader, PullSysFlag
from rmqtool.remoting.transport import Connection

PERM_READ = 4
MAX_TRANSFER_BYTES = 256 * 1024  # maxTransferBytesOnMessageInMemory
MAX_TRANSFER_COUNT = 32
MAX_HOLD_MS = 25_000

# GetMessageStatus -> (code, offset-moved when the requested offset is not 0)
_STATUS = {
    "FOUND": ResponseCode.SUCCESS,
    "NO_MATCHED_MESSAGE": ResponseCode.PULL_RETRY_IMMEDIATELY,
    "MESSAGE_WAS_REMOVING": ResponseCode.PULL_RETRY_IMMEDIATELY,
    "OFFSET_FOUND_NULL": ResponseCode.PULL_NOT_FOUND,
    "OFFSET_OVERFLOW_ONE": ResponseCode.PULL_NOT_FOUND,
    "OFFSET_OVERFLOW_BADLY": ResponseCode.PULL_OFFSET_MOVED,
    "OFFSET_TOO_SMALL": ResponseCode.PULL_OFFSET_MOVED,
}


def hold_ms(suspend_ms: int) -> int:
    """How long to hold a pull: answered before the client's timeout (= suspend time for some)."""
    if suspend_ms <= 0:
        return 0
    margin = min(500, suspend_ms // 10)
    return max(0, min(suspend_ms, MAX_HOLD_MS) - margin)


class PullProcessor:
    def process_pull(self: Any, cmd: RemotingCommand, conn: Connection) -> Any:
        """A pull: the response now when the first read answers it, else an awaitable of it
        (store calls on the pool, or a long-polling hold)."""
        h = PullMessageRequestHeader.from_ext(cmd.ext_fields)
        group_cfg = self.group_config(h.consumerGroup)
        if group_cfg is None:
            return cmd.response(ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST,
                                remark=f"subscription group [{h.consumerGroup}] does not exist")
        if not group_cfg.consume_enable:
            return cmd.response(ResponseCode.NO_PERMISSION,
                                remark=f"subscription group no permission, {h.consumerGroup}")
        tc = self.local.topics.select(h.topic)
        if tc is None:
            return cmd.response(ResponseCode.TOPIC_NOT_EXIST,
                                remark=f"topic[{h.topic}] not exist, apply first please!")
        if not tc.perm & PERM_READ:
            return cmd.response(ResponseCode.NO_PERMISSION, remark=f"the topic[{h.topic}] pulling message is forbidden")
        if h.queueId < 0 or h.queueId >= tc.read_queue_nums:
            return cmd.response(ResponseCode.SYSTEM_ERROR,
                                remark=f"queueId[{h.queueId}] is illegal, topic:[{h.topic}] "
                                       f"topicConfig.readQueueNums:[{tc.read_queue_nums}] consumer:[{conn.peer}]")
        if h.sysFlag & PullSysFlag.SUBSCRIPTION:
            sub = SubscriptionData.build(h.topic, h.subscription, h.expressionType, h.subVersion)
        else:
            sub = self.clients.find_subscription(h.consumerGroup, h.topic)
            if sub is None:
                return cmd.response(ResponseCode.SUBSCRIPTION_NOT_EXIST,
                                    remark="the consumer's subscription not exist")
            if sub.subVersion < h.subVersion:
                return cmd.response(ResponseCode.SUBSCRIPTION_NOT_LATEST,
                                    remark="the consumer's subscription not latest")
        try:
            match = self._message_filter(sub)
        except SelectorError as e:
            return cmd.response(ResponseCode.SUBSCRIPTION_PARSE_FAILED, remark=f"parse the consumer's subscription "
                                f"failed: {e}")
        except PermissionError as e:
            return cmd.response(ResponseCode.SYSTEM_ERROR, remark=str(e))
        reset = self.take_reset_offset(h.consumerGroup, h.topic, h.queueId)
        if reset is not None:  # an operator's resetOffsetByTime: the consumer moves there (OFFSET_RESET)
            return self.offset_reset_response(cmd, h, reset)
        if h.sysFlag & PullSysFlag.COMMIT_OFFSET and h.commitOffset >= 0:
            self.local.offsets.commit_offset(h.consumerGroup, h.topic, h.queueId, h.commitOffset)
        max_msgs = max(1, min(h.maxMsgNums, MAX_TRANSFER_COUNT * 32))
        codes, flt = match

        def first(resp: RemotingCommand) -> Any:
            if resp.code != ResponseCode.PULL_NOT_FOUND or not h.sysFlag & PullSysFlag.SUSPEND:
                return resp
            return Later(self._hold_pull, cmd, h, max_msgs, codes, flt, resp)

        return self._pull_once(cmd, h, max_msgs, codes, flt, first)

    async def _hold_pull(self: Any, cmd: RemotingCommand, h: PullMessageRequestHeader, max_msgs: int,
                         codes: set[int] | None, flt: Callable[[MessageExt], bool] | None,
                         resp: RemotingCommand) -> RemotingCommand:
        """Long polling: hold until a message arrives on this queue or the hold time ends."""
        hold = self.hold
        loop = asyncio.get_running_loop()
        wait_ms = hold_ms(h.suspendTimeoutMillis) if self.long_polling_enable else self.short_polling_ms
        deadline = loop.time() + wait_ms / 1000
        store = self.store

        async def pull_again() -> RemotingCommand:
            r = self._pull_once(cmd, h, max_msgs, codes, flt)
            return r if isinstance(r, RemotingCommand) else await r

        while True:
            remaining = deadline - loop.time()
            if remaining <= 0:
                return resp
            woke = await hold.wait(h.topic, h.queueId, remaining,
                                   lambda: store.get_max_offset_in_queue(h.topic, h.queueId) > h.queueOffset)
            if not woke:
                # the hold ended: one last look, then answer what it gives (usually PULL_NOT_FOUND)
                return await pull_again()
            resp = await pull_again()
            if resp.code != ResponseCode.PULL_NOT_FOUND:
                return resp

    def _message_filter(self: Any, sub: SubscriptionData) -> tuple[set[int] | None,
                                                                   Callable[[MessageExt], bool] | None]:
        """(tag hash codes, property filter) for the store read; codes are recomputed from the tags."""
        etype = (sub.expressionType or "TAG").upper()
        if etype == "SQL92":
            if not self.enable_property_filter:
                raise PermissionError("The broker does not support consumer to filter message by SQL92")
            sel = compile_selector(sub.subString)
            return None, lambda m: sel(m.properties)
        if etype != "TAG":
            raise SelectorError(f"unknown expression type {etype}")
        if sub.is_all:
            return None, None
        from rmqtool.layouts.javahash import java_string_hash

        return {java_string_hash(t) for t in sub.tagsSet}, None

    def _pull_once(self: Any, cmd: RemotingCommand, h: PullMessageRequestHeader, max_msgs: int,
                   codes: set[int] | None, flt: Callable[[MessageExt], bool] | None,
                   then: Callable[[RemotingCommand], Any] | None = None) -> Any:
        """One store read and its response (then `then(response)`); synchronous when store
        calls run inline, else an awaitable."""
        store = self.store
        # raw path: the body is the stored bytes; records are decoded only for a SQL92 filter
        kw: dict[str, Any] = {"max_bytes": MAX_TRANSFER_BYTES, "decode": False}
        if codes is not None:
            kw["tags_codes"] = codes
        if flt is not None:
            kw["filter"] = flt

        def read() -> Any:
            return store.get_message(h.topic, h.queueId, h.queueOffset, max_msgs, **kw)

        def done(result: Any) -> Any:
            resp = self._pull_response(cmd, h, result)
            return resp if then is None else then(resp)

        return self.call_store(read, (), done, read=True)

    def _pull_response(self: Any, cmd: RemotingCommand, h: PullMessageRequestHeader, result: Any) -> RemotingCommand:
        status = str(getattr(result.status, "name", result.status))
        code = _STATUS.get(status)
        if status in ("NO_MESSAGE_IN_QUEUE", "NO_MATCHED_LOGIC_QUEUE"):
            code = ResponseCode.PULL_NOT_FOUND if h.queueOffset == 0 else ResponseCode.PULL_OFFSET_MOVED
        elif code is None:
            code = ResponseCode.PULL_RETRY_IMMEDIATELY
        body = b""
        self.stats["get_found" if code == ResponseCode.SUCCESS else "get_miss"] += 1
        if code == ResponseCode.SUCCESS:
            raw = getattr(result, "raw", None)
            body = b"".join(raw) if raw else b""
            if not body:  # never answer FOUND without a record (Java clients NPE)
                code = ResponseCode.PULL_RETRY_IMMEDIATELY
            else:
                self.stats["get"] += len(raw)
                self.count_get(h.topic, h.consumerGroup, len(raw))
        suggest = 0
        cluster = self.cluster
        if cluster.slave_read_enable or cluster.is_slave:
            suggest, code = self._suggest_which_broker_id(h, result, code)
        # PullMessageResponseHeader(suggest, next, min, max).to_ext(), built directly
        ext = {"suggestWhichBrokerId": str(suggest), "nextBeginOffset": str(result.next_begin_offset),
               "minOffset": str(result.min_offset), "maxOffset": str(result.max_offset)}
        return RemotingCommand(code, ext, body, cmd.opaque, RESPONSE_FLAG)

    def _suggest_which_broker_id(self: Any, h: PullMessageRequestHeader, result: Any, code: int) -> tuple[int, int]:
        """PullMessageProcessor: with slaveReadEnable, the group's whichBrokerWhenConsumeSlowly when
        the data pulled is no longer in memory, else its brokerId; without, the master. A slave
        whose reader is not lagging sends it back to the master, and a pull it found nothing for
        becomes PULL_RETRY_IMMEDIATELY so the client asks the master at once."""
        cluster = self.cluster
        slow = cluster.suggest_pulling_from_slave(getattr(result, "fall_behind", None))
        suggest = 0
        if cluster.slave_read_enable:
            group = self.local.subscriptions.find(h.consumerGroup, persist=False)
            if group is not None:
                suggest = group.which_broker_when_consume_slowly if slow else group.broker_id
        if cluster.is_slave and not slow:  # minBrokerIdInGroup is the master's 0 (no acting master here)
            suggest = 0
            if code != ResponseCode.SUCCESS:
                code = ResponseCode.PULL_RETRY_IMMEDIATELY
        return suggest, code
