"""Topic and store maintenance for operators.

UPDATE_AND_CREATE_TOPIC_LIST 18, DELETE_TOPIC_IN_BROKER 215, CLEAN_UNUSED_TOPIC 316,
CLEAN_EXPIRED_CONSUMEQUEUE 306, DELETE_EXPIRED_COMMITLOG 329, QUERY_CONSUME_QUEUE 321,
SET_COMMITLOG_READ_MODE 2004, GET_SYSTEM_TOPIC_LIST_FROM_BROKER 305, the cold-data flow-control config (2001 / 2002 / 2003; as in Java
with `coldDataFlowControlEnable` false, its default: kept and reported, nothing throttled),
POP_ROLLBACK 200056 and EXPORT_ROCKSDB_CONFIG_TO_JSON 355 (no RocksDB config store here: nothing to export, "export
done." as Java's JSON-file managers answer) and RESET_MASTER_FLUSH_OFFSET 908 (a master ignores it).

`AdminBrokerProcessor` of the Java broker.
"""

from __future__ import annotations

import logging
import mmap
from typing import Any

from rmqtool.remoting import fastjson
from rmqtool.remoting.codes import ResponseCode
from rmqtool.remoting.command import RemotingCommand
from rmqtool.remoting.transport import Connection
from rmqtool.store import topicdelete
from rmqtool.validators import check_topic

log = logging.getLogger("rmqtool.broker")

MADV_NORMAL, MADV_RANDOM = 0, 1  # LibC
COLD_CG_THRESHOLD = 3 * 1024 * 1024  # ColdDataCgCtrService defaults (cgColdReadThreshold, globalColdReadThreshold)
COLD_GLOBAL_THRESHOLD = 100 * 1024 * 1024
# never removed by cleanUnusedTopic (`DefaultMessageStore.cleanUnusedTopic`)
_KEEP = ("SCHEDULE_TOPIC_XXXX", "RMQ_SYS_TRANS_OP_HALF_TOPIC")


# TopicValidator.SYSTEM_TOPIC_SET before the broker adds its own (cluster, broker name, reply topic...)
VALIDATOR_SYSTEM_TOPICS = ("TBW102", "SCHEDULE_TOPIC_XXXX", "BenchmarkTest", "RMQ_SYS_TRANS_HALF_TOPIC",
                           "RMQ_SYS_TRACE_TOPIC", "RMQ_SYS_TRANS_OP_HALF_TOPIC", "TRANS_CHECK_MAX_TIME_TOPIC",
                           "SELF_TEST_TOPIC", "OFFSET_MOVED_EVENT", "CHECKPOINT_TOPIC")


def system_topics(local: Any) -> set[str]:
    """`TopicValidator.getSystemTopicSet()` of this broker."""
    return set(VALIDATOR_SYSTEM_TOPICS) | set(getattr(local.topics, "system_topic_names", ()))


def _system_topic(topic: str, local: Any) -> bool:
    """`TopicValidator.isSystemTopic`."""
    return topic in system_topics(local) or topic.startswith("rmq_sys_")


class MaintenanceProcessor:
    # ------------------------------------------------------------ topics
    async def process_update_and_create_topic_list(self: Any, cmd: RemotingCommand,
                                                   conn: Connection) -> RemotingCommand:
        from rmqtool.errors import InvalidTopic
        from rmqtool.store.topics import TopicConfig

        try:
            obj = fastjson.loads(cmd.body)
            raw = list(obj.get("topicConfigList") or [])
            cfgs = [TopicConfig.from_json(str(o.get("topicName") or ""), o) for o in raw]
        except (ValueError, TypeError, AttributeError) as e:
            return cmd.response(ResponseCode.SYSTEM_ERROR, remark=f"bad topic config list body: {e}")
        for tc in cfgs:
            try:
                check_topic(tc.topic_name)
            except InvalidTopic as e:
                return cmd.response(ResponseCode.INVALID_PARAMETER, remark=str(e))
            if _system_topic(tc.topic_name, self.local):
                return cmd.response(ResponseCode.INVALID_PARAMETER,
                                    remark=f"The topic[{tc.topic_name}] is conflict with system topic.")

        def update_all() -> None:
            topics = self.local.topics
            for tc in cfgs:
                topics.update(tc, persist=False)
            topics.persist()

        log.info("updateAndCreateTopicList %s from %s", ";".join(t.topic_name for t in cfgs), conn.peer)
        await self.run(update_all)
        self.register_broker_all()
        return cmd.response()

    async def process_delete_topic(self: Any, cmd: RemotingCommand, conn: Connection) -> RemotingCommand:
        """`deleteTopic`: the config, the group offsets and the queues; the groups' POP retry topics too."""
        topic = (cmd.ext_fields or {}).get("topic", "")
        if not topic.strip():
            return cmd.response(ResponseCode.INVALID_PARAMETER, remark="The specified topic is blank.")
        if _system_topic(topic, self.local):
            return cmd.response(ResponseCode.INVALID_PARAMETER, remark=f"The topic[{topic}] is conflict with system topic.")
        log.info("deleteTopic %s from %s", topic, conn.peer)
        offsets = self.local.offsets
        doomed = [topic]
        for group, topics in offsets.group_topic_map().items():
            if topic in topics:
                for retry in (f"%RETRY%{group}_{topic}", f"%RETRY%{group}+{topic}"):
                    if self.local.topics.select(retry) is not None:
                        doomed.append(retry)

        def delete() -> None:
            for t in doomed:
                self.local.topics.delete(t)
                offsets.clean_offset_by_topic(t)
            offsets.persist()
            topicdelete.delete_topics(self.store, doomed)

        await self.run(delete)
        self.register_broker_all()
        return cmd.response()

    async def process_clean_unused_topic(self: Any, cmd: RemotingCommand, conn: Connection) -> RemotingCommand:
        def clean() -> int:
            unused = [t for t in topicdelete.unused_topics(self.store, lambda t: self.local.topics.select(t) is not None)
                      if t not in _KEEP]
            return topicdelete.delete_topics(self.store, unused)

        n = await self.run(clean)
        log.info("cleanUnusedTopic: %d queues removed", n)
        return cmd.response()

    async def process_system_topic_list(self: Any, cmd: RemotingCommand, conn: Connection) -> RemotingCommand:
        """GET_SYSTEM_TOPIC_LIST_FROM_BROKER 305 (what exportMetrics and getUserTopicConfig filter by)."""
        return cmd.response(body=fastjson.dumpb(fastjson.bean(topicList=sorted(system_topics(self.local)))))

    # ------------------------------------------------------------ store files
    async def process_clean_expired_cq(self: Any, cmd: RemotingCommand, conn: Connection) -> RemotingCommand:
        n = await self.run(topicdelete.clean_expired_consume_queues, self.store)
        log.info("cleanExpiredConsumerQueue: %d queues removed", n)
        return cmd.response()

    async def process_delete_expired_commitlog(self: Any, cmd: RemotingCommand, conn: Connection) -> RemotingCommand:
        """`executeDeleteFilesManually`: files past fileReservedTime go now, whatever `deleteWhen` says."""
        store, cfg = self.store, self.config

        def delete() -> int:
            if store.read_only:
                return 0
            cl = store.commitlog
            with cl.put_lock, store.flush_lock:
                n = cl.mfq.delete_expired_by_time(cfg.file_reserved_time * 3600 * 1000, self.clock(),
                                                  immediately=False, batch_max=cfg.delete_file_batch_max)
            store.cleaner.clean_logics()  # the ConsumeQueue and index files below the new minimum
            return n

        n = await self.run(delete)
        log.info("deleteExpiredCommitLog: %d files deleted", n)
        return cmd.response()

    async def process_query_consume_queue(self: Any, cmd: RemotingCommand, conn: Connection) -> RemotingCommand:
        """QueryConsumeQueueResponseBody: units from `index`, `count` of them, with the group's subscription."""
        ext = cmd.ext_fields or {}
        topic = ext.get("topic", "")
        try:
            qid, index, count = int(ext.get("queueId", "0")), int(ext.get("index", "0")), int(ext.get("count", "0"))
        except ValueError as e:
            return cmd.response(ResponseCode.SYSTEM_ERROR, remark=f"bad header: {e}")
        cq = self.store.cqs.find(topic, qid)
        if cq is None:
            return cmd.response(ResponseCode.SYSTEM_ERROR, remark=f"{qid}@{topic} is not exist!")
        body: dict[str, Any] = {}
        group = ext.get("consumerGroup")
        if group is not None:
            sub = self.clients.find_subscription(group, topic)
            if sub is None:
                body["filterData"] = f"{group}@{topic} is not online!"
            else:
                body["subscriptionData"] = sub.to_json_obj()
                body["filterData"] = "null"
        lo, hi = cq.min_offset_in_queue, cq.max_offset_in_queue
        body["maxQueueIndex"], body["minQueueIndex"] = hi, lo
        if index < lo or index >= hi:
            return cmd.response(body=fastjson.dumpb(fastjson.bean(**body)),
                                remark=f"Index {index} of {qid}@{topic} is not exist!")
        units = cq.read_units(index, max(0, min(count, hi - index)))
        body["queueData"] = [fastjson.bean(bitMap=None, eval=False, extendDataJson=None, msg=None, physicOffset=off,
                                           physicSize=size, tagsCode=tags) for off, size, tags in units]
        return cmd.response(body=fastjson.dumpb(fastjson.bean(**body)))

    async def process_set_commitlog_read_mode(self: Any, cmd: RemotingCommand, conn: Connection) -> RemotingCommand:
        ext = cmd.ext_fields
        if ext is None:
            return cmd.response(ResponseCode.SYSTEM_ERROR, remark="set commitlog readahead mode param error")
        try:
            mode = int(ext.get("READ_AHEAD_MODE", ""))
        except ValueError:
            return cmd.response(ResponseCode.SYSTEM_ERROR, remark="set commitlog readahead mode failed")
        if mode not in (MADV_RANDOM, MADV_NORMAL):
            return cmd.response(ResponseCode.INVALID_PARAMETER, remark="set commitlog readahead mode param value error")
        self.configuration.values["dataReadAheadEnable"] = "true" if mode == MADV_NORMAL else "false"
        advice = mmap.MADV_NORMAL if mode == MADV_NORMAL else mmap.MADV_RANDOM
        for mf in list(self.store.commitlog.mfq.files):  # `scanFileAndSetReadMode`
            try:
                mf.mm.madvise(advice)
            except (OSError, ValueError, AttributeError):
                pass
        return cmd.response(remark=f"set commitlog readahead mode success, mode: {mode}")

    # ------------------------------------------------------------ cold data flow control (config only)
    @property
    def cold_data_config(self: Any) -> dict[str, int]:
        table = getattr(self, "_cold_data_config", None)
        if table is None:
            table = self._cold_data_config = {}
        return table

    async def process_update_cold_data_config(self: Any, cmd: RemotingCommand, conn: Connection) -> RemotingCommand:
        from rmqtool.broker.admin.config import string_to_properties

        if cmd.body:
            for group, value in string_to_properties(cmd.body.decode("utf-8", "replace")).items():
                try:
                    self.cold_data_config[group] = int(value)
                except ValueError:
                    log.error("updateColdDataFlowCtrGroupConfig: bad threshold %r of %s", value, group)
        return cmd.response()

    async def process_remove_cold_data_config(self: Any, cmd: RemotingCommand, conn: Connection) -> RemotingCommand:
        if cmd.body:
            self.cold_data_config.pop(cmd.body.decode("utf-8", "replace"), None)
        return cmd.response()

    async def process_get_cold_data_info(self: Any, cmd: RemotingCommand, conn: Connection) -> RemotingCommand:
        info = {"runtimeTable": {}, "configTable": dict(self.cold_data_config),
                "cgColdReadThreshold": COLD_CG_THRESHOLD, "globalColdReadThreshold": COLD_GLOBAL_THRESHOLD,
                "globalAcc": 0}
        return cmd.response(body=fastjson.dumpb(info))

    async def process_export_rocksdb_config(self: Any, cmd: RemotingCommand, conn: Connection) -> RemotingCommand:
        return cmd.response(remark="export done.")

    async def process_pop_rollback(self: Any, cmd: RemotingCommand, conn: Connection) -> RemotingCommand:
        """POP_ROLLBACK 200056 (`exportPopRecord`: `transferPopToFsStore`): serve keeps no RocksDB POP
        consumer store to move back to files, as Java with popConsumerKVServiceEnable=false (its default)."""
        return cmd.response()

    async def process_reset_master_flush_offset(self: Any, cmd: RemotingCommand, conn: Connection) -> RemotingCommand:
        return cmd.response()  # brokerId 0: nothing to do, as Java's master

