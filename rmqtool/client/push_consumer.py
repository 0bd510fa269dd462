"""`PushConsumer`: the synchronous face of a push consumer (`DefaultMQPushConsumer`).
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from rmqtool.client import namespace as ns
from rmqtool.client.allocate import AllocateMessageQueueStrategy
from rmqtool.client.consumer_impl import ConsumerImpl
from rmqtool.client.consumer_types import BROADCASTING, CLUSTERING, CONSUME_FROM_LAST_OFFSET, Listener
from rmqtool.client.exceptions import ClientError
from rmqtool.client.instance import ClientConfig, ClientInstance, resolve_instance
from rmqtool.client.lifecycle import ClientLifecycle
from rmqtool.client.message import MessageQueue
from rmqtool.client.subscription import SQL92, TAG
from rmqtool.validators import check_group, check_topic


class PushConsumer(ClientLifecycle):
    """A push consumer: long-polling pull loops feed `listener` on `consume_thread_nums` threads.

    The listener gets a list of `MessageExt` (`consume_message_batch_max_size`, default 1) and a
    `ConsumeContext`; returning None or CONSUME_SUCCESS commits them, RECONSUME_LATER (or raising)
    sends them back for a retry, to the DLQ after `max_reconsume_times` (-1: 16).
    """

    def __init__(self, group: str, namesrv: str | None = None, *, message_model: str = CLUSTERING,
                 consume_from_where: str = CONSUME_FROM_LAST_OFFSET, consume_timestamp: int | None = None,
                 allocate_strategy: AllocateMessageQueueStrategy | None = None, namespace: str | None = None,
                 consume_thread_nums: int = 20, pull_batch_size: int = 32,
                 consume_message_batch_max_size: int = 1, max_reconsume_times: int = -1,
                 pull_threshold_for_queue: int = 1000, long_polling: bool = True, suspend_ms: int = 15000,
                 post_subscription_when_pull: bool = False, offset_store_dir: Path | None = None,
                 start_from: str | int | None = None, instance: ClientInstance | None = None,
                 config: ClientConfig | None = None) -> None:
        check_group(group)
        # clustering consumers get a process-unique instance name (changeInstanceNameToPID)
        name = "DEFAULT" if message_model == BROADCASTING else f"{os.getpid()}#{time.monotonic_ns()}"
        self.instance, self._own = resolve_instance(namesrv, instance, config, name)
        self.impl = ConsumerImpl(
            ns.wrap(namespace, group), self.instance, push=True, message_model=message_model,
            consume_from_where=consume_from_where, consume_timestamp=consume_timestamp,
            allocate_strategy=allocate_strategy, namespace=namespace, consume_thread_nums=consume_thread_nums,
            pull_batch_size=pull_batch_size, consume_message_batch_max_size=consume_message_batch_max_size,
            max_reconsume_times=max_reconsume_times, pull_threshold_for_queue=pull_threshold_for_queue,
            long_polling=long_polling, suspend_ms=suspend_ms,
            post_subscription_when_pull=post_subscription_when_pull, offset_store_dir=offset_store_dir,
            start_from=start_from)

    def subscribe(self, topic: str, expression: str = "*", *, expression_type: str = TAG) -> PushConsumer:
        """`subscribe(topic, "TagA || TagB")`, or `expression_type="SQL92"` for a property filter."""
        check_topic(topic)
        self.impl.subscribe(topic, expression, expression_type)
        return self

    def subscribe_sql(self, topic: str, sql: str) -> PushConsumer:
        return self.subscribe(topic, sql, expression_type=SQL92)

    def register_listener(self, listener: Listener) -> PushConsumer:
        """A concurrent listener (`MessageListenerConcurrently`)."""
        self.impl.listener, self.impl.orderly = listener, False
        return self

    def register_orderly_listener(self, listener: Listener) -> PushConsumer:
        """An orderly listener: one batch at a time per queue, queues locked on the broker (clustering)."""
        self.impl.listener, self.impl.orderly = listener, True
        return self

    def _start(self) -> None:
        if self.impl.listener is None:
            raise ClientError("register a listener before start()")
        if self.impl.group in self.instance.consumers:
            raise ClientError(f"The consumer group[{self.impl.group}] has been created before")
        self.impl.executor = concurrent.futures.ThreadPoolExecutor(self.impl.consume_thread_nums,
                                                                   thread_name_prefix="rmq-consume")
        self.instance.start()
        self.instance.consumers[self.impl.group] = self.impl
        try:
            self.instance.run(self.impl.start())
        except BaseException:
            self.instance.consumers.pop(self.impl.group, None)
            self.instance.shutdown()
            self.impl.executor.shutdown(wait=False)
            raise

    def _shutdown(self) -> None:
        """Stop pulling, commit offsets (sync), unregister; the group rebalances at once."""
        with contextlib.suppress(Exception):
            self.instance.run(self.impl.shutdown(), timeout=15)
        self.instance.consumers.pop(self.impl.group, None)
        with contextlib.suppress(Exception):
            self.instance.run(self.instance.unregister_client(None, self.impl.group), timeout=5)
        if self.impl.executor is not None:
            self.impl.executor.shutdown(wait=False, cancel_futures=True)
        self.instance.shutdown()

    def rebalance_now(self) -> None:
        self.instance.run(self.impl.do_rebalance())

    def assigned_queues(self) -> list[MessageQueue]:
        return sorted(self.impl.process_queues)

    def caught_up(self) -> bool:
        return self.instance.run(_call(self.impl.caught_up))

    @property
    def client_id(self) -> str:
        return self.instance.client_id


async def _call(fn: Callable[[], Any]) -> Any:
    return fn()
