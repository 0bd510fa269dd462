"""Offsets, lookups, topics and stats: GET_MAX/MIN_OFFSET 30/31, SEARCH_OFFSET_BY_TIMESTAMP 29,
GET_EARLIEST_MSG_STORETIME 32, VIEW_MESSAGE_BY_ID 33, QUERY_MESSAGE 12, UPDATE_AND_CREATE_TOPIC 17,
GET_ALL_TOPIC_CONFIG 21, and what `mqadmin topicStatus / consumerProgress / consumerConnection /
brokerStatus / topicList -c / queryMsgById` ask: GET_TOPIC_STATS_INFO 202, GET_CONSUME_STATS 208,
GET_TOPIC_CONFIG 351, QUERY_TOPIC_CONSUME_BY_WHO 300, GET_CONSUMER_CONNECTION_LIST 203
(protocol.md §4.7, §4.8, §4.13).

`AdminBrokerProcessor` + `QueryMessageProcessor` of the Java broker.
"""

from __future__ import annotations

from typing import Any

from rmqtool.broker.wire import to_wire_topic_config
from rmqtool.remoting import fastjson
from rmqtool.remoting.bodies import Connection as ConnectionBody
from rmqtool.remoting.bodies import (
    ConsumerConnection,
    ConsumeStats,
    GroupList,
    MessageQueue,
    OffsetWrapper,
    TopicOffset,
    TopicStatsTable,
)
from rmqtool.remoting.codes import ResponseCode
from rmqtool.remoting.command import RemotingCommand
from rmqtool.remoting.headers import (
    CreateTopicRequestHeader,
    GetConsumerConnectionListRequestHeader,
    GetConsumeStatsRequestHeader,
    GetEarliestMsgStoretimeResponseHeader,
    GetTopicConfigRequestHeader,
    GetTopicStatsInfoRequestHeader,
    OffsetResponseHeader,
    QueryMessageRequestHeader,
    QueryMessageResponseHeader,
    QueryTopicConsumeByWhoRequestHeader,
    SearchOffsetRequestHeader,
    TopicQueueRequestHeader,
    ViewMessageRequestHeader,
)
from rmqtool.remoting.transport import Connection


def _record_bytes(store: Any, offset: int) -> bytes | None:
    msg = store.look_message_by_offset(offset)
    if msg is None:
        return None
    return store.read_record_bytes(offset, msg.total_size)


class QueryProcessor:
    async def process_get_max_offset(self: Any, cmd: RemotingCommand, conn: Connection) -> RemotingCommand:
        h = TopicQueueRequestHeader.from_ext(cmd.ext_fields)
        off = await self.run(self.store.get_max_offset_in_queue, h.topic, h.queueId)
        return cmd.response(ext_fields=OffsetResponseHeader(off).to_ext())

    async def process_get_min_offset(self: Any, cmd: RemotingCommand, conn: Connection) -> RemotingCommand:
        h = TopicQueueRequestHeader.from_ext(cmd.ext_fields)
        off = await self.run(self.store.get_min_offset_in_queue, h.topic, h.queueId)
        return cmd.response(ext_fields=OffsetResponseHeader(off).to_ext())

    async def process_search_offset(self: Any, cmd: RemotingCommand, conn: Connection) -> RemotingCommand:
        h = SearchOffsetRequestHeader.from_ext(cmd.ext_fields)
        off = await self.run(self.store.get_offset_in_queue_by_time, h.topic, h.queueId, h.timestamp)
        return cmd.response(ext_fields=OffsetResponseHeader(off).to_ext())

    async def process_earliest_msg_storetime(self: Any, cmd: RemotingCommand, conn: Connection) -> RemotingCommand:
        h = TopicQueueRequestHeader.from_ext(cmd.ext_fields)
        ts = await self.run(self.store.get_earliest_message_time, h.topic, h.queueId)
        return cmd.response(ext_fields=GetEarliestMsgStoretimeResponseHeader(-1 if ts is None else ts).to_ext())

    async def process_view_message(self: Any, cmd: RemotingCommand, conn: Connection) -> RemotingCommand:
        h = ViewMessageRequestHeader.from_ext(cmd.ext_fields)
        raw = await self.run(_record_bytes, self.store, h.offset) if h.offset >= 0 else None
        if not raw:
            return cmd.response(ResponseCode.SYSTEM_ERROR, remark=f"can not find message by the offset, {h.offset}")
        return cmd.response(body=raw)

    async def process_query_message(self: Any, cmd: RemotingCommand, conn: Connection) -> RemotingCommand:
        h = QueryMessageRequestHeader.from_ext(cmd.ext_fields)
        max_num = h.maxNum if h.maxNum > 0 else 32
        end = h.endTimestamp if h.endTimestamp > 0 else self.clock()

        def query() -> list[bytes]:
            msgs = self.store.query_message(h.topic, h.key, max_num, h.beginTimestamp, end)
            out = []
            for m in msgs:
                raw = self.store.read_record_bytes(m.commit_log_offset, m.total_size)
                if raw:
                    out.append(raw)
            return out

        records = await self.run(query)
        ext = QueryMessageResponseHeader(self.clock(), int(self.store.max_phy_offset)).to_ext()
        if not records:
            return cmd.response(ResponseCode.QUERY_NOT_FOUND, ext_fields=ext,
                                remark="can not find message, maybe time range not correct")
        return cmd.response(ext_fields=ext, body=b"".join(records))

    async def process_update_and_create_topic(self: Any, cmd: RemotingCommand, conn: Connection) -> RemotingCommand:
        """`AdminBrokerProcessor.updateAndCreateTopic`: an invalid or system topic is refused with
        INVALID_PARAMETER and `TopicValidator.validateTopic`'s remark (validateSystemTopicWhenUpdateTopic
        is on by default)."""
        from rmqtool.store.topics import TopicConfig
        from rmqtool.validators import is_system_topic, validate_topic_remark

        h = CreateTopicRequestHeader.from_ext(cmd.ext_fields)
        bad = validate_topic_remark(h.topic)
        if bad is not None:
            return cmd.response(ResponseCode.INVALID_PARAMETER, remark=bad)
        if is_system_topic(h.topic) or h.topic in getattr(self.local.topics, "system_topic_names", ()) or \
                h.topic == self.cluster_name:
            return cmd.response(ResponseCode.INVALID_PARAMETER,
                                remark=f"The topic[{h.topic}] is conflict with system topic.")
        if h.readQueueNums < 0 or h.writeQueueNums < 0:
            return cmd.response(ResponseCode.SYSTEM_ERROR, remark="queue numbers must not be negative")
        old = self.local.topics.select(h.topic)
        try:
            attributes = alter_attributes(dict(getattr(old, "attributes", None) or {}), h.attributes)
        except ValueError as e:
            return cmd.response(ResponseCode.SYSTEM_ERROR, remark=str(e))
        tc = TopicConfig(h.topic, h.readQueueNums, h.writeQueueNums, h.perm, h.topicFilterType or "SINGLE_TAG",
                         h.topicSysFlag or 0, bool(h.order), attributes=attributes)
        await self.run(self.local.topics.update, tc)
        self.register_broker_all()
        if self.registrar is not None:  # registerIncrementBrokerData: the name servers hear of it now
            self.spawn(self.register_remote(force=True))
        return cmd.response()

    async def process_get_all_topic_config(self: Any, cmd: RemotingCommand, conn: Connection) -> RemotingCommand:
        return cmd.response(body=fastjson.dumpb(self.topic_config_wrapper()))

    async def process_get_topic_config(self: Any, cmd: RemotingCommand, conn: Connection) -> RemotingCommand:
        """`getTopicConfig`: TopicConfigAndQueueMapping, i.e. the TopicConfig with no static-topic mapping.

        The 5.x admin asks it after GET_TOPIC_STATS_INFO / GET_CONSUME_STATS (`MQAdminUtils
        .examineTopicConfigFromRoute`), so `mqadmin topicStatus` and `consumerProgress` fail without it.
        """
        h = GetTopicConfigRequestHeader.from_ext(cmd.ext_fields)
        tc = self.local.topics.select(h.topic)
        if tc is None:
            return cmd.response(ResponseCode.TOPIC_NOT_EXIST, remark=f"No topic in this broker. topic: {h.topic}")
        return cmd.response(body=fastjson.dumpb(to_wire_topic_config(tc)))

    async def process_topic_consume_by_who(self: Any, cmd: RemotingCommand, conn: Connection) -> RemotingCommand:
        """`queryTopicConsumeByWho`: online groups subscribing the topic, plus groups with offsets in it."""
        h = QueryTopicConsumeByWhoRequestHeader.from_ext(cmd.ext_fields)
        groups = [g for g, info in self.clients.consumers.items() if info.channels and h.topic in info.subscriptions]
        for g, topics in self.local.offsets.group_topic_map().items():
            if h.topic in topics and g not in groups:
                groups.append(g)
        return cmd.response(body=fastjson.dumpb(GroupList(groups)))

    async def process_topic_stats(self: Any, cmd: RemotingCommand, conn: Connection) -> RemotingCommand:
        h = GetTopicStatsInfoRequestHeader.from_ext(cmd.ext_fields)
        tc = self.local.topics.select(h.topic)
        if tc is None:
            return cmd.response(ResponseCode.TOPIC_NOT_EXIST, remark=f"topic[{h.topic}] not exist")

        def stats() -> TopicStatsTable:
            table = TopicStatsTable()
            for qid in range(tc.write_queue_nums):
                lo = self.store.get_min_offset_in_queue(h.topic, qid)
                hi = self.store.get_max_offset_in_queue(h.topic, qid)
                last = self.store.get_message_store_timestamp(h.topic, qid, hi - 1) if hi > 0 else 0
                table.offsetTable[MessageQueue(h.topic, self.broker_name, qid)] = TopicOffset(lo, hi, last or 0)
            return table

        return cmd.response(body=fastjson.dumpb(await self.run(stats)))

    async def process_consume_stats(self: Any, cmd: RemotingCommand, conn: Connection) -> RemotingCommand:
        h = GetConsumeStatsRequestHeader.from_ext(cmd.ext_fields)
        offsets = self.local.offsets
        topics = [h.topic] if h.topic else sorted(offsets.which_topic_by_consumer(h.consumerGroup))

        def stats() -> ConsumeStats:
            cs = ConsumeStats()
            for topic in topics:
                tc = self.local.topics.select(topic)
                if tc is None:
                    continue
                for qid in range(tc.write_queue_nums):
                    broker_off = self.store.get_max_offset_in_queue(topic, qid)
                    consumer_off = max(0, offsets.query_offset(h.consumerGroup, topic, qid))
                    last = (self.store.get_message_store_timestamp(topic, qid, consumer_off - 1)
                            if consumer_off > 0 else 0)
                    cs.offsetTable[MessageQueue(topic, self.broker_name, qid)] = OffsetWrapper(
                        broker_off, consumer_off, consumer_off, last or 0)
            return cs

        return cmd.response(body=fastjson.dumpb(await self.run(stats)))

    async def process_consumer_connection_list(self: Any, cmd: RemotingCommand,
                                               conn: Connection) -> RemotingCommand:
        h = GetConsumerConnectionListRequestHeader.from_ext(cmd.ext_fields)
        g = self.clients.consumers.get(h.consumerGroup)
        if g is None or not g.channels:
            return cmd.response(ResponseCode.CONSUMER_NOT_ONLINE,
                                remark=f"the consumer group[{h.consumerGroup}] not online")
        body = ConsumerConnection(
            [ConnectionBody(i.client_id, str(i.conn.peer), i.language, i.version) for i in g.channels.values()],
            dict(g.subscriptions), g.consume_type, g.message_model, g.consume_from_where)
        return cmd.response(body=fastjson.dumpb(body))


def alter_attributes(current: dict[str, str], modification: str | None) -> dict[str, str]:
    """`AttributeParser.parseToMap` + `AttributeUtil.alterCurrentAttributes`: `+key=value` sets,
    `-key` removes (mqadmin updateTopic -a +message.type=FIFO gives 5.x topics their type)."""
    if not modification:
        return current
    seen: set[str] = set()
    for kv in modification.split(","):
        if "=" in kv:
            key, value = kv.split("=", 1)
            if not key.startswith("+"):
                raise ValueError(f"add/alter attribute format is wrong: {key}")
        else:
            key, value = kv, ""
            if not key.startswith("-"):
                raise ValueError(f"delete attribute format is wrong: {key}")
        if key in seen:
            raise ValueError(f"key duplication: {key}")
        seen.add(key)
        if key[0] == "+":
            current[key[1:]] = value
        else:
            current.pop(key[1:], None)
    return current
