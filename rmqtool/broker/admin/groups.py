"""Consumer groups for operators: UPDATE_AND_CREATE_SUBSCRIPTIONGROUP 200 / _LIST 225,
GET_ALL_SUBSCRIPTIONGROUP_CONFIG 201, GET_SUBSCRIPTIONGROUP_CONFIG 352, DELETE_SUBSCRIPTIONGROUP 207,
INVOKE_BROKER_TO_RESET_OFFSET 222 (resetOffsetByTime, skipAccumulatedMessage), CLONE_GROUP_OFFSET 314,
GET_BROKER_CONSUME_STATS 317 and SET_MESSAGE_REQUEST_MODE 401 / GET_ALL_MESSAGE_REQUEST_MODE 402.

`AdminBrokerProcessor` of the Java broker. The offset reset is the server-side one of 5.x
(`useServerSideResetOffset`, on by default): the group's offsets are set at once and each queue's
next pull is answered OFFSET_MOVED to the new offset (`queryThenEraseResetOffset`), commits of
older offsets in between being ignored, so an online consumer follows without a client callback.
"""

from __future__ import annotations

import json
import logging
from typing import Any

from rmqtool.remoting import fastjson
from rmqtool.remoting.bodies import MessageQueue, OffsetWrapper
from rmqtool.remoting.codes import ResponseCode
from rmqtool.remoting.command import RESPONSE_FLAG, RemotingCommand
from rmqtool.remoting.transport import Connection
from rmqtool.store.jsonconfig import write_file
from rmqtool.store.subscriptions import SubscriptionGroupConfig

log = logging.getLogger("rmqtool.broker")


def _bad_body(cmd: RemotingCommand, what: str, e: Exception) -> RemotingCommand:
    return cmd.response(ResponseCode.SYSTEM_ERROR, remark=f"bad {what} body: {e}")


def _group_from_json(obj: Any) -> SubscriptionGroupConfig:
    if not isinstance(obj, dict) or not obj.get("groupName"):
        raise ValueError("no groupName")
    return SubscriptionGroupConfig.from_json(str(obj["groupName"]), obj)


class GroupAdminProcessor:
    # ------------------------------------------------------------ subscription groups
    async def process_update_subscription_group(self: Any, cmd: RemotingCommand, conn: Connection) -> RemotingCommand:
        try:
            cfg = _group_from_json(fastjson.loads(cmd.body)) if cmd.body else None
        except (ValueError, TypeError, AttributeError) as e:
            return _bad_body(cmd, "subscription group", e)
        if cfg is not None:
            log.info("updateAndCreateSubscriptionGroup %s from %s", cfg.group_name, conn.peer)
            await self.run(self.local.subscriptions.update, cfg)
        return cmd.response()

    async def process_update_subscription_group_list(self: Any, cmd: RemotingCommand,
                                                     conn: Connection) -> RemotingCommand:
        try:
            obj = fastjson.loads(cmd.body)
            cfgs = [_group_from_json(o) for o in (obj.get("groupConfigList") or [])]
        except (ValueError, TypeError, AttributeError) as e:
            return _bad_body(cmd, "subscription group list", e)

        def update_all() -> None:
            subs = self.local.subscriptions
            for cfg in cfgs:
                subs.update(cfg, persist=False)
            subs.persist()

        await self.run(update_all)
        return cmd.response()

    async def process_get_all_subscription_group(self: Any, cmd: RemotingCommand,
                                                 conn: Connection) -> RemotingCommand:
        from rmqtool.store.jsonconfig import dumps

        return cmd.response(body=dumps(self.local.subscriptions.encode()).encode())

    async def process_get_subscription_group(self: Any, cmd: RemotingCommand, conn: Connection) -> RemotingCommand:
        from rmqtool.store.jsonconfig import dumps

        group = (cmd.ext_fields or {}).get("group", "")
        cfg = self.local.subscriptions.table.get(group)
        if cfg is None:
            return cmd.response(ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST, remark="No group in this broker")
        return cmd.response(body=dumps(cfg.to_bean()).encode())

    async def process_delete_subscription_group(self: Any, cmd: RemotingCommand, conn: Connection) -> RemotingCommand:
        ext = cmd.ext_fields or {}
        group = ext.get("groupName", "")
        clean = ext.get("cleanOffset", "false").lower() == "true"
        log.info("deleteSubscriptionGroup %s (cleanOffset %s) from %s", group, clean, conn.peer)

        def delete() -> None:
            self.local.subscriptions.delete(group)
            if clean:
                self.local.offsets.remove_offset(group)
                self.local.offsets.persist()

        await self.run(delete)
        return cmd.response()

    # ------------------------------------------------------------ offsets
    @property
    def reset_offsets(self: Any) -> dict[tuple[str, str, int], int]:
        table = getattr(self, "_reset_offsets", None)
        if table is None:
            table = self._reset_offsets = {}
        return table

    def offset_reset_pending(self: Any, group: str, topic: str, queue_id: int) -> bool:
        """`hasOffsetReset`: a reset the queue's consumer has not pulled yet."""
        return (group, topic, queue_id) in self.reset_offsets

    def take_reset_offset(self: Any, group: str, topic: str, queue_id: int) -> int | None:
        """`queryThenEraseResetOffset`."""
        if not self.reset_offsets:
            return None
        return self.reset_offsets.pop((group, topic, queue_id), None)

    def offset_reset_response(self: Any, cmd: RemotingCommand, h: Any, offset: int) -> RemotingCommand:
        """The pull's answer after a reset: OFFSET_MOVED with the new offset to begin from."""
        lo = self.store.get_min_offset_in_queue(h.topic, h.queueId)
        hi = self.store.get_max_offset_in_queue(h.topic, h.queueId)
        ext = {"suggestWhichBrokerId": "0", "nextBeginOffset": str(offset), "minOffset": str(lo), "maxOffset": str(hi)}
        return RemotingCommand(ResponseCode.PULL_OFFSET_MOVED, ext, b"", cmd.opaque, RESPONSE_FLAG)

    async def process_reset_offset(self: Any, cmd: RemotingCommand, conn: Connection) -> RemotingCommand:
        """`resetOffsetInner`: by timestamp (-1: the end) or to an offset, for one queue or all."""
        ext = cmd.ext_fields or {}
        topic, group = ext.get("topic", ""), ext.get("group", "")
        try:
            queue_id = int(ext.get("queueId", "-1"))
            timestamp = int(ext.get("timestamp", "-1"))
            offset = int(ext["offset"]) if ext.get("offset") not in (None, "") else None
        except ValueError as e:
            return cmd.response(ResponseCode.SYSTEM_ERROR, remark=f"bad reset offset header: {e}")
        tc = self.local.topics.select(topic)
        if tc is None:
            return cmd.response(ResponseCode.TOPIC_NOT_EXIST, remark=f"Topic {topic} does not exist")
        if group not in self.local.subscriptions.table:
            return cmd.response(ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST, remark=f"Group {group} does not exist")
        store = self.store

        def search(qid: int) -> int:
            if timestamp < 0:
                return int(store.get_max_offset_in_queue(topic, qid))
            return int(store.get_offset_in_queue_by_time(topic, qid, timestamp))

        def compute() -> dict[int, int] | str:
            if queue_id >= 0:
                if offset is not None and offset != -1:
                    lo = store.get_min_offset_in_queue(topic, queue_id)
                    hi = store.get_max_offset_in_queue(topic, queue_id)
                    if (lo >= 0 and offset < lo) or offset > hi + 1:
                        return f"Target offset {offset} not in consume queue range [{lo}-{hi}]"
                    return {queue_id: offset}
                return {queue_id: search(queue_id)}
            return {qid: search(qid) for qid in range(tc.read_queue_nums)}

        got = await self.run(compute)
        if isinstance(got, str):
            return cmd.response(ResponseCode.SYSTEM_ERROR, remark=got)
        if not got:
            return cmd.response(ResponseCode.SYSTEM_ERROR, remark="No queues to reset.")
        log.info("reset offset of %s on %s to %s (from %s)", group, topic, got, conn.peer)
        for qid, off in got.items():
            self.local.offsets.commit_offset(group, topic, qid, off)  # `assignResetOffset`
            self.reset_offsets[(group, topic, qid)] = off
        table = {MessageQueue(topic, self.broker_name, qid): off for qid, off in got.items()}
        return cmd.response(body=fastjson.dumpb(fastjson.bean(offsetTable=table)))

    async def process_clone_group_offset(self: Any, cmd: RemotingCommand, conn: Connection) -> RemotingCommand:
        """`cloneGroupOffset`: the source group's offsets copied to the destination group."""
        ext = cmd.ext_fields or {}
        src, dest, topic = ext.get("srcGroup", ""), ext.get("destGroup", ""), ext.get("topic") or ""
        offline = ext.get("offline", "false").lower() == "true"
        offsets = self.local.offsets
        topics = [topic] if topic.strip() else sorted(offsets.which_topic_by_consumer(src))
        for t in topics:
            if self.local.topics.select(t) is None:
                continue
            info = self.clients.consumers.get(src)
            if not offline and info is not None and info.subscriptions and t not in info.subscriptions:
                continue
            for qid, off in offsets.query_offsets(src, t).items():
                offsets.commit_offset(dest, t, qid, off)
        return cmd.response()

    async def process_broker_consume_stats(self: Any, cmd: RemotingCommand, conn: Connection) -> RemotingCommand:
        """`fetchAllConsumeStatsInBroker`: every group's ConsumeStats per topic it has offsets in."""
        is_order = (cmd.ext_fields or {}).get("isOrder", "false").lower() == "true"
        offsets = self.local.offsets

        def collect() -> dict[str, Any]:
            stats_list = []
            total = 0
            for group in list(self.local.subscriptions.table):
                per_topic = []
                info = self.clients.consumers.get(group)
                for topic in sorted(offsets.which_topic_by_consumer(group)):
                    tc = self.local.topics.select(topic)
                    if tc is None or (is_order and not tc.order):
                        continue
                    if info is not None and info.subscriptions and topic not in info.subscriptions:
                        continue
                    table = {}
                    for qid in range(tc.write_queue_nums):
                        broker_off = max(0, self.store.get_max_offset_in_queue(topic, qid))
                        consumer_off = max(0, offsets.query_offset(group, topic, qid))
                        last = (self.store.get_message_store_timestamp(topic, qid, consumer_off - 1)
                                if consumer_off > 0 else 0)
                        table[MessageQueue(topic, self.broker_name, qid)] = OffsetWrapper(
                            broker_off, consumer_off, consumer_off, last or 0)
                        total += broker_off - consumer_off
                    per_topic.append(fastjson.bean(consumeTps=0.0, offsetTable=table))
                stats_list.append({group: per_topic})
            return fastjson.bean(brokerAddr=self.broker_addr, consumeStatsList=stats_list, totalDiff=total,
                                 totalInflightDiff=0)

        return cmd.response(body=fastjson.dumpb(await self.run(collect)))

    # ------------------------------------------------------------ message request mode (pull / pop)
    @property
    def message_request_modes(self: Any) -> dict[str, dict[str, dict[str, Any]]]:
        """`QueryAssignmentProcessor`'s `MessageRequestModeManager`: topic -> group -> setting,
        persisted as `config/messageRequestMode.json`."""
        table = getattr(self, "_message_request_modes", None)
        if table is None:
            table = {}
            path = self._request_mode_path()
            try:
                data = fastjson.loads(path.read_bytes())
                table = {t: dict(g) for t, g in (data.get("messageRequestModeMap") or {}).items()}
            except (OSError, ValueError, AttributeError):
                pass
            self._message_request_modes = table
        return table

    def _request_mode_path(self: Any) -> Any:
        from pathlib import Path

        return Path(self.config.store_path_root_dir) / "config" / "messageRequestMode.json"

    async def process_set_message_request_mode(self: Any, cmd: RemotingCommand, conn: Connection) -> RemotingCommand:
        """SET_MESSAGE_REQUEST_MODE 401 (`setConsumeMode`): the body's SetMessageRequestModeRequestBody."""
        try:
            obj = fastjson.loads(cmd.body)
            topic, group = str(obj["topic"]), str(obj["consumerGroup"])
            mode = str(obj.get("mode") or "PULL")
            share = int(obj.get("popShareQueueNum") or 0)
        except (ValueError, TypeError, KeyError, AttributeError) as e:
            return _bad_body(cmd, "message request mode", e)
        if topic.startswith("%RETRY%"):
            return cmd.response(ResponseCode.NO_PERMISSION, remark="retry topic is not allowed to set mode")
        if self.local.topics.select(topic) is None:
            return cmd.response(ResponseCode.TOPIC_NOT_EXIST, remark=f"topic[{topic}] not exist")
        if self.group_config(group) is None:
            return cmd.response(ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST, remark="subscription group does not exist")
        self.message_request_modes.setdefault(topic, {})[group] = fastjson.bean(
            consumerGroup=group, mode=mode, popShareQueueNum=share, topic=topic)
        await self._persist_message_request_modes()
        return cmd.response()

    async def _persist_message_request_modes(self: Any) -> None:
        await self.run(write_file, self._request_mode_path(),
                       json.dumps({"messageRequestModeMap": self.message_request_modes}, indent="\t"))

    async def assign_message_request_modes(self: Any, table: dict[str, dict[str, Any]]) -> None:
        """SlaveSynchronize.syncMessageRequestMode: topics the master lacks go, its topics are
        taken over whole (`removeIf` + `putAll`), persisted."""
        cur = self.message_request_modes
        for topic in [t for t in cur if t not in table]:
            del cur[topic]
        cur.update(table)
        await self._persist_message_request_modes()

    async def process_get_all_message_request_mode(self: Any, cmd: RemotingCommand,
                                                   conn: Connection) -> RemotingCommand:
        return cmd.response(body=fastjson.dumpb(fastjson.bean(messageRequestModeMap=self.message_request_modes)))
