"""PULL_MESSAGE and the offset queries a consumer needs (protocol.md §4.5, §4.6, §4.7).

`PullAPIWrapper`: decode the records of a FOUND body, decompress bodies, re-check tags on the
client, and set MIN_OFFSET / MAX_OFFSET as the Java client does.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rmqtool.client.exceptions import BrokerError, ClientError, response_header
from rmqtool.client.message import MessageQueue, PullResult, PullStatus
from rmqtool.client.subscription import SubscriptionData, matches_tags
from rmqtool.layouts import properties as P
from rmqtool.layouts.constants import COMPRESSED_FLAG, COMPRESSION_TYPE_COMPARATOR
from rmqtool.layouts.message import MessageExt, RecordError, decode_record, decompress_body
from rmqtool.remoting.codes import RequestCode, ResponseCode
from rmqtool.remoting.command import RemotingCommand
from rmqtool.remoting.headers import (
    OffsetResponseHeader,
    PullMessageRequestHeader,
    PullMessageResponseHeader,
    PullSysFlag,
    SearchOffsetRequestHeader,
    TopicQueueRequestHeader,
)

if TYPE_CHECKING:
    from rmqtool.client.instance import ClientInstance

FLAG_COMMIT_OFFSET = PullSysFlag.COMMIT_OFFSET
FLAG_SUSPEND = PullSysFlag.SUSPEND
FLAG_SUBSCRIPTION = PullSysFlag.SUBSCRIPTION
FLAG_CLASS_FILTER = PullSysFlag.CLASS_FILTER
FLAG_LITE_PULL = 0x10

_STATUS = {ResponseCode.SUCCESS: PullStatus.FOUND, ResponseCode.PULL_NOT_FOUND: PullStatus.NO_NEW_MSG,
           ResponseCode.PULL_RETRY_IMMEDIATELY: PullStatus.NO_MATCHED_MSG,
           ResponseCode.PULL_OFFSET_MOVED: PullStatus.OFFSET_ILLEGAL}


def build_sys_flag(commit_offset: bool, suspend: bool, subscription: bool, class_filter: bool = False,
                   lite_pull: bool = False) -> int:
    return ((FLAG_COMMIT_OFFSET if commit_offset else 0) | (FLAG_SUSPEND if suspend else 0)
            | (FLAG_SUBSCRIPTION if subscription else 0) | (FLAG_CLASS_FILTER if class_filter else 0)
            | (FLAG_LITE_PULL if lite_pull else 0))


def decode_messages(body: bytes) -> list[MessageExt]:
    """Records one after another; a malformed record ends the batch, as in `MessageDecoder.decodes`."""
    out = []
    pos, n = 0, len(body)
    while pos < n:
        try:
            m = decode_record(body, pos, check_crc=False)
        except (RecordError, Exception):
            break
        pos += m.total_size
        out.append(m)
    return out


def unwrap_body(m: MessageExt) -> None:
    """Decompress in place and clear the compression bits, so `MessageExt.decompressed_body()` is a no-op."""
    if m.sys_flag & COMPRESSED_FLAG:
        m.body = decompress_body(m.body, m.sys_flag)
        m.sys_flag &= ~(COMPRESSED_FLAG | COMPRESSION_TYPE_COMPARATOR)


async def pull_kernel(instance: ClientInstance, group: str, mq: MessageQueue, sub: SubscriptionData,
                      offset: int, max_nums: int, sys_flag: int, commit_offset: int, suspend_ms: int,
                      timeout: float, broker_id: int | None = None) -> PullResult:
    """`PullAPIWrapper.pullKernelImpl` + `processPullResult`: pull from the broker the previous
    response suggested for this queue (`broker_id` overrides, as connectBrokerByUser), any other
    of the group when that one is not in the route (a master gone: its slave); a pull from a
    slave never commits an offset there; the response's suggestWhichBrokerId is kept for the next."""
    node = instance.pull_from_which_node.get((group, mq), 0) if broker_id is None else broker_id
    found = instance.find_broker_address_in_subscribe(mq.broker_name, node, False)
    if found is None:
        await instance.update_route(mq.topic)
        found = instance.find_broker_address_in_subscribe(mq.broker_name, node, False)
        if found is None:
            raise ClientError(f"The broker[{mq.broker_name}] not exist")
    addr, slave = found
    if slave:
        sys_flag &= ~FLAG_COMMIT_OFFSET
    header = PullMessageRequestHeader(
        consumerGroup=group, topic=mq.topic, queueId=mq.queue_id, queueOffset=offset, maxMsgNums=max_nums,
        sysFlag=sys_flag, commitOffset=commit_offset, suspendTimeoutMillis=suspend_ms, subVersion=sub.subVersion,
        subscription=sub.subString if sys_flag & FLAG_SUBSCRIPTION else None, expressionType=sub.expressionType)
    resp = await instance.invoke(addr, RemotingCommand.request(RequestCode.PULL_MESSAGE, header.to_ext()), timeout)
    status = _STATUS.get(resp.code)
    if status is None:
        raise BrokerError(resp.code, resp.remark, addr)
    h = response_header(resp, PullMessageResponseHeader, addr, "pull")
    instance.pull_from_which_node[(group, mq)] = int(h.suggestWhichBrokerId or 0)
    result = PullResult(status, h.nextBeginOffset, h.minOffset, h.maxOffset,
                        suggest_which_broker_id=h.suggestWhichBrokerId)
    if status == PullStatus.FOUND:
        msgs = []
        for m in decode_messages(resp.body):
            if not matches_tags(sub, m.tags):
                continue
            unwrap_body(m)
            m.properties[P.MIN_OFFSET] = str(result.min_offset)
            m.properties[P.MAX_OFFSET] = str(result.max_offset)
            msgs.append(m)
        result.messages = msgs
    return result


async def query_offset(instance: ClientInstance, code: int, mq: MessageQueue, extra: dict[str, object] | None = None,
                       field: str = "offset") -> int:
    """GET_MAX_OFFSET / GET_MIN_OFFSET / SEARCH_OFFSET_BY_TIMESTAMP to the queue's master."""
    addr = instance.master_addr(mq.broker_name)
    if addr is None:
        await instance.update_route(mq.topic)
        addr = instance.master_addr(mq.broker_name)
        if addr is None:
            raise ClientError(f"The broker[{mq.broker_name}] not exist")
    if extra and "timestamp" in extra:
        ext = SearchOffsetRequestHeader(mq.topic, mq.queue_id, int(str(extra["timestamp"]))).to_ext()
    else:
        ext = TopicQueueRequestHeader(mq.topic, mq.queue_id).to_ext()
    resp = await instance.invoke(addr, RemotingCommand.request(code, ext))
    if resp.code != ResponseCode.SUCCESS:
        raise BrokerError(resp.code, resp.remark, addr)
    if field == "offset":
        return response_header(resp, OffsetResponseHeader, addr, "offset").offset
    return int(resp.ext_fields.get(field, "0"))
