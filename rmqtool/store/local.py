"""`LocalBroker`: everything a RocketMQ broker does around its MessageStore that is not network.

The send path is `SendMessageProcessor` without the socket: validation (Validators /
TopicValidator / msgCheck), topic auto-creation from TBW102, retry-topic messages over their
max reconsume times redirected to the DLQ (`handleRetryAndDLQ`), a broker-made UNIQ_KEY when the
client gave none, the CLUSTER property, properties in the 5.1+ broker's HashMap(128) order, then
`MessageStore.put_message` (whose put hooks do the delay/timer rewrites, HookUtils).
`consumer_send_back` is `AbstractSendMessageProcessor.consumerSendMsgBack`, `pull` is the
broker's tag-code filter plus the client's re-check of the tag strings (`PullAPIWrapper`).

Background work (delay levels, timer wheel, file expiry) are `Service`s in `.services`: the
embedded `consume` calls `run_due(now_ms)` in its loop, `serve` calls `start()` / `stop()`.
"""

from __future__ import annotations

import dataclasses
import importlib
import random
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from rmqtool.errors import InvalidInput, InvalidMessage, InvalidTopic, StoreError
from rmqtool.layouts import properties as P
from rmqtool.layouts.constants import AUTO_CREATE_TOPIC_KEY, DLQ_GROUP_TOPIC_PREFIX, RETRY_GROUP_TOPIC_PREFIX
from rmqtool.layouts.javahash import java_string_hash
from rmqtool.layouts.message import MessageExt
from rmqtool.layouts.msgid import UniqKeyFactory
from rmqtool.layouts.net import Host
from rmqtool.store.batchput import BatchPutResult
from rmqtool.store.jsonconfig import ConfigWriter
from rmqtool.store.offsets import ConsumerOffsetManager
from rmqtool.store.sendbatch import send_batch_body, send_bodies, send_records
from rmqtool.store.subscriptions import SubscriptionGroupManager
from rmqtool.store.topics import PERM_READ, PERM_WRITE, TopicConfig, TopicConfigManager
from rmqtool.validators import (
    SYSTEM_TOPIC_PREFIX,
    check_body,
    check_group,
    check_message,
    check_properties,
    check_send_topic,
    check_topic,
)

UNIQ_KEY, CLUSTER = P.UNIQ_KEY, P.CLUSTER
_CQ_BLANK_SIZE = 0x7FFFFFFF  # ConsumeQueue filler unit (fillPreBlank)
DLQ_NUMS_PER_GROUP = 1
SUB_ALL = "*"
CLEAN_RESOURCE_INTERVAL_MS = 10_000  # MessageStoreConfig.cleanResourceInterval
CLEAN_INITIAL_DELAY_MS = 60_000  # DefaultMessageStore.addScheduleTask: first clean 1 min after start


# -- services ----------------------------------------------------------------------------------
@runtime_checkable
class Service(Protocol):
    """A background job of the broker: delay-level delivery, the timer wheel, file expiry."""

    name: str

    def run_due(self, now_ms: int) -> int:
        """Do what is due at `now_ms` (deliver due messages...); return how many things it did."""
        ...

    def start(self) -> None:
        """Run in the background (a thread) until `stop()`."""
        ...

    def stop(self) -> None:
        ...


class PeriodicService:
    """A `Service` that calls `fn(now_ms)` every `interval_ms` on a thread, or on demand via run_due."""

    def __init__(self, name: str, fn: Callable[[int], int | None], interval_ms: int,
                 clock: Callable[[], int] | None = None, *, min_gap_ms: int = 0,
                 initial_delay_ms: int | None = None) -> None:
        self.name = name
        self._fn = fn
        self.interval_ms = interval_ms
        self._clock = clock or (lambda: int(time.time() * 1000))
        self._min_gap_ms = min_gap_ms
        # run_due does nothing before `initial_delay_ms` has passed since creation
        self._last = -(1 << 62) if initial_delay_ms is None else self._clock() + initial_delay_ms - min_gap_ms
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def run_due(self, now_ms: int) -> int:
        with self._lock:
            if now_ms - self._last < self._min_gap_ms:
                return 0
            self._last = now_ms
            return int(self._fn(now_ms) or 0)

    def _loop(self) -> None:
        while not self._stop.wait(self.interval_ms / 1000):
            try:
                self.run_due(self._clock())
            except Exception:  # a background job must not die silently of one bad round
                import logging

                logging.getLogger("rmqtool").exception("service %s failed", self.name)

    def start(self) -> None:
        if self._thread is None:
            self._stop.clear()
            self._thread = threading.Thread(target=self._loop, name=f"rmqtool-{self.name}", daemon=True)
            self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None


# Factories that give a freshly opened broker its services: `factory(broker)` may register put
# hooks on broker.store and returns (or appends to broker.services) its Service objects.
# SERVICE_PLUGINS names "module:function" factories imported on open: the delay-level and timer
# delivery of rmqtool.store.timer.
ServiceFactory = Callable[["LocalBroker"], "Iterable[Service] | Service | None"]
SERVICE_FACTORIES: list[ServiceFactory] = []
SERVICE_PLUGINS: tuple[str, ...] = ("rmqtool.store.timer:attach",)


def register_service_factory(factory: ServiceFactory) -> ServiceFactory:
    """Add `factory`, called with every LocalBroker opened from now on."""
    if factory not in SERVICE_FACTORIES:
        SERVICE_FACTORIES.append(factory)
    return factory


def _plugin_factories() -> list[ServiceFactory]:
    out: list[ServiceFactory] = []
    for spec in SERVICE_PLUGINS:
        name, _, func = spec.partition(":")
        try:
            mod = importlib.import_module(name)
        except ModuleNotFoundError as e:
            if e.name is not None and name.startswith(e.name):
                continue
            raise
        attach = getattr(mod, func or "attach", None)
        if callable(attach):
            out.append(attach)
    return out


# -- subscriptions -----------------------------------------------------------------------------
@dataclass
class SubscriptionData:
    """`SubscriptionData` as `FilterAPI.buildSubscriptionData` makes it for a TAG expression."""

    topic: str
    sub_string: str = SUB_ALL
    tags_set: list[str] = field(default_factory=list)
    code_set: set[int] = field(default_factory=set)
    expression_type: str = "TAG"

    @classmethod
    def build(cls, topic: str, sub_string: str | None) -> SubscriptionData:
        if not sub_string or sub_string.strip() == SUB_ALL:
            return cls(topic)
        tags = [t.strip() for t in sub_string.split("||")]
        tags = list(dict.fromkeys(t for t in tags if t))
        if not tags:
            raise InvalidInput(f"tag expression {sub_string!r} names no tag")
        return cls(topic, sub_string, tags, {java_string_hash(t) for t in tags})

    @property
    def sub_all(self) -> bool:
        return self.sub_string == SUB_ALL or not self.tags_set

    def matches(self, msg: MessageExt) -> bool:
        """The client-side re-check (`PullAPIWrapper.processPullResult`): hash codes can collide."""
        return self.sub_all or (msg.tags is not None and msg.tags in self.tags_set)


def select_queue_by_hash(key: str, queue_nums: int) -> int:
    """`SelectMessageQueueByHash`: Java `abs(key.hashCode() % n)`: same key, same queue."""
    if queue_nums <= 0:
        raise InvalidInput("the topic has no writable queue")
    return abs(java_string_hash(key)) % queue_nums


# -- the broker --------------------------------------------------------------------------------
class LocalBroker:
    """A MessageStore with the broker's config managers and send/pull/send-back logic around it."""

    def __init__(self, store: Any, *, clock: Callable[[], int] | None = None, read_only: bool = False,
                 attach_services: bool = True) -> None:
        self.store = store
        self.config = store.config
        self.clock: Callable[[], int] = clock or getattr(store, "clock", None) or (lambda: int(time.time() * 1000))
        self.read_only = read_only
        cfg = self.config
        config_dir = Path(cfg.store_path_root_dir) / "config"
        self.topics = TopicConfigManager(
            config_dir, cluster=cfg.broker_cluster_name, broker_name=cfg.broker_name,
            default_topic_queue_nums=cfg.default_topic_queue_nums,
            auto_create_topic_enable=cfg.auto_create_topic_enable,
            timer_wheel_enable=getattr(cfg, "timer_wheel_enable", True), clock=self.clock)
        self.offsets = ConsumerOffsetManager(config_dir, clock=self.clock)
        self.subscriptions = SubscriptionGroupManager(config_dir, clock=self.clock)
        for manager in (self.topics, self.offsets, self.subscriptions):
            manager.load()
        self.store_host = Host(cfg.broker_ip1, cfg.listen_port)
        self.uniq_keys = UniqKeyFactory(cfg.broker_ip1)
        self._random = random.Random()
        self.services: list[Service] = []
        self.config_writer: ConfigWriter | None = None
        self._closed = False
        if not read_only:
            interval = int(getattr(store.config, "clean_resource_interval", CLEAN_RESOURCE_INTERVAL_MS))
            self.services.append(PeriodicService("clean-expired", self._clean_expired, interval, self.clock,
                                                 min_gap_ms=interval, initial_delay_ms=CLEAN_INITIAL_DELAY_MS))
            # the DISK_FULL flag every interval from the start: Java raises it only in the cleaning
            # round, whose first run is a minute after start; a broker started on a full disk (or
            # whose disk another process fills) should refuse puts before it runs out of blocks
            self.services.append(PeriodicService("disk-check", self._check_disk, interval, self.clock,
                                                 min_gap_ms=interval, initial_delay_ms=interval))
            if attach_services:
                for factory in [*_plugin_factories(), *SERVICE_FACTORIES]:
                    got = factory(self)
                    if got is None:
                        continue
                    for svc in [got] if isinstance(got, Service) else list(got):
                        if not any(svc is s for s in self.services):
                            self.services.append(svc)

    @classmethod
    def open(cls, root: str | Path, config: Any | None = None, *, clock: Callable[[], int] | None = None,
             read_only: bool = False) -> LocalBroker:
        """Open (or create) the store at `root`; StoreError / StoreLocked as MessageStore.open."""
        from rmqtool.store.messagestore import MessageStore

        store = MessageStore.open(root, config, clock=clock, read_only=read_only)
        try:
            return cls(store, clock=clock, read_only=read_only)
        except BaseException:
            store.close()
            raise

    def __enter__(self) -> LocalBroker:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _clean_expired(self, now_ms: int) -> int:
        result = self.store.clean_expired_files(now_ms)
        return int(result or 0) if isinstance(result, int) else 0

    def start_config_writer(self) -> ConfigWriter:
        """From now on topics, groups and offsets are written by a background thread (serve:
        no fsync on the event loop); `close` writes what is still pending."""
        if self.config_writer is None and not self.read_only:
            self.config_writer = ConfigWriter()
            self.config_writer.attach(self.topics, self.subscriptions, self.offsets)
            self.config_writer.start()
        assert self.config_writer is not None
        return self.config_writer

    def _check_disk(self, now_ms: int) -> int:
        check = getattr(self.store, "check_disk_space", None)
        if check is not None:
            check()
        return 0

    def run_due(self, now_ms: int | None = None) -> int:
        """Run every service once (embedded consumers call this instead of threads)."""
        now = self.clock() if now_ms is None else now_ms
        return sum(s.run_due(now) for s in self.services)

    # -- send -----------------------------------------------------------------------------------
    def _writable_topic(self, topic: str) -> TopicConfig:
        """msgCheck: the topic's config, created on first send; retry topics from the send-back path."""
        tc = self.topics.select(topic)
        if tc is None:
            if topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
                tc = self.topics.create_in_send_back(topic, 1, PERM_READ | PERM_WRITE)
            else:
                tc = self.topics.create_in_send(topic)
        if not tc.writeable:
            raise InvalidTopic(f"the topic[{topic}] sending message is forbidden (perm {tc.perm})")
        return tc

    def _prepare(self, msg: MessageExt, tc: TopicConfig) -> MessageExt:
        """The broker's changes to a client message before it is stored."""
        queue_nums = max(tc.write_queue_nums, tc.read_queue_nums)
        if msg.queue_id < 0:
            msg.queue_id = self._random.randrange(max(1, tc.write_queue_nums))
        elif msg.queue_id >= queue_nums:
            raise InvalidMessage(f"request queueId[{msg.queue_id}] is illegal, topic {msg.topic} has "
                                 f"{queue_nums} queues")
        props = dict(msg.properties)
        if msg.topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
            self._retry_to_dlq(msg, props)
        if not props.get(P.UNIQ_KEY):
            props[P.UNIQ_KEY] = self.uniq_keys.create(self.clock())
        props[P.CLUSTER] = self.config.broker_cluster_name
        msg.properties = P.broker_order(props, owned=True)
        if not msg.born_timestamp:
            msg.born_timestamp = self.clock()
        msg.store_host = self.store_host
        return msg

    def _retry_to_dlq(self, msg: MessageExt, props: dict[str, str]) -> None:
        """`handleRetryAndDLQ`: a retry-topic message past its group's max goes to `%DLQ%group`."""
        group = msg.topic[len(RETRY_GROUP_TOPIC_PREFIX):]
        sub = self.subscriptions.find(group)
        if sub is None:
            raise InvalidInput(f"subscription group not exist, {group}")
        max_times = int(props.get(P.MAX_RECONSUME_TIMES, sub.retry_max_times))
        if msg.reconsume_times > max_times:
            props[P.DELAY] = "-1"
            dlq = DLQ_GROUP_TOPIC_PREFIX + group
            self.topics.create_in_send_back(dlq, DLQ_NUMS_PER_GROUP, PERM_READ | PERM_WRITE)
            msg.topic = dlq
            msg.queue_id = self._random.randrange(DLQ_NUMS_PER_GROUP)

    def write_queue_nums(self, topic: str) -> int:
        """The topic's queue count, or the count a first send would create it with."""
        tc = self.topics.select(topic)
        if tc is not None:
            return tc.write_queue_nums
        if topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
            return 1
        tbw = self.topics.select(AUTO_CREATE_TOPIC_KEY)
        return min(self.topics.default_topic_queue_nums, tbw.write_queue_nums if tbw else 0)

    def check(self, msg: MessageExt) -> None:
        """Everything that can refuse a message without writing (used before `send`)."""
        check_message(msg, self.config.max_message_size)
        tc = self.topics.select(msg.topic)
        queue_nums = max(tc.write_queue_nums, tc.read_queue_nums) if tc else self.write_queue_nums(msg.topic)
        if msg.queue_id >= queue_nums:
            raise InvalidMessage(f"request queueId[{msg.queue_id}] is illegal, topic {msg.topic} has "
                                 f"{queue_nums} queues")
        if tc is None and not self.topics.auto_create_topic_enable and not msg.topic.startswith(
                RETRY_GROUP_TOPIC_PREFIX):
            raise InvalidTopic(f"topic[{msg.topic}] not exist, apply first please! (autoCreateTopicEnable is off)")

    def send(self, msg: MessageExt) -> Any:
        """Store one client message as a 5.x broker would; returns the store's PutResult."""
        self._check_writable()
        self.check(msg)
        tc = self._writable_topic(msg.topic)
        return self.store.put_message(self._prepare(msg, tc))

    def send_checked(self, msg: MessageExt) -> Any:
        """`send` for a caller that has made `SendMessageProcessor.msgCheck`'s checks and the
        size and queue checks the way `SendProcessor.process_send` makes them: the topic valid
        (`validateTopic`), not one of the not-allowed send topics, existing (auto-created
        there) and writable, the body within `max_message_size`, the queue id within the
        topic's queues. The checks of `check` those leave are made here, in its order and with
        its errors: rmqtool's own refusal of TBW102 and `rmq_sys_` topics, an empty body, the
        properties. A topic gone or made read-only since takes `send`, with every check.
        """
        self._check_writable()
        topic = msg.topic
        if topic == AUTO_CREATE_TOPIC_KEY or topic.startswith(SYSTEM_TOPIC_PREFIX):
            check_send_topic(topic)  # raises InvalidTopic, as in `check`
        check_body(msg.body, self.config.max_message_size)
        check_properties(msg.properties or {})
        tc = self.topics.select(topic)
        if tc is None or not tc.writeable:
            return self.send(msg)
        return self.store.put_message(self._prepare(msg, tc))

    def send_batch(self, msgs: list[MessageExt], *, checked: bool = False) -> list[Any]:
        """A batch send: checked as a whole first, then one `put_messages` (one lock, one flush).

        `checked=True` skips `check` for messages the caller already passed through it. Each
        message gets what `check` + `_writable_topic` + `_prepare` give it one by one; what
        depends only on the topic is worked out once per topic of the batch.
        """
        self._check_writable()
        if not checked:
            self._check_batch(msgs)
        prepared = []
        tcs: dict[str, tuple[int, int]] = {}
        cluster = self.config.broker_cluster_name
        store_host = self.store_host
        clock = self.clock
        randrange = self._random.randrange
        broker_order = P.broker_order
        for m in msgs:
            topic = m.topic
            if topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
                # may create a %DLQ% topic: the one-by-one path, and nothing cached survives it
                prepared.append(self._prepare(m, self._writable_topic(topic)))
                tcs.clear()
                continue
            nums = tcs.get(topic)
            if nums is None:
                tc = self._writable_topic(topic)
                nums = tcs[topic] = (tc.write_queue_nums, max(tc.write_queue_nums, tc.read_queue_nums))
            # `_prepare` for a topic that is not a retry topic
            if m.queue_id < 0:
                m.queue_id = randrange(max(1, nums[0]))
            elif m.queue_id >= nums[1]:
                raise InvalidMessage(f"request queueId[{m.queue_id}] is illegal, topic {topic} has "
                                     f"{nums[1]} queues")
            props = dict(m.properties)
            if not props.get(UNIQ_KEY):
                props[UNIQ_KEY] = self.uniq_keys.create(clock())
            props[CLUSTER] = cluster
            m.properties = broker_order(props, owned=True)
            if not m.born_timestamp:
                m.born_timestamp = clock()
            m.store_host = store_host
            prepared.append(m)
        return list(self.store.put_messages(prepared))

    def send_batch_body(self, topic: str, queue_id: int, body: bytes, batch_props: dict[str, str], sys_flag: int,
                        born_timestamp: int, born_host: Host, reconsume_times: int) -> BatchPutResult | None:
        """A SEND_BATCH_MESSAGE body stored as `send_batch` stores its decoded messages, without
        a MessageExt per message; None (nothing done) when it needs that path (sendbatch.py)."""
        return send_batch_body(self, topic, queue_id, body, batch_props, sys_flag, born_timestamp, born_host,
                               reconsume_times)

    def send_bodies(self, topic: str, queue_id: int, bodies: list[bytes], properties: dict[str, str],
                    uniq_keys: list[str], born_timestamp: int) -> BatchPutResult | None:
        """`send_batch` of one message per body, each with `properties` and its own UNIQ_KEY,
        without a MessageExt per body (sendbatch.py `send_bodies`); one result for the batch,
        or None (checked, nothing stored) when the caller must use `send_batch`."""
        return send_bodies(self, topic, queue_id, bodies, properties, uniq_keys, born_timestamp)

    def send_records(self, msgs: list[MessageExt]) -> BatchPutResult | None:
        """`send_batch(msgs, checked=True)` of one topic's messages packed from their fields (a
        queue per message), or None, nothing stored, when `send_batch` must (sendbatch.py)."""
        return send_records(self, msgs)

    def check_batch(self, msgs: list[MessageExt]) -> None:
        """What `send_batch` checks before it stores anything (then `send_batch(msgs, checked=True)`)."""
        self._check_writable()
        self._check_batch(msgs)

    def _check_batch(self, msgs: list[MessageExt]) -> None:
        """`check` of every message in order (same errors), the topic's part once per topic."""
        max_size = self.config.max_message_size
        topics: dict[str, tuple[int, bool]] = {}
        for m in msgs:
            topic = m.topic
            got = topics.get(topic)
            if got is None:
                check_send_topic(topic)
            check_body(m.body, max_size)
            check_properties(m.properties or {})
            if got is None:
                tc = self.topics.select(topic)
                queue_nums = max(tc.write_queue_nums, tc.read_queue_nums) if tc else self.write_queue_nums(topic)
                refused = tc is None and not self.topics.auto_create_topic_enable and not topic.startswith(
                    RETRY_GROUP_TOPIC_PREFIX)
                got = topics[topic] = (queue_nums, refused)
            if m.queue_id >= got[0]:
                raise InvalidMessage(f"request queueId[{m.queue_id}] is illegal, topic {topic} has "
                                     f"{got[0]} queues")
            if got[1]:
                raise InvalidTopic(f"topic[{topic}] not exist, apply first please! (autoCreateTopicEnable is off)")

    def _check_writable(self) -> None:
        if self.read_only:
            raise StoreError("the store was opened read-only")

    # -- pull -----------------------------------------------------------------------------------
    def pull(self, topic: str, queue_id: int, offset: int, max_msgs: int = 32, *,
             expr: str | SubscriptionData = SUB_ALL) -> Any:
        """`PullMessageProcessor` + the client's tag re-check: only messages the expression wants."""
        sub = expr if isinstance(expr, SubscriptionData) else SubscriptionData.build(topic, expr)
        if sub.sub_all:
            return self.store.get_message(topic, queue_id, offset, max_msgs)
        result = self.store.get_message(topic, queue_id, offset, max_msgs, tags_codes=set(sub.code_set))
        kept = [(m, r) for m, r in zip(result.messages, _raw_list(result), strict=False) if sub.matches(m)]
        if len(kept) != len(result.messages):
            msgs = [m for m, _ in kept]
            raw = [r for _, r in kept]
            if dataclasses.is_dataclass(result):
                changes: dict[str, Any] = {"messages": msgs}
                if hasattr(result, "raw"):
                    changes["raw"] = raw
                result = dataclasses.replace(result, **changes)
            else:
                result.messages = msgs
                if hasattr(result, "raw"):
                    result.raw = raw
        return result

    def pull_raw(self, topic: str, queue_id: int, offset: int, max_msgs: int = 256) -> tuple[list[bytes], int]:
        """The record bytes of up to `max_msgs` units from `offset`, and the next offset (no tag filter).

        The hot path of embedded `consume`: it reads ConsumeQueue units and CommitLog bytes
        directly, without decoding a MessageExt per message as `get_message` does.
        """
        cq = self.store.cqs.find(topic, queue_id)
        if cq is None:
            return [], offset
        lo, hi = cq.min_offset_in_queue, cq.max_offset_in_queue
        if offset < lo:
            offset = lo
        if offset >= hi:
            return [], offset
        read = self.store.commitlog.read_bytes
        cl_min = self.store.commitlog.min_offset
        out: list[bytes] = []
        units = cq.read_units(offset, min(max_msgs, hi - offset))
        for phys, size, _code in units:
            offset += 1
            if size == _CQ_BLANK_SIZE or phys < cl_min:
                continue
            raw = read(phys, size)
            if raw is not None:
                out.append(bytes(raw))
        return out, offset

    # -- retry / DLQ ----------------------------------------------------------------------------
    def consumer_send_back(self, group: str, commit_log_offset: int, delay_level: int = 0,
                           max_reconsume_times: int | None = None, origin_msg_id: str | None = None) -> Any:
        """`consumerSendMsgBack`: re-store a consumed message on `%RETRY%group` (or `%DLQ%group`)."""
        self._check_writable()
        check_group(group)
        sub = self.subscriptions.find(group)
        if sub is None:
            raise InvalidInput(f"subscription group not exist, {group}")
        if sub.retry_queue_nums <= 0:
            return None
        new_topic = RETRY_GROUP_TOPIC_PREFIX + group
        check_topic(new_topic)
        queue_id = self._random.randrange(sub.retry_queue_nums)
        self.topics.create_in_send_back(new_topic, sub.retry_queue_nums, PERM_READ | PERM_WRITE)
        orig = self.store.look_message_by_offset(commit_log_offset)
        if orig is None:
            raise InvalidInput(f"look message by offset failed, {commit_log_offset}")
        props = dict(orig.properties)
        if props.get(P.RETRY_TOPIC) is None:
            props[P.RETRY_TOPIC] = orig.topic
        props[P.WAIT] = "false"
        max_times = sub.retry_max_times if max_reconsume_times is None else max_reconsume_times
        if orig.reconsume_times >= max_times or delay_level < 0:
            new_topic = DLQ_GROUP_TOPIC_PREFIX + group
            queue_id = self._random.randrange(DLQ_NUMS_PER_GROUP)
            self.topics.create_in_send_back(new_topic, DLQ_NUMS_PER_GROUP, PERM_READ | PERM_WRITE)
            props[P.DELAY] = "0"
        else:
            props[P.DELAY] = str(3 + orig.reconsume_times if delay_level == 0 else delay_level)
        if not props.get(P.ORIGIN_MESSAGE_ID):
            props[P.ORIGIN_MESSAGE_ID] = origin_msg_id or orig.offset_msg_id
        msg = MessageExt(
            topic=new_topic, body=orig.body, queue_id=queue_id, flag=orig.flag, properties=P.broker_order(props),
            sys_flag=orig.sys_flag, born_timestamp=orig.born_timestamp, born_host=orig.born_host,
            store_host=self.store_host, reconsume_times=orig.reconsume_times + 1,
        )
        return self.store.put_message(msg)

    # -- lifecycle ------------------------------------------------------------------------------
    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        for s in self.services:
            try:
                s.stop()
            except Exception:
                pass
        try:
            if self.config_writer is not None:
                self.config_writer.stop()  # writes every pending file
                self.config_writer.detach(self.topics, self.subscriptions, self.offsets)
            if not self.read_only and self.offsets.dirty:
                try:
                    self.offsets.persist()
                except StoreError as e:  # a full disk: the store itself still closes cleanly
                    import logging

                    logging.getLogger("rmqtool").warning("%s; committed offsets since the last write are lost", e)
        finally:
            self.store.close()


def _raw_list(result: Any) -> list[Any]:
    raw = getattr(result, "raw", None)
    return list(raw) if raw is not None else [None] * len(result.messages)
