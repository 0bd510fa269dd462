"""`Producer` and `TransactionProducer` (protocol.md §4.1, §4.10, §7.1, §7.2).

`ProducerImpl` runs on the client loop (`DefaultMQProducerImpl`); `Producer` is its synchronous
face: `send` blocks, `send_async` returns a `concurrent.futures.Future`, `send_oneway` returns at
once, and every one of them has an `a...` coroutine twin for code already on the client loop.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import logging
import time
from collections.abc import Callable, Iterable, Sequence
from typing import Any, Protocol

from rmqtool.client import namespace as ns
from rmqtool.client.batch import encode_messages
from rmqtool.client.exceptions import BrokerError, ClientError, response_header
from rmqtool.client.fault import MQFaultStrategy, TopicPublishInfo
from rmqtool.client.instance import ClientConfig, ClientInstance, resolve_instance
from rmqtool.client.lifecycle import ClientLifecycle
from rmqtool.client.message import LocalTransactionState, Message, MessageQueue, SendResult, SendStatus
from rmqtool.client.reply import RequestTimeoutError, is_reply
from rmqtool.client.route import (
    TopicRouteData,
    broker_addr_table,
    publish_info,
    with_default_topic_queue_nums,
)
from rmqtool.client.transaction_check import TX_FLAG
from rmqtool.errors import InvalidMessage, RemotingError
from rmqtool.layouts import properties as P
from rmqtool.layouts.constants import (
    AUTO_CREATE_TOPIC_KEY,
    DEFAULT_MAX_MESSAGE_SIZE,
    RETRY_GROUP_TOPIC_PREFIX,
    TRANSACTION_PREPARED_TYPE,
)
from rmqtool.layouts.javahash import hashmap_order, java_string_hash
from rmqtool.layouts.message import MessageExt, compress_body
from rmqtool.layouts.msgid import UniqKeyFactory, decode_offset_msg_id
from rmqtool.remoting.codes import RequestCode, ResponseCode
from rmqtool.remoting.command import RemotingCommand
from rmqtool.remoting.headers import (
    EndTransactionRequestHeader,
    SendMessageRequestHeader,
    SendMessageResponseHeader,
)
from rmqtool.validators import check_body, check_group, check_properties, check_send_topic

log = logging.getLogger("rmqtool.client")

# DefaultMQProducer.retryResponseCodes: broker answers a sync send retries on another queue
RETRY_RESPONSE_CODES = frozenset({ResponseCode.TOPIC_NOT_EXIST, ResponseCode.SERVICE_NOT_AVAILABLE,
                                  ResponseCode.SYSTEM_ERROR, ResponseCode.NO_PERMISSION,
                                  ResponseCode.NO_BUYER_ID, ResponseCode.NOT_IN_CURRENT_UNIT})
_STATUS_BY_CODE = {ResponseCode.SUCCESS: SendStatus.SEND_OK,
                   ResponseCode.FLUSH_DISK_TIMEOUT: SendStatus.FLUSH_DISK_TIMEOUT,
                   ResponseCode.FLUSH_SLAVE_TIMEOUT: SendStatus.FLUSH_SLAVE_TIMEOUT,
                   ResponseCode.SLAVE_NOT_AVAILABLE: SendStatus.SLAVE_NOT_AVAILABLE}
_uniq_keys: dict[str, UniqKeyFactory] = {}

MessageQueueSelector = Callable[[Sequence[MessageQueue], Message, Any], MessageQueue]


def select_by_hash(mqs: Sequence[MessageQueue], msg: Message, arg: Any) -> MessageQueue:
    """`SelectMessageQueueByHash`: `abs(arg.hashCode() % n)`, Java's hash for strings."""
    h = java_string_hash(arg) if isinstance(arg, str) else hash(arg)
    return mqs[abs(int(h)) % len(mqs)]  # Java: value = h % n, then abs() if negative


def uniq_key_factory(ip: str) -> UniqKeyFactory:
    f = _uniq_keys.get(ip)
    if f is None:
        f = _uniq_keys[ip] = UniqKeyFactory(ip)
    return f


def _java_props_order(props: dict[str, str]) -> dict[str, str]:
    """Properties in the order a Java `Message`'s HashMap would emit them."""
    return {k: props[k] for k in hashmap_order(list(props), 16)}


class ProducerImpl:
    """The producer's state on the client loop."""

    def __init__(self, group: str, instance: ClientInstance, *, namespace: str | None = None,
                 send_msg_timeout: float = 3.0, retry_times_when_send_failed: int = 2,
                 retry_times_when_send_async_failed: int = 2,
                 retry_another_broker_when_not_store_ok: bool = False,
                 compress_msg_body_over_howmuch: int = 4096, compress_level: int = 5,
                 max_message_size: int = DEFAULT_MAX_MESSAGE_SIZE, default_topic_queue_nums: int = 4,
                 create_topic_key: str = AUTO_CREATE_TOPIC_KEY,
                 fault_strategy: MQFaultStrategy | None = None) -> None:
        self.group = group
        self.instance = instance
        self.namespace = namespace
        self.send_msg_timeout = send_msg_timeout
        self.retry_times_when_send_failed = retry_times_when_send_failed
        self.retry_times_when_send_async_failed = retry_times_when_send_async_failed
        self.retry_another_broker_when_not_store_ok = retry_another_broker_when_not_store_ok
        self.compress_over = compress_msg_body_over_howmuch
        self.compress_level = compress_level
        self.max_message_size = max_message_size
        self.default_topic_queue_nums = default_topic_queue_nums
        self.create_topic_key = create_topic_key
        self.fault = fault_strategy or MQFaultStrategy()
        self.publish_info: dict[str, TopicPublishInfo] = {}
        self.uniq = uniq_key_factory(instance.client_ip)
        self.transaction_listener: TransactionListener | None = None
        self.check_executor: concurrent.futures.ThreadPoolExecutor | None = None
        self.tries = 0  # every attempt put on the wire, for tests and figures

    # ---- routes ----------------------------------------------------------------------------------
    def topics_in_use(self) -> set[str]:
        return set(self.publish_info)

    def on_route(self, topic: str, route: TopicRouteData) -> None:
        if topic in self.publish_info:
            old = self.publish_info[topic]
            info = publish_info(route, topic)
            info.send_which_queue = old.send_which_queue
            self.publish_info[topic] = info

    async def find_publish_info(self, topic: str) -> TopicPublishInfo:
        """`tryToFindTopicPublishInfo`: cache, name server, then the TBW102 route for auto-creation."""
        info = self.publish_info.get(topic)
        if info is not None and info.ok():
            return info
        route = await self.instance.fetch_route(topic)
        if route is not None:
            info = publish_info(route, topic)
            if info.ok():
                self.publish_info[topic] = info
                self.instance.set_route(topic, route)
                return info
        default = await self.instance.fetch_route(self.create_topic_key)
        if default is not None:
            route = with_default_topic_queue_nums(default, self.default_topic_queue_nums)
            info = publish_info(route, topic)
            if info.ok():
                info.have_topic_router_info = False
                self.publish_info[topic] = info
                for name, addrs in broker_addr_table(route).items():
                    self.instance.broker_addrs[name] = addrs
                return info
        raise ClientError(f"No route info of this topic: {topic}")

    # ---- preparing a message ---------------------------------------------------------------------
    def prepare(self, msg: Message) -> Message:
        msg.topic = ns.wrap(self.namespace, msg.topic)
        check_send_topic(msg.topic, strict=False)  # Validators.checkMessage, as the Java client checks
        check_body(msg.body, self.max_message_size)
        check_properties(msg.properties)
        if P.UNIQ_KEY not in msg.properties:
            msg.properties[P.UNIQ_KEY] = self.uniq.create()
        return msg

    def request_header(self, msg: Message, mq: MessageQueue, sys_flag: int, props: dict[str, str],
                       batch: bool = False) -> dict[str, str]:
        """SendMessageRequestHeaderV2 (letters a..n); retry topics carry the counters in j / l."""
        props = dict(props)
        reconsume_times, max_reconsume_times = 0, None
        if msg.topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
            reconsume_times = int(props.pop(P.RECONSUME_TIME, "0") or 0)
            mrt = props.pop(P.MAX_RECONSUME_TIMES, None)
            max_reconsume_times = int(mrt) if mrt is not None else None
        header = SendMessageRequestHeader(
            producerGroup=self.group, topic=msg.topic, defaultTopic=self.create_topic_key,
            defaultTopicQueueNums=self.default_topic_queue_nums, queueId=mq.queue_id, sysFlag=sys_flag,
            bornTimestamp=int(time.time() * 1000), flag=msg.flag,
            properties=P.encode_properties(_java_props_order(props)), reconsumeTimes=reconsume_times,
            unitMode=False, batch=batch, maxReconsumeTimes=max_reconsume_times, brokerName=mq.broker_name)
        return header.to_v2_ext()

    def build_request(self, msg: Message, mq: MessageQueue, batch_body: bytes | None) -> RemotingCommand:
        """`sendKernelImpl`: compression, transaction flag, V2 header; batches go as code 320."""
        if batch_body is not None:
            header = self.request_header(msg, mq, 0, msg.properties, batch=True)
            return RemotingCommand.request(RequestCode.SEND_BATCH_MESSAGE, header, batch_body)
        body, sys_flag = msg.body, 0
        if len(body) >= self.compress_over:
            body, bits = compress_body(body, "zlib", self.compress_level)
            sys_flag |= bits
        if msg.properties.get(P.TRAN_MSG) == "true":
            sys_flag |= TRANSACTION_PREPARED_TYPE
        header = self.request_header(msg, mq, sys_flag, msg.properties)
        if is_reply(msg.properties):  # MQClientAPIImpl.sendMessage: a reply goes as SEND_REPLY_MESSAGE_V2
            return RemotingCommand.request(RequestCode.SEND_REPLY_MESSAGE_V2, header, body)
        return RemotingCommand.request(RequestCode.SEND_MESSAGE_V2, header, body)

    # ---- one try ---------------------------------------------------------------------------------
    async def send_kernel(self, msg: Message, mq: MessageQueue, batch_body: bytes | None = None,
                          uniq_ids: str | None = None, timeout: float | None = None,
                          oneway: bool = False) -> SendResult | None:
        addr = self.instance.master_addr(mq.broker_name)
        if addr is None:
            await self.instance.update_route(msg.topic)
            addr = self.instance.master_addr(mq.broker_name)
            if addr is None:
                raise ClientError(f"The broker[{mq.broker_name}] not exist")
        req = self.build_request(msg, mq, batch_body)
        self.tries += 1
        if oneway:
            await self.instance.invoke_oneway(addr, req)
            return None
        resp = await self.instance.invoke(addr, req, timeout or self.send_msg_timeout)
        return self.process_send_response(resp, msg, mq, addr, uniq_ids)

    def process_send_response(self, resp: RemotingCommand, msg: Message, mq: MessageQueue, addr: str,
                              uniq_ids: str | None) -> SendResult:
        status = _STATUS_BY_CODE.get(resp.code)
        if status is None:
            raise BrokerError(resp.code, resp.remark, addr)
        h = response_header(resp, SendMessageResponseHeader, addr, "send")
        topic = ns.unwrap(self.namespace, msg.topic)
        return SendResult(status, uniq_ids or msg.properties.get(P.UNIQ_KEY, ""), h.msgId,
                          MessageQueue(topic, mq.broker_name, h.queueId), h.queueOffset,
                          h.transactionId, resp.ext_fields.get("MSG_REGION"))

    # ---- the send loop ---------------------------------------------------------------------------
    async def send(self, msg: Message, *, mode: str = "sync", timeout: float | None = None,
                   batch_body: bytes | None = None, uniq_ids: str | None = None) -> SendResult | None:
        """`sendDefaultImpl`: choose a queue, try, retry on another broker as Java does."""
        timeout = self.send_msg_timeout if timeout is None else timeout
        begin = time.monotonic()
        info = await self.find_publish_info(msg.topic)
        if mode == "sync":
            times_total = 1 + self.retry_times_when_send_failed
        elif mode == "async":
            times_total = 1 + self.retry_times_when_send_async_failed
        else:
            times_total = 1
        last_broker: str | None = None
        brokers_sent: list[str] = []
        last_exc: Exception | None = None
        result: SendResult | None = None
        for _ in range(times_total):
            mq = self.fault.select_one_message_queue(info, last_broker)
            last_broker = mq.broker_name
            spent = time.monotonic() - begin
            if spent >= timeout:
                last_exc = last_exc or ClientError(f"send timed out after {spent * 1000:.0f}ms")
                break
            brokers_sent.append(mq.broker_name)
            t0 = time.monotonic()
            try:
                result = await self.send_kernel(msg, mq, batch_body, uniq_ids, timeout - spent,
                                                oneway=(mode == "oneway"))
                self.fault.update_fault_item(mq.broker_name, int((time.monotonic() - t0) * 1000), False)
                if (mode == "sync" and result is not None and result.status != SendStatus.SEND_OK
                        and self.retry_another_broker_when_not_store_ok):
                    continue
                return result
            except BrokerError as e:
                self.fault.update_fault_item(mq.broker_name, int((time.monotonic() - t0) * 1000), True)
                last_exc = e
                # async sends retry on network failures only; sync on the retry codes
                if mode == "sync" and e.code in RETRY_RESPONSE_CODES:
                    await self._refresh_after_failure(msg.topic)
                    continue
                raise
            except (RemotingError, OSError) as e:
                self.fault.update_fault_item(mq.broker_name, int((time.monotonic() - t0) * 1000), True)
                last_exc = e
                await self._refresh_after_failure(msg.topic)
                continue
        if result is not None:
            return result
        spent_ms = (time.monotonic() - begin) * 1000
        raise ClientError(f"Send [{len(brokers_sent)}] times, still failed, cost [{spent_ms:.0f}]ms, "
                          f"Topic: {msg.topic}, BrokersSent: {brokers_sent}: {last_exc}") from last_exc

    async def _refresh_after_failure(self, topic: str) -> None:
        with contextlib.suppress(RemotingError):
            await self.instance.update_route(topic)

    async def send_to_queue(self, msg: Message, mq: MessageQueue, *, timeout: float | None = None,
                            oneway: bool = False, batch_body: bytes | None = None,
                            uniq_ids: str | None = None) -> SendResult | None:
        """A send to one chosen queue: one try, as Java's `send(msg, mq)` and selector sends."""
        mq = MessageQueue(ns.wrap(self.namespace, mq.topic), mq.broker_name, mq.queue_id)
        if self.instance.master_addr(mq.broker_name) is None:
            await self.find_publish_info(msg.topic)
        t0 = time.monotonic()
        try:
            result = await self.send_kernel(msg, mq, batch_body, uniq_ids, timeout, oneway)
        except RemotingError:
            self.fault.update_fault_item(mq.broker_name, int((time.monotonic() - t0) * 1000), True)
            raise
        self.fault.update_fault_item(mq.broker_name, int((time.monotonic() - t0) * 1000), False)
        return result

    async def send_select(self, msg: Message, selector: MessageQueueSelector, arg: Any, *,
                          timeout: float | None = None, oneway: bool = False) -> SendResult | None:
        info = await self.find_publish_info(msg.topic)
        mqs = [MessageQueue(ns.unwrap(self.namespace, q.topic), q.broker_name, q.queue_id) for q in info.queues]
        mq = selector(mqs, msg, arg)
        return await self.send_to_queue(msg, mq, timeout=timeout, oneway=oneway)

    def batch(self, msgs: Iterable[Message]) -> tuple[Message, bytes, str]:
        """`MessageBatch.generateFromList` + `encode`: checks, UNIQ_KEYs, the 320 body."""
        msgs = list(msgs)
        if not msgs:
            raise InvalidMessage("a batch needs at least one message")
        first = msgs[0]
        for m in msgs:
            if int(m.properties.get(P.DELAY, "0") or 0) > 0:
                raise InvalidMessage("TimeDelayLevel is not supported for batching")
            if m.topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
                raise InvalidMessage("Retry Group is not supported for batching")
            if m.topic != first.topic:
                raise InvalidMessage("The topic of the messages in one batch should be the same")
            if m.properties.get(P.WAIT, "true") != first.properties.get(P.WAIT, "true"):
                raise InvalidMessage("The waitStoreMsgOK of the messages in one batch should the same")
            self.prepare(m)
        body = encode_messages([(m.flag, m.body, _java_props_order(m.properties)) for m in msgs])
        if len(body) > self.max_message_size:
            raise InvalidMessage(f"the message body size over max value, MAX: {self.max_message_size}")
        carrier = Message(first.topic, body)
        if P.WAIT in first.properties:
            carrier.properties[P.WAIT] = first.properties[P.WAIT]
        return carrier, body, ",".join(m.properties[P.UNIQ_KEY] for m in msgs)


class TransactionListener(Protocol):
    """What a `TransactionProducer` calls: run the local transaction; answer the broker's check."""

    def execute_local_transaction(self, msg: Message, arg: Any) -> LocalTransactionState: ...

    def check_local_transaction(self, msg: Any) -> LocalTransactionState: ...


class Producer(ClientLifecycle):
    """A RocketMQ producer speaking the remoting protocol, usable from plain (threaded) code.

    >>> with Producer("pg", "127.0.0.1:9876") as p:
    ...     p.send(Message("TopicTest", b"hello", tags="TagA"))
    """

    def __init__(self, group: str = "DEFAULT_PRODUCER", namesrv: str | None = None, *,
                 namespace: str | None = None, send_msg_timeout: float = 3.0,
                 retry_times_when_send_failed: int = 2, retry_times_when_send_async_failed: int = 2,
                 retry_another_broker_when_not_store_ok: bool = False,
                 compress_msg_body_over_howmuch: int = 4096, max_message_size: int = DEFAULT_MAX_MESSAGE_SIZE,
                 send_latency_fault_enable: bool = False, default_topic_queue_nums: int = 4,
                 instance: ClientInstance | None = None, config: ClientConfig | None = None) -> None:
        check_group(group)
        self.instance, self._own_instance = resolve_instance(namesrv, instance, config)
        self.impl = ProducerImpl(
            ns.wrap(namespace, group), self.instance, namespace=namespace, send_msg_timeout=send_msg_timeout,
            retry_times_when_send_failed=retry_times_when_send_failed,
            retry_times_when_send_async_failed=retry_times_when_send_async_failed,
            retry_another_broker_when_not_store_ok=retry_another_broker_when_not_store_ok,
            compress_msg_body_over_howmuch=compress_msg_body_over_howmuch, max_message_size=max_message_size,
            default_topic_queue_nums=default_topic_queue_nums,
            fault_strategy=MQFaultStrategy(send_latency_fault_enable))

    @property
    def group(self) -> str:
        return self.impl.group

    def _start(self) -> None:
        if self.impl.group in self.instance.producers:
            raise ClientError(f"The producer group[{self.impl.group}] has been created before")
        self.instance.start()
        self.instance.producers[self.impl.group] = self.impl

    def _shutdown(self) -> None:
        with contextlib.suppress(Exception):
            self.instance.run(self.instance.unregister_client(self.impl.group, None), timeout=5)
        self.instance.producers.pop(self.impl.group, None)
        self.instance.shutdown()

    def _check(self) -> None:
        if not self._started:
            raise ClientError("The producer service state not OK, maybe started once, RUNNING or not started")

    # ---- coroutines (client loop) ----------------------------------------------------------------
    async def asend(self, msg: Message, *, queue: MessageQueue | None = None,
                    selector: MessageQueueSelector | None = None, arg: Any = None,
                    sharding_key: str | None = None, timeout: float | None = None) -> SendResult:
        self.impl.prepare(msg)
        if sharding_key is not None:
            selector, arg = select_by_hash, sharding_key
            msg.properties[P.SHARDING_KEY] = sharding_key
        if queue is not None:
            r = await self.impl.send_to_queue(msg, queue, timeout=timeout)
        elif selector is not None:
            r = await self.impl.send_select(msg, selector, arg, timeout=timeout)
        else:
            r = await self.impl.send(msg, mode="sync", timeout=timeout)
        assert r is not None
        return r

    async def asend_batch(self, msgs: Iterable[Message], *, queue: MessageQueue | None = None,
                          timeout: float | None = None) -> SendResult:
        carrier, body, ids = self.impl.batch(msgs)
        if queue is not None:
            r = await self.impl.send_to_queue(carrier, queue, timeout=timeout, batch_body=body, uniq_ids=ids)
        else:
            r = await self.impl.send(carrier, mode="sync", timeout=timeout, batch_body=body, uniq_ids=ids)
        assert r is not None
        return r

    async def arequest(self, msg: Message, *, timeout: float = 3.0, queue: MessageQueue | None = None) -> MessageExt:
        """`request(msg, timeout)`: send `msg` and wait for the reply a consumer sends with
        `create_reply_message`; RequestTimeoutError when none comes within `timeout` seconds."""
        self.impl.prepare(msg)
        futures = self.instance.request_futures
        correlation, fut = futures.prepare(msg, self.instance.client_id, timeout)
        begin = time.monotonic()
        try:
            if queue is not None:
                await self.impl.send_to_queue(msg, queue, timeout=timeout)
            else:
                await self.impl.send(msg, mode="sync", timeout=timeout)
            left = timeout - (time.monotonic() - begin)
            try:
                return await asyncio.wait_for(fut, max(0.001, left))
            except asyncio.TimeoutError:
                raise RequestTimeoutError(f"send request message to <{msg.topic}> OK, but wait reply message "
                                          f"timeout, {int(timeout * 1000)} ms.") from None
        finally:
            futures.forget(correlation)

    # ---- blocking API ----------------------------------------------------------------------------
    def request(self, msg: Message, *, timeout: float = 3.0, queue: MessageQueue | None = None) -> MessageExt:
        """Request-reply (blocking): the reply message, or RequestTimeoutError."""
        self._check()
        return self.instance.run(self.arequest(msg, timeout=timeout, queue=queue), timeout=timeout + 5)

    def send(self, msg: Message, *, queue: MessageQueue | None = None,
             selector: MessageQueueSelector | None = None, arg: Any = None,
             sharding_key: str | None = None, timeout: float | None = None) -> SendResult:
        """Sync send with retries (1 + retry_times_when_send_failed tries), or to a chosen queue."""
        self._check()
        return self.instance.run(self.asend(msg, queue=queue, selector=selector, arg=arg,
                                            sharding_key=sharding_key, timeout=timeout))

    def send_async(self, msg: Message, callback: Callable[[SendResult | None, BaseException | None], None]
                   | None = None, *, timeout: float | None = None) -> concurrent.futures.Future[SendResult]:
        """Async send: retries only on network failures; `callback(result, error)` runs on the client loop."""
        self._check()
        self.impl.prepare(msg)
        fut = self.instance.submit(self.impl.send(msg, mode="async", timeout=timeout))
        if callback is not None:
            fut.add_done_callback(lambda f: callback(None if f.exception() else f.result(), f.exception()))
        return fut  # type: ignore[return-value]

    def send_oneway(self, msg: Message, *, queue: MessageQueue | None = None) -> None:
        """Fire and forget: one try, no response."""
        self._check()
        self.impl.prepare(msg)
        if queue is not None:
            self.instance.run(self.impl.send_to_queue(msg, queue, oneway=True))
        else:
            self.instance.run(self.impl.send(msg, mode="oneway"))

    def send_batch(self, msgs: Iterable[Message], *, queue: MessageQueue | None = None,
                   timeout: float | None = None) -> SendResult:
        """One SEND_BATCH_MESSAGE: same topic, no delay, no retry topic, at most max_message_size."""
        self._check()
        return self.instance.run(self.asend_batch(msgs, queue=queue, timeout=timeout))

    def fetch_publish_message_queues(self, topic: str) -> list[MessageQueue]:
        self._check()
        info = self.instance.run(self.impl.find_publish_info(ns.wrap(self.impl.namespace, topic)))
        return [MessageQueue(topic, q.broker_name, q.queue_id) for q in info.queues]

    @property
    def fault_strategy(self) -> MQFaultStrategy:
        return self.impl.fault


class TransactionProducer(Producer):
    """Half message, local transaction, END_TRANSACTION; answers the broker's check-backs."""

    def __init__(self, group: str, namesrv: str | None = None, *, listener: TransactionListener,
                 check_thread_pool_size: int = 1, **kwargs: Any) -> None:
        super().__init__(group, namesrv, **kwargs)
        self.impl.transaction_listener = listener
        self.impl.check_executor = concurrent.futures.ThreadPoolExecutor(check_thread_pool_size,
                                                                         thread_name_prefix="rmq-tx-check")

    def shutdown(self) -> None:
        super().shutdown()
        if self.impl.check_executor is not None:
            self.impl.check_executor.shutdown(wait=False)

    def send_message_in_transaction(self, msg: Message, arg: Any = None) -> tuple[SendResult, LocalTransactionState]:
        """`sendMessageInTransaction`: returns the half message's SendResult and the local state sent."""
        self._check()
        listener = self.impl.transaction_listener
        assert listener is not None
        if int(msg.properties.get(P.DELAY, "0") or 0) > 0:
            msg.properties.pop(P.DELAY)  # Java clears the delay of transactional messages
        msg.properties[P.TRAN_MSG] = "true"
        msg.properties[P.PGROUP] = self.impl.group
        result = self.send(msg)
        state = LocalTransactionState.UNKNOW
        error: BaseException | None = None
        if result.status == SendStatus.SEND_OK:
            if result.transaction_id:
                msg.properties[P.TRANSACTION_ID] = result.transaction_id
            msg.transaction_id = msg.properties.get(P.UNIQ_KEY) or msg.transaction_id
            try:
                state = LocalTransactionState(listener.execute_local_transaction(msg, arg)
                                              or LocalTransactionState.UNKNOW)
            except Exception as e:  # Java logs it and leaves the state UNKNOW (the broker will check)
                error = e
        else:
            state = LocalTransactionState.ROLLBACK_MESSAGE
        self.instance.run(self._end_transaction(result, msg, state, error))
        return result, state

    async def _end_transaction(self, result: SendResult, msg: Message, state: LocalTransactionState,
                               error: BaseException | None) -> None:
        off = decode_offset_msg_id(result.offset_msg_id) if result.offset_msg_id else None
        addr = self.instance.master_addr(result.message_queue.broker_name)
        if addr is None or off is None:
            raise ClientError("cannot end the transaction: no broker address or offset msgId")
        header = EndTransactionRequestHeader(
            producerGroup=self.impl.group, tranStateTableOffset=result.queue_offset,
            commitLogOffset=off.commit_log_offset, commitOrRollback=TX_FLAG[state], msgId=result.msg_id,
            fromTransactionCheck=False, transactionId=msg.transaction_id, topic=msg.topic)
        req = RemotingCommand.request(RequestCode.END_TRANSACTION, header.to_ext(), oneway=True)
        if error is not None:
            req.remark = f"executeLocalTransactionBranch exception: {error}"
        await self.instance.invoke_oneway(addr, req)
