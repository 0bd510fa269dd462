"""POP consumption (RocketMQ 5.x): the broker hands out messages, each invisible until acked.

In-process API, for the remoting handlers here and for the gRPC front (`broker.pop`, a
`PopService`, on every `BrokerController`). All coroutines, on the broker's event loop; a refused
request raises `PopError(code, remark)` with Java's response code and remark::

    r = await broker.pop.pop(group, topic, queue_id=-1, max_nums=32, invisible_time=60_000,
                             poll_time=20_000, expression="*", expression_type="TAG", order=False)
    # r.code: ResponseCode.SUCCESS (r.found), POLLING_TIMEOUT or POLLING_FULL
    # r.messages: [PoppedMessage(raw=record bytes as served, topic=topic read from (a retry
    #              topic for a redelivery), queue_id, queue_offset, extra_info=receipt handle)]
    # r.pop_time, r.invisible_time, r.revive_qid, r.rest_num, r.header(), r.body()
    await broker.pop.ack(group, topic, extra_info)              # topic: the subscribed one
    c = await broker.pop.change_invisible_time(group, topic, extra_info, invisible_time_ms)
    # c.extra_info is the new receipt handle; c.pop_time, c.invisible_time, c.revive_qid
    await broker.pop.batch_ack([BatchAck(...)])
    has_msg, polling_full = await broker.pop.notification(group, topic, queue_id=-1, poll_time=ms)

`ack_message` / `change_invisible_time_message` take the ACK_MESSAGE / CHANGE_MESSAGE_INVISIBLETIME
header fields as they are (real topic, queue id, offset). Records decoded from `raw` with
`rmqtool.layouts.message.decode_record`; `reconsume_times` counts redeliveries, property
`1ST_POP_TIME` holds the first pop's time. `rmqtool.layouts.pop.parse_extra_info` reads a handle.

Modules: popper (queue reads, checkpoints, offsets), records (ck/ack records as Java writes
them), revive (PopReviveService), buffer (PopBufferMergeService, enablePopBufferMerge), service
(pops, notifications), acks (acks, invisible time), results (answers, refusals), processor;
the orderly-pop state is rmqtool.store.orderinfo (ConsumerOrderInfoManager,
config/consumerOrderInfo.json).
"""

from __future__ import annotations

from rmqtool.layouts.pop import BatchAck, ExtraInfo, parse_extra_info

from .popper import PoppedMessage
from .processor import PopProcessor
from .service import ChangeInvisibleResult, PopError, PopResult, PopService

__all__ = ["BatchAck", "ChangeInvisibleResult", "ExtraInfo", "PopError", "PopProcessor", "PopResult",
           "PopService", "PoppedMessage", "parse_extra_info"]
