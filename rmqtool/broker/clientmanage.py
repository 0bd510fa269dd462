"""Client requests: HEART_BEAT 34, UNREGISTER_CLIENT 35, GET_CONSUMER_LIST_BY_GROUP 38,
QUERY/UPDATE_CONSUMER_OFFSET 14/15, LOCK/UNLOCK_BATCH_MQ 41/42, CHECK_CLIENT_CONFIG 46, and the
broker -> client NOTIFY_CONSUMER_IDS_CHANGED 40 (protocol.md §4.2-§4.4, §4.6, §4.11, §4.12).

`ClientManageProcessor` + `ConsumerManageProcessor` of the Java broker. The heartbeat answer
carries the broker's version (409): SQL92 consumers refuse brokers older than 4.1.
"""

from __future__ import annotations

import logging
from typing import Any

from rmqtool.broker.clients import ClientChannelInfo
from rmqtool.broker.sql92 import SelectorError, compile_selector
from rmqtool.errors import InvalidInput
from rmqtool.layouts.constants import RETRY_GROUP_TOPIC_PREFIX
from rmqtool.remoting import fastjson
from rmqtool.remoting.bodies import (
    CheckClientRequestBody,
    ConsumerListBody,
    HeartbeatData,
    LockBatchRequestBody,
    LockBatchResponseBody,
)
from rmqtool.remoting.codes import ResponseCode
from rmqtool.remoting.command import RemotingCommand
from rmqtool.remoting.headers import (
    GetConsumerListByGroupRequestHeader,
    OffsetResponseHeader,
    QueryConsumerOffsetRequestHeader,
    UnregisterClientRequestHeader,
    UpdateConsumerOffsetRequestHeader,
)
from rmqtool.remoting.transport import Connection

log = logging.getLogger("rmqtool.broker")
PERM_READ, PERM_WRITE = 4, 2


def _bad_body(cmd: RemotingCommand, what: str, e: Exception) -> RemotingCommand:
    return cmd.response(ResponseCode.SYSTEM_ERROR, remark=f"cannot decode the {what} body: {e}")


class ClientManageProcessor:
    def group_config(self: Any, group: str) -> Any:
        """`SubscriptionGroupManager.findSubscriptionGroupConfig`: the group's config, auto-created
        when allowed, None for a name Java never creates (illegal characters, too long), where the
        store's `find` raises: a pull, send-back or commit then gets SUBSCRIPTION_GROUP_NOT_EXIST."""
        try:
            return self.local.subscriptions.find(group)
        except InvalidInput:
            return None

    async def process_heartbeat(self: Any, cmd: RemotingCommand, conn: Connection) -> RemotingCommand:
        try:
            hb = HeartbeatData.decode(cmd.body)
        except (ValueError, TypeError, AttributeError) as e:
            return _bad_body(cmd, "heartbeat", e)
        now = self.clock()
        info = ClientChannelInfo(conn, hb.clientID, cmd.language, cmd.version, now)
        conn.attrs["client_id"] = hb.clientID
        created = False
        for cd in hb.consumerDataSet:
            if not cd.groupName:
                continue
            cfg = self.group_config(cd.groupName)
            if cfg is not None and cd.messageModel != "BROADCASTING":
                retry = RETRY_GROUP_TOPIC_PREFIX + cd.groupName
                if self.local.topics.select(retry) is None:
                    self.local.topics.create_in_send_back(retry, max(1, cfg.retry_queue_nums), PERM_READ | PERM_WRITE)
                    created = True
            changed = self.clients.register_consumer(cd.groupName, info, cd.consumeType, cd.messageModel,
                                                     cd.consumeFromWhere, cd.subscriptionDataSet)
            # ConsumerManager.registerConsumer: a broadcasting group is never told (each member reads all)
            if changed and (cfg is None or cfg.notify_consumer_ids_changed_enable) and \
                    cd.messageModel != "BROADCASTING":
                self.notify_consumer_ids_changed(cd.groupName)
        for pd in hb.producerDataSet:
            if pd.groupName:
                self.clients.register_producer(pd.groupName, info)
        if created:
            self.register_broker_all()
        return cmd.response()

    def notify_consumer_ids_changed(self: Any, group: str) -> None:
        """Oneway NOTIFY_CONSUMER_IDS_CHANGED to every channel of the group (fast rebalance),
        coalesced per group by the notifier (notify.py)."""
        self.notifier.changed(group)

    async def process_unregister_client(self: Any, cmd: RemotingCommand, conn: Connection) -> RemotingCommand:
        h = UnregisterClientRequestHeader.from_ext(cmd.ext_fields)
        if h.producerGroup:
            self.clients.unregister_producer(h.producerGroup, conn)
        if h.consumerGroup and self.clients.unregister_consumer(h.consumerGroup, conn):
            self.notify_consumer_ids_changed(h.consumerGroup)
        return cmd.response()

    async def process_consumer_list(self: Any, cmd: RemotingCommand, conn: Connection) -> RemotingCommand:
        h = GetConsumerListByGroupRequestHeader.from_ext(cmd.ext_fields)
        ids = self.clients.consumer_ids(h.consumerGroup)
        if not ids:
            return cmd.response(ResponseCode.SYSTEM_ERROR,
                                remark=f"no consumer for this group, {h.consumerGroup}")
        return cmd.response(body=fastjson.dumpb(ConsumerListBody(ids)))

    async def process_query_consumer_offset(self: Any, cmd: RemotingCommand, conn: Connection) -> RemotingCommand:
        """A stored offset, else 0 for a queue that still starts at 0, else QUERY_NOT_FOUND (22)."""
        h = QueryConsumerOffsetRequestHeader.from_ext(cmd.ext_fields)
        off = self.local.offsets.query_offset(h.consumerGroup, h.topic, h.queueId)
        if off >= 0:
            return cmd.response(ext_fields=OffsetResponseHeader(off).to_ext())
        min_off = await self.run(self.store.get_min_offset_in_queue, h.topic, h.queueId)
        if min_off <= 0:
            return cmd.response(ext_fields=OffsetResponseHeader(0).to_ext())
        return cmd.response(ResponseCode.QUERY_NOT_FOUND,
                            remark="Not found, V3_0_6_SNAPSHOT maybe this group consumer boot first")

    async def process_update_consumer_offset(self: Any, cmd: RemotingCommand, conn: Connection) -> RemotingCommand:
        """`ConsumerManageProcessor.updateConsumerOffset`: the group must exist (it is not created
        here; a heartbeat or pull creates it), then the topic, then queueId and commitOffset must
        be numbers; each with Java's code and remark. Beyond Java, which stores whatever passes
        those, the queue must be one of the topic's and the offset within 0..its max offset (the
        next offset to be written): a client only ever commits what it pulled, and anything else
        would be persisted into consumerOffset.json as a stray that `verify` reports."""
        h = UpdateConsumerOffsetRequestHeader.from_ext(cmd.ext_fields)
        topic, group, qid, offset = h.topic, h.consumerGroup, h.queueId, h.commitOffset
        if group not in self.local.subscriptions.table:
            return cmd.response(ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST, remark=f"Group {group} not exist!")
        tc = self.local.topics.select(topic)
        if tc is None:
            return cmd.response(ResponseCode.TOPIC_NOT_EXIST, remark=f"Topic {topic} not exist!")
        if qid is None:
            return cmd.response(ResponseCode.INVALID_PARAMETER, remark=f"QueueId is null, topic is {topic}")
        if offset is None:
            return cmd.response(ResponseCode.INVALID_PARAMETER, remark=f"Offset is null, topic is {topic}")
        queues = max(tc.read_queue_nums, tc.write_queue_nums)
        if not 0 <= qid < queues:
            return cmd.response(ResponseCode.INVALID_PARAMETER,
                                remark=f"QueueId {qid} is illegal, topic {topic} has {queues} queues")
        max_off = await self.run(self.store.get_max_offset_in_queue, topic, qid) if offset else 0
        if not 0 <= offset <= max_off:
            return cmd.response(ResponseCode.INVALID_PARAMETER,
                                remark=f"Offset {offset} is illegal, queue {qid} of topic {topic} ends at {max_off}")
        if self.offset_reset_pending(group, topic, qid):
            # useServerSideResetOffset: a commit after an operator's reset, from before the consumer saw it
            return cmd.response(remark="Offset has been previously reset")
        self.local.offsets.commit_offset(group, topic, qid, offset)
        return cmd.response()

    async def process_lock_batch(self: Any, cmd: RemotingCommand, conn: Connection) -> RemotingCommand:
        try:
            body = LockBatchRequestBody.decode(cmd.body)
        except (ValueError, TypeError, AttributeError) as e:
            return _bad_body(cmd, "lock", e)
        locked = self.locks.try_lock_batch(body.consumerGroup, body.mqSet, body.clientId)
        return cmd.response(body=fastjson.dumpb(LockBatchResponseBody(locked)))

    async def process_unlock_batch(self: Any, cmd: RemotingCommand, conn: Connection) -> RemotingCommand:
        try:
            body = LockBatchRequestBody.decode(cmd.body)
        except (ValueError, TypeError, AttributeError) as e:
            return _bad_body(cmd, "unlock", e)
        self.locks.unlock_batch(body.consumerGroup, body.mqSet, body.clientId)
        return cmd.response()

    async def process_check_client_config(self: Any, cmd: RemotingCommand, conn: Connection) -> RemotingCommand:
        try:
            body = CheckClientRequestBody.decode(cmd.body)
        except (ValueError, TypeError, AttributeError) as e:
            return _bad_body(cmd, "check client config", e)
        sd = body.subscriptionData
        if sd is None or (sd.expressionType or "TAG").upper() == "TAG":
            return cmd.response()
        if sd.expressionType.upper() != "SQL92":
            return cmd.response(ResponseCode.SUBSCRIPTION_PARSE_FAILED,
                                remark=f"unknown expression type {sd.expressionType}")
        if not self.enable_property_filter:
            return cmd.response(ResponseCode.SYSTEM_ERROR,
                                remark="The broker does not support consumer to filter message by SQL92")
        try:
            compile_selector(sd.subString)
        except SelectorError as e:
            return cmd.response(ResponseCode.SUBSCRIPTION_PARSE_FAILED,
                                remark=f"Parse the consumer's subscription[{sd.subString}] failed, group: "
                                       f"{body.group}: {e}")
        return cmd.response()
