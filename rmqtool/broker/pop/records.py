"""Checkpoint and ack records for the revive topic, built as Java's broker builds them.

`PopMessageProcessor.buildCkMsg`, `AckMessageProcessor.appendAck` and
`ChangeInvisibleTimeProcessor.ackOrigin`: the body is the bean's fastjson JSON, the tag `ck`,
`ack` or `bAck`, the UNIQ_KEY the record's unique id, born and store host the broker's, and the
delivery time (TIMER_DELIVER_MS) revive time - 1 s for a checkpoint, popTime + invisibleTime for
an ack. The timer parks the record on rmq_sys_wheel_timer until then, exactly as Java's
HookUtils does; the properties are ordered as Java's 16-bucket HashMap of a fresh message holds them.
"""

from __future__ import annotations

from typing import Any

from rmqtool.layouts import properties as P
from rmqtool.layouts.message import MessageExt
from rmqtool.layouts.pop import ACK_TIME_INTERVAL, CK_TAG, AckMsg, PopCheckPoint
from rmqtool.store.timer.hooks import check_if_timer_message, snap_precision, transform_timer_message

FRESH_MAP_CAPACITY = 16  # new HashMap<>() in Message.putProperty


def _revive_record(local: Any, revive_topic: str, revive_qid: int, body: bytes, tag: str, uniq: str,
                   deliver_ms: int, now_ms: int) -> MessageExt:
    props = P.broker_order({P.TAGS: tag, P.TIMER_DELIVER_MS: str(deliver_ms), P.UNIQ_KEY: uniq}, FRESH_MAP_CAPACITY)
    msg = MessageExt(topic=revive_topic, body=body, queue_id=revive_qid, properties=props, born_timestamp=now_ms,
                     born_host=local.store_host, store_host=local.store_host)
    cfg = local.config
    if getattr(cfg, "timer_wheel_enable", True) and check_if_timer_message(msg):
        transform_timer_message(msg, now_ms, snap_precision(int(getattr(cfg, "timer_precision_ms", 1000))),
                                int(getattr(cfg, "timer_max_delay_sec", 259_200)))
        msg.properties = P.broker_order(msg.properties, FRESH_MAP_CAPACITY)
    return msg


def ck_message(local: Any, revive_topic: str, ck: PopCheckPoint, revive_qid: int, now_ms: int) -> MessageExt:
    """`buildCkMsg`: due one second before the checkpoint's revive time."""
    return _revive_record(local, revive_topic, revive_qid, ck.to_json(), CK_TAG, ck.unique_id(),
                          ck.revive_time - ACK_TIME_INTERVAL, now_ms)


def ack_message(local: Any, revive_topic: str, ack: AckMsg, revive_qid: int, invisible_time: int,
                now_ms: int) -> MessageExt:
    """`appendAck` / `ackOrigin`: due at popTime + invisibleTime, when its checkpoint is revived."""
    return _revive_record(local, revive_topic, revive_qid, ack.to_json(), ack.tag, ack.unique_id(),
                          ack.pop_time + invisible_time, now_ms)
