"""PopReviveService: expired, unacknowledged checkpoints become retry messages again.

One per revive queue, as Java's `PopReviveService`. Checkpoints and acks reach the revive queue
through the timer (a checkpoint 1 s before its revive time, an ack at it), so reading the queue
in order meets every ack of a checkpoint after the checkpoint itself. A round reads from the
revive offset (consumer offset of CID_RMQ_SYS_REVIVE_GROUP on the revive topic, in
consumerOffset.json) to the end, matches acks to checkpoints by Java's merge key, and revives a
checkpoint only once the queue has shown it records delivered more than 2 s past its revive
time (or, at the end of the queue, once the timer is not behind and the last record is 3 s
old): by then every ack of it is in. Each unacked message is written to the pop retry topic with
reconsumeTimes + 1 and 1ST_POP_TIME (`reviveRetry`); then the revive offset moves to the last
checkpoint done. After a crash the round starts again from the committed revive offset, so an
acknowledged message is never revived and an unacknowledged one at least once.
"""

from __future__ import annotations

import logging
from typing import Any

from rmqtool.layouts import properties as P
from rmqtool.layouts.message import MessageExt
from rmqtool.layouts.pop import (
    ACK_TAG,
    ACK_TIME_INTERVAL,
    BATCH_ACK_TAG,
    CK_TAG,
    FIRST_POP_TIME,
    RETRY_GROUP_TOPIC_PREFIX,
    RETRY_QUEUE_NUM,
    REVIVE_GROUP,
    AckMsg,
    PopCheckPoint,
    parse_normal_topic,
    pop_retry_topic,
)

from .records import FRESH_MAP_CAPACITY, ck_message

log = logging.getLogger("rmqtool.broker.pop")
SECOND = 1000
CK_REWRITE_INTERVALS_S = (10, 20, 30, 60, 120, 180, 240, 300, 360, 420, 480, 540, 600, 1200, 1800, 3600, 7200)
READ_BATCH = 32


def deliver_time(msg: MessageExt) -> int:
    """`Message.getDeliverTimeMs`: TIMER_DELIVER_MS, 0 without it."""
    try:
        return int(msg.properties.get(P.TIMER_DELIVER_MS, 0))
    except ValueError:
        return 0


def parse_revive_record(msg: MessageExt) -> PopCheckPoint | AckMsg | None:
    """The checkpoint or ack a revive-log record holds; None for another tag; ValueError if unreadable."""
    tag = msg.properties.get(P.TAGS)
    if tag == CK_TAG:
        return PopCheckPoint.from_json(msg.body)
    if tag == ACK_TAG:
        return AckMsg.from_json(msg.body)
    if tag == BATCH_ACK_TAG:
        return AckMsg.from_json(msg.body, batch=True)
    return None


class PopReviveService:
    """The revive work of one revive queue."""

    def __init__(self, service: Any, queue_id: int) -> None:
        self.service = service
        self.local = service.local
        self.store = service.local.store
        self.queue_id = queue_id
        self.topic = service.revive_topic

    @property
    def revive_offset(self) -> int:
        return self.local.offsets.query_offset(REVIVE_GROUP, self.topic, self.queue_id)

    def _timer_behind(self) -> bool:
        """Whether the timer still owes deliveries that are due (`getDequeueBehind` / `getEnqueueBehind` > 0)."""
        now = self.service.now()
        for svc in getattr(self.local, "services", []):
            if hasattr(svc, "curr_read_time_ms") and hasattr(svc, "curr_queue_offset"):
                if now - svc.curr_read_time_ms >= SECOND + svc.precision_ms:
                    return True
                from rmqtool.layouts.constants import TIMER_TOPIC

                if svc.curr_queue_offset < self.store.get_max_offset_in_queue(TIMER_TOPIC, 0):
                    return True
        return False

    def consume(self) -> tuple[dict[str, PopCheckPoint], int, int]:
        """`consumeReviveMessage`: checkpoints by merge key with their acks applied, the end time, the old offset."""
        old = self.revive_offset
        cks: dict[str, PopCheckPoint] = {}
        end_time = 0
        first_rt = 0
        default_bn = self.service.broker_name
        offset = old + 1
        while True:
            res = self.store.get_message(self.topic, self.queue_id, offset, READ_BATCH)
            msgs = list(res.messages)
            if not msgs:
                break
            offset = res.next_begin_offset
            # to the end of the queue, as Java does: an ack stored after its checkpoint came due
            # is not parked on the timer, so it can follow records that are due later
            end_time, first_rt = self._apply(msgs, cks, end_time, first_rt, default_bn)
        if end_time and self.service.now() - end_time > 3 * SECOND and not self._timer_behind():
            end_time = self.service.now()
        return cks, end_time, old

    def _apply(self, msgs: list[MessageExt], cks: dict[str, PopCheckPoint], end_time: int, first_rt: int,
               default_bn: str) -> tuple[int, int]:
        """Checkpoints into `cks`, acks onto their checkpoints; the new end time and first revive time."""
        for m in msgs:
            try:
                rec = parse_revive_record(m)
            except ValueError as e:
                log.warning("revive queue %d offset %d: unreadable record: %s", self.queue_id, m.queue_offset, e)
                rec = None
            if isinstance(rec, PopCheckPoint):
                if rec.topic is not None and rec.cid is not None:
                    rec.revive_offset = m.queue_offset
                    cks[rec.merge_key()] = rec
                    first_rt = first_rt or rec.revive_time
            elif isinstance(rec, AckMsg):
                ck = cks.get(rec.merge_key(default_bn))
                if ck is not None:
                    for off in rec.acked_offsets():
                        i = ck.index_of_ack(off)
                        if i > -1:
                            ck.bit_map |= 1 << i
            end_time = max(end_time, deliver_time(m))
        return end_time, first_rt

    def run_once(self) -> int:
        """`consumeReviveMessage` + `mergeAndRevive`; returns the messages revived."""
        cks, end_time, old = self.consume()
        new_offset = old
        revived = 0
        for ck in sorted(cks.values(), key=lambda c: c.revive_offset):
            if end_time - ck.revive_time <= ACK_TIME_INTERVAL + SECOND:
                break
            normal = parse_normal_topic(ck.topic, ck.cid)
            if self.local.topics.select(normal) is None or self._group(ck.cid) is None:
                log.warning("revive queue %d: no topic %s or group %s any more, checkpoint dropped",
                            self.queue_id, normal, ck.cid)
                new_offset = ck.revive_offset
                continue
            revived += self.revive_check_point(ck)
            new_offset = ck.revive_offset
        if new_offset > old:
            self.local.offsets.commit_offset(REVIVE_GROUP, self.topic, self.queue_id, new_offset)
        return revived

    def _group(self, group: str) -> Any:
        """`findSubscriptionGroupConfig` (which creates the group when autoCreateSubscriptionGroup allows)."""
        try:
            return self.local.subscriptions.find(group)
        except Exception:  # noqa: BLE001 - a name no group can have
            return None

    def revive_check_point(self, ck: PopCheckPoint) -> int:
        """`reviveMsgFromCk`: every unacked message of `ck` back onto the retry topic."""
        n = 0
        for i in range(ck.num):
            if ck.acked(i):
                continue
            offset = ck.ack_offset_by_index(i)
            res = self.store.get_message(ck.topic, ck.queue_id, offset, 1)
            msgs = [m for m in res.messages if m.queue_offset == offset]
            if not msgs:
                if offset < self.store.get_min_offset_in_queue(ck.topic, ck.queue_id):
                    continue  # the message is gone from the store: nothing to revive (Java does not retry)
                self.re_put_ck(ck, offset)
                continue
            if self.revive_retry(ck, msgs[0]):
                n += 1
            else:
                self.re_put_ck(ck, offset)
        return n

    def revive_retry(self, ck: PopCheckPoint, msg: MessageExt) -> bool:
        """`reviveRetry`: the message again, on %RETRY%group_topic (queue 0), one reconsume more."""
        svc = self.service
        topic = ck.topic if ck.topic.startswith(RETRY_GROUP_TOPIC_PREFIX) else \
            pop_retry_topic(ck.topic, ck.cid, svc.retry_v2)
        props: dict[str, str] = {}
        tags = msg.properties.get(P.TAGS)
        if tags is not None:
            props[P.TAGS] = tags
        props.update(msg.properties)
        if msg.reconsume_times == 0 or props.get(FIRST_POP_TIME) is None:
            props[FIRST_POP_TIME] = str(ck.pop_time)
        inner = MessageExt(topic=topic, body=msg.body, queue_id=0, flag=msg.flag,
                           properties=P.broker_order(props, FRESH_MAP_CAPACITY, owned=True), sys_flag=msg.sys_flag,
                           born_timestamp=msg.born_timestamp, born_host=self.local.store_host,
                           store_host=self.local.store_host, reconsume_times=msg.reconsume_times + 1)
        self._retry_topic_if_absent(topic, ck.cid)
        try:
            put = self.store.put_message(inner)
        except Exception as e:  # noqa: BLE001 - Java logs and re-puts the checkpoint
            log.error("revive queue %d: revive of %s failed: %s", self.queue_id, ck, e)
            return False
        return str(getattr(put.status, "name", put.status)) == "PUT_OK"

    def _retry_topic_if_absent(self, topic: str, group: str) -> None:
        """`addRetryTopicIfNotExist`: one queue, perm 6; the group starts reading it from 0."""
        topics = self.local.topics
        if topics.select(topic) is not None:
            return
        from rmqtool.store.topics import TopicConfig

        topics.update(TopicConfig(topic, RETRY_QUEUE_NUM, RETRY_QUEUE_NUM, 6))
        if self.local.offsets.query_offset(group, topic, 0) < 0:
            self.local.offsets.commit_offset(group, topic, 0, 0)
        register = getattr(self.service.controller, "register_broker_all", None)
        if register is not None:
            register()

    def re_put_ck(self, old: PopCheckPoint, offset: int) -> None:
        """`rePutCK`: a one-message checkpoint for a message that could not be revived now, due later."""
        times = old.parse_re_put_times()
        ck = PopCheckPoint(start_offset=offset, pop_time=old.pop_time, invisible_time=old.invisible_time, num=1,
                           queue_id=old.queue_id, topic=old.topic, cid=old.cid, broker_name=old.broker_name,
                           re_put_times=str(times + 1))
        ck.add_diff(0)
        if old.revive_time <= self.service.now():
            idx = min(times, len(CK_REWRITE_INTERVALS_S) - 1)
            ck.invisible_time = old.invisible_time + CK_REWRITE_INTERVALS_S[idx] * SECOND
        self.store.put_message(ck_message(self.local, self.topic, ck, self.queue_id, self.service.now()))
