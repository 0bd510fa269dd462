"""GET_CONSUMER_RUNNING_INFO (307) from a broker: what `mqadmin consumerStatus` and the dashboard's
consumer page show of one consumer (`MQClientInstance.consumerRunningInfo`).

The body is Java's ConsumerRunningInfo: `properties` (the consumer's settings, with the PROP_*
keys `ConsumerRunningInfo.analyzeSubscription / analyzeProcessQueue` read), `subscriptionSet`,
`mqTable` (a ProcessQueueInfo per queue this client owns: committed offset, cached messages,
lock state, last pull and consume times) and `statusTable`, left empty: the client keeps no
per-topic pull / consume RT and TPS statistics.
"""

from __future__ import annotations

import time
from typing import Any

from rmqtool.remoting import fastjson
from rmqtool.remoting.codes import ResponseCode
from rmqtool.remoting.command import RemotingCommand

CLIENT_VERSION = "V4_9_8"


class _MQ:
    """A MessageQueue map key as fastjson writes it (the object itself)."""

    def __init__(self, mq: Any) -> None:
        self.mq = mq

    def to_json_obj(self) -> dict[str, Any]:
        return fastjson.bean(brokerName=self.mq.broker_name, queueId=self.mq.queue_id, topic=self.mq.topic)


def process_queue_info(impl: Any, mq: Any, pq: Any) -> dict[str, Any]:
    offsets = sorted(pq.msgs)
    size = sum(len(m.body) for m in list(pq.msgs.values()))
    return fastjson.bean(
        cachedMsgCount=len(offsets), cachedMsgMaxOffset=offsets[-1] if offsets else 0,
        cachedMsgMinOffset=offsets[0] if offsets else 0, cachedMsgSizeInMiB=size // (1024 * 1024),
        commitOffset=max(0, impl.offset_store.read_memory(mq)), droped=pq.dropped,
        lastConsumeTimestamp=int(getattr(pq, "last_consume_ms", 0)),
        lastLockTimestamp=int(pq.last_lock_timestamp * 1000) if pq.last_lock_timestamp else 0,
        lastPullTimestamp=int(getattr(pq, "last_pull_ms", 0)), locked=pq.locked,
        transactionMsgCount=len(pq.consuming), transactionMsgMaxOffset=max(pq.consuming, default=0),
        transactionMsgMinOffset=min(pq.consuming, default=0), tryUnlockTimes=0)


def consumer_running_info(instance: Any, impl: Any, started_ms: int) -> dict[str, Any]:
    props = {
        "PROP_NAMESERVER_ADDR": ";".join(instance.namesrv_addrs),
        "PROP_CONSUME_TYPE": "CONSUME_PASSIVELY" if impl.push else "CONSUME_ACTIVELY",
        "PROP_CONSUMEORDERLY": str(bool(impl.orderly)).lower(),
        "PROP_THREADPOOL_CORE_SIZE": str(impl.consume_thread_nums),
        "PROP_CONSUMER_START_TIMESTAMP": str(started_ms),
        "PROP_CLIENT_VERSION": CLIENT_VERSION,
        "consumerGroup": impl.group, "messageModel": impl.message_model,
        "consumeFromWhere": impl.consume_from_where, "pullBatchSize": str(impl.pull_batch_size),
        "consumeMessageBatchMaxSize": str(impl.consume_batch), "maxReconsumeTimes": str(impl.max_reconsume_times),
        "pullThresholdForQueue": str(impl.pull_threshold_for_queue),
        "consumeConcurrentlyMaxSpan": str(impl.max_span), "unitMode": "false",
    }
    mq_table = {_MQ(mq): process_queue_info(impl, mq, pq)
                for mq, pq in sorted(impl.process_queues.items(), key=lambda kv: tuple(kv[0]))}
    return fastjson.bean(mqPopTable={}, mqTable=mq_table, properties=props, statusTable={},
                         subscriptionSet=[s.to_json_obj() for s in impl.subscriptions.values()],
                         userConsumerInfo={})


def answer_running_info(instance: Any, cmd: RemotingCommand) -> RemotingCommand:
    """`ClientRemotingProcessor.getConsumerRunningInfo`: SYSTEM_ERROR when the group is not here."""
    group = (cmd.ext_fields or {}).get("consumerGroup", "")
    impl = instance.consumers.get(group)
    if impl is None:
        return cmd.response(ResponseCode.SYSTEM_ERROR,
                            remark=f"The Consumer Group <{group}> not exist in this consumer")
    started = getattr(impl, "started_ms", 0) or int(time.time() * 1000)
    return cmd.response(body=fastjson.dumpb(consumer_running_info(instance, impl, started)))
