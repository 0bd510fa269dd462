"""`PullConsumer`: pull on demand (`DefaultMQPullConsumer`).
"""

from __future__ import annotations

import contextlib

from rmqtool.client import namespace as ns
from rmqtool.client.consumer_impl import ConsumerImpl
from rmqtool.client.exceptions import ClientError
from rmqtool.client.instance import ClientConfig, ClientInstance, resolve_instance
from rmqtool.client.lifecycle import ClientLifecycle
from rmqtool.client.message import MessageQueue, PullResult
from rmqtool.client.pull import build_sys_flag, pull_kernel, query_offset
from rmqtool.client.route import subscribe_queues
from rmqtool.client.subscription import TAG, build
from rmqtool.remoting.codes import RequestCode
from rmqtool.validators import check_group


class PullConsumer(ClientLifecycle):
    """Pull on demand (`DefaultMQPullConsumer`): you pick queues and offsets, commit when you like."""

    def __init__(self, group: str, namesrv: str | None = None, *, namespace: str | None = None,
                 instance: ClientInstance | None = None, config: ClientConfig | None = None) -> None:
        check_group(group)
        self.instance, self._own = resolve_instance(namesrv, instance, config)
        self.namespace = namespace
        self.impl = ConsumerImpl(ns.wrap(namespace, group), self.instance, push=False, namespace=namespace)

    def _start(self) -> None:
        self.instance.start()
        self.instance.consumers[self.impl.group] = self.impl
        self.impl.running = True

    def _shutdown(self) -> None:
        with contextlib.suppress(Exception):
            self.instance.run(self.impl.offset_store.persist_all(set(self.impl.offset_store.table), False), 10)
        self.instance.consumers.pop(self.impl.group, None)
        self.instance.shutdown()

    def _mq(self, mq: MessageQueue) -> MessageQueue:
        return MessageQueue(ns.wrap(self.namespace, mq.topic), mq.broker_name, mq.queue_id)

    def fetch_subscribe_message_queues(self, topic: str) -> list[MessageQueue]:
        route = self.instance.run(self.instance.update_route(ns.wrap(self.namespace, topic)))
        if route is None:
            raise ClientError(f"Can not find Message Queue for this topic, {topic}")
        return [MessageQueue(topic, q.broker_name, q.queue_id) for q in subscribe_queues(route, topic)]

    def pull(self, mq: MessageQueue, expression: str = "*", offset: int = 0, max_nums: int = 32, *,
             expression_type: str = TAG, block: bool = False, timeout: float = 10.0) -> PullResult:
        """One PULL_MESSAGE; `block=True` lets the broker hold it until a message arrives (`timeout`)."""
        mq = self._mq(mq)
        sub = build(mq.topic, expression, expression_type)
        suspend_ms = int(timeout * 1000)
        flag = build_sys_flag(False, block, True)
        result = self.instance.run(pull_kernel(self.instance, self.impl.group, mq, sub, offset, max_nums, flag, 0,
                                               suspend_ms, timeout + 5 if block else timeout))
        for m in result.messages:
            m.topic = ns.unwrap(self.namespace, m.topic)
        return result

    def pull_block_if_not_found(self, mq: MessageQueue, expression: str = "*", offset: int = 0,
                                max_nums: int = 32, timeout: float = 20.0) -> PullResult:
        return self.pull(mq, expression, offset, max_nums, block=True, timeout=timeout)

    def fetch_consume_offset(self, mq: MessageQueue) -> int:
        """The group's committed offset, -1 if there is none."""
        return self.instance.run(self.impl.offset_store.read(self._mq(mq)))

    def update_consume_offset(self, mq: MessageQueue, offset: int, *, persist: bool = True) -> None:
        mq = self._mq(mq)
        self.impl.offset_store.update(mq, offset, False)
        if persist:
            self.instance.run(self.impl.offset_store.persist(mq))

    def min_offset(self, mq: MessageQueue) -> int:
        return self.instance.run(query_offset(self.instance, RequestCode.GET_MIN_OFFSET, self._mq(mq)))

    def max_offset(self, mq: MessageQueue) -> int:
        return self.instance.run(query_offset(self.instance, RequestCode.GET_MAX_OFFSET, self._mq(mq)))

    def search_offset(self, mq: MessageQueue, timestamp_ms: int) -> int:
        return self.instance.run(query_offset(self.instance, RequestCode.SEARCH_OFFSET_BY_TIMESTAMP, self._mq(mq),
                                              {"timestamp": timestamp_ms}))
