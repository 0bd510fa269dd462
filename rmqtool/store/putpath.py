"""The put path of `MessageStore` (RocketMQ's `CommitLog.asyncPutMessage(s)` + the live dispatch).

`put_messages` runs the put hooks, checks and encodes outside the put lock, appends and
dispatches (ConsumeQueue units, index keys) under it, then runs dispatch listeners in append
order, tells arrival listeners and, with SYNC_FLUSH, waits for the group commit; `put_batch`
is the same for one client batch without a MessageExt per message (batchput.py). A mixin of
`MessageStore`, which owns the state it uses.
"""

from __future__ import annotations

import collections
import logging
from collections.abc import Callable, Container, Iterable
from dataclasses import dataclass
from enum import Enum
from operator import attrgetter
from typing import TYPE_CHECKING, Any

from rmqtool.errors import InvalidMessage, StoreError
from rmqtool.layouts.constants import MAX_PROPERTIES_LENGTH
from rmqtool.layouts.message import MessageExt, encode_records_parts, topic_field
from rmqtool.layouts.msgid import create_offset_msg_id
from rmqtool.layouts.net import Host
from rmqtool.store.batchput import BatchPutResult, put_batch, put_bodies, put_encoded
from rmqtool.store.diskspace import DiskFull
from rmqtool.store.dispatch import DispatchRequest
from rmqtool.store.putusual import put_one, put_usual

if TYPE_CHECKING:
    from rmqtool.store.commitlog import CommitLog
    from rmqtool.store.config import StoreConfig
    from rmqtool.store.dispatch import Dispatcher
    from rmqtool.store.flush import FlushService
    from rmqtool.store.runningflags import RunningFlags

log = logging.getLogger("rmqtool.store.messagestore")


class PutMessageStatus(str, Enum):
    PUT_OK = "PUT_OK"
    FLUSH_DISK_TIMEOUT = "FLUSH_DISK_TIMEOUT"
    FLUSH_SLAVE_TIMEOUT = "FLUSH_SLAVE_TIMEOUT"
    SLAVE_NOT_AVAILABLE = "SLAVE_NOT_AVAILABLE"
    SERVICE_NOT_AVAILABLE = "SERVICE_NOT_AVAILABLE"
    CREATE_MAPPED_FILE_FAILED = "CREATE_MAPPED_FILE_FAILED"
    MESSAGE_ILLEGAL = "MESSAGE_ILLEGAL"


@dataclass(slots=True)
class PutResult:
    status: str
    msg: MessageExt
    wrote_offset: int
    wrote_bytes: int
    queue_offset: int

    @property
    def offset_msg_id(self) -> str:
        return create_offset_msg_id(self.msg.store_host, self.wrote_offset)

    @property
    def ok(self) -> bool:
        return self.status == PutMessageStatus.PUT_OK


_body_of, _topic_of, _size_of = attrgetter("body"), attrgetter("topic"), attrgetter("total_size")


def _refuse_fields(msgs: list[MessageExt], max_size: int) -> None:
    """InvalidMessage for the first message whose body or topic a record cannot hold."""
    for msg in msgs:
        body_len = len(msg.body)
        if body_len > max_size:
            raise InvalidMessage(f"message body is {body_len} bytes, the limit is {max_size}")
        topic_len = topic_field(msg.topic)[1]
        if topic_len > 32767:
            raise InvalidMessage(f"topic is {topic_len} bytes, a record holds at most 32767")


def _refuse_sizes(msgs: list[MessageExt], parts: list[bytes | bytearray], file_size: int) -> None:
    """InvalidMessage for the first encoded message whose properties or record are too big."""
    for msg, props in zip(msgs, parts[3::4], strict=True):
        if len(props) - 2 > MAX_PROPERTIES_LENGTH:
            raise InvalidMessage(f"properties are {len(props) - 2} bytes, the limit is {MAX_PROPERTIES_LENGTH}")
        if msg.total_size + 8 > file_size:
            raise InvalidMessage(f"record of {msg.total_size} bytes does not fit in a {file_size}-byte "
                                 "commitlog file")


class PutPath:
    """`put_message(s)` and `put_batch` over the state `MessageStore.__init__` sets up."""

    read_only: bool
    closed: bool
    config: StoreConfig
    clock: Callable[[], int]
    commitlog: CommitLog
    dispatcher: Dispatcher
    running_flags: RunningFlags
    flush_service: FlushService | None
    ha_service: Any
    sync_flush: bool
    store_host: Host
    delay_levels_ms: list[int]
    put_hooks: list[Callable[[MessageExt], MessageExt]]
    dispatch_listeners: list[Callable[[DispatchRequest], None]]
    arrival_listeners: tuple[tuple[Container[str] | None, Callable[[str, int], None]], ...]
    _pending: collections.deque[DispatchRequest]
    _listener_lock: Any  # an RLock
    _refused: int

    def put_message(self, msg: MessageExt) -> PutResult:
        """One message: `put_messages([msg])[0]`, appended and dispatched in one pass when
        `put_one` takes it (putusual.py), which a producer's single send usually is."""
        if self.read_only:
            raise StoreError("store opened read-only")
        if not self.running_flags.is_writeable():
            return self._refuse([msg], PutMessageStatus.SERVICE_NOT_AVAILABLE)[0]
        self._refused = 0
        if self.config.is_slave:  # DefaultMessageStore.checkStoreStatus, as put_messages
            raise StoreError("message store is in slave mode, it takes no puts")
        for hook in self.put_hooks:
            keys = getattr(hook, "property_keys", None)  # the hook changes only messages with one of these
            if keys is None or not keys.isdisjoint(msg.properties):
                msg = hook(msg)
        one = put_one(self, msg)
        if one is None:
            return self._put_prepared([msg])[0]
        phys, end = one
        result = PutResult(PutMessageStatus.PUT_OK, msg, phys, msg.total_size, msg.queue_offset)
        listeners = self.arrival_listeners
        if listeners:
            topic = msg.topic
            for topics, _ in listeners:  # no call at all unless one of them listens to this topic
                if topics is None or topic in topics:
                    self._notify_arrivals(((topic, msg.queue_id),))
                    break
        if self.sync_flush or self.ha_service is not None:
            self._wait_durable([result], end, [msg])
        return result

    def put_messages(self, msgs: list[MessageExt]) -> list[PutResult]:
        """Append `msgs` in order under one lock (one flush wait for all with SYNC_FLUSH).

        Outside the lock every message goes through the put hooks, is checked and encoded
        (`encode_record_parts`); under it the whole batch gets its queue offsets, positions and
        store time and is copied into the CommitLog in as few slices as file boundaries allow,
        then dispatched (ConsumeQueue units, index keys) in one `dispatch_appended`. The CommitLog
        bytes are in place before any unit points at them.
        """
        if self.read_only:
            raise StoreError("store opened read-only")
        if not self.running_flags.is_writeable():
            return self._refuse(msgs, PutMessageStatus.SERVICE_NOT_AVAILABLE)
        self._refused = 0
        config = self.config
        if config.is_slave:  # DefaultMessageStore.checkStoreStatus: a slave's CommitLog is the master's copy
            raise StoreError("message store is in slave mode, it takes no puts")
        hooks = self.put_hooks
        if hooks:
            prepared: list[MessageExt] = []
            for msg in msgs:
                for hook in hooks:
                    msg = hook(msg)
                prepared.append(msg)
        else:
            prepared = list(msgs)
        return self._put_prepared(prepared)

    def _put_prepared(self, prepared: list[MessageExt]) -> list[PutResult]:
        """`put_messages` after the checks of the store's state and the put hooks."""
        config = self.config
        file_size = config.mapped_file_size_commit_log
        max_size = config.max_message_size
        store_host = self.store_host
        usual = put_usual(self, prepared) if len(prepared) > 1 else None
        if usual is not None:  # the usual batch, appended and dispatched in one pass (putusual.py)
            end, arrived = usual
            ok = PutMessageStatus.PUT_OK
            results = [PutResult(ok, msg, msg.commit_log_offset, msg.total_size, msg.queue_offset) for msg in prepared]
            if self.arrival_listeners:
                self._notify_arrivals(arrived)
            return self._wait_durable(results, end, prepared)
        # the checks in C over the whole batch; the per-message loops only find what to say
        if prepared and (max(map(len, map(_body_of, prepared))) > max_size
                or max(topic_field(t)[1] for t in set(map(_topic_of, prepared))) > 32767):
            _refuse_fields(prepared, max_size)
        for msg in prepared:
            msg.store_host = store_host
        parts = encode_records_parts(prepared)
        if prepared and max(map(len, parts[3::4])) - 2 > MAX_PROPERTIES_LENGTH or max(map(_size_of, prepared)) + 8 > file_size:
            _refuse_sizes(prepared, parts, file_size)
        cl = self.commitlog
        listeners = bool(self.dispatch_listeners)
        with cl.put_lock:
            if self.closed:
                raise StoreError("store is closed")
            now = self.clock()
            try:
                cl.append_batch_locked(prepared, parts, now)
            except DiskFull as e:  # nothing was appended: the files are made before the first byte
                log.error("create mapped file error, topic: %s clientAddr: %s: %s", prepared[0].topic,
                          prepared[0].born_host, e)
                return self._refuse(prepared, PutMessageStatus.CREATE_MAPPED_FILE_FAILED)
            dispatched: list[DispatchRequest] = []
            arrived = self._dispatch_locked(prepared, now, dispatched if listeners else None)
            if listeners:
                self._pending.extend(dispatched)
            end = cl.max_offset
        ok = PutMessageStatus.PUT_OK
        results = [PutResult(ok, msg, msg.commit_log_offset, msg.total_size, msg.queue_offset) for msg in prepared]
        if listeners:
            self._run_listeners()
        if self.arrival_listeners:
            self._notify_arrivals(arrived)
        return self._wait_durable(results, end, prepared)

    def _wait_durable(self, results: list[PutResult], end: int, prepared: list[MessageExt]) -> list[PutResult]:
        """The group commit wait with SYNC_FLUSH and the slaves' with HA, up to CommitLog `end`."""
        if self.sync_flush and self.flush_service is not None:
            fs = self.flush_service
            if not fs.wait_flushed(end, self.config.sync_flush_timeout / 1000):
                if fs.error is not None:
                    raise StoreError(f"flush failed: {fs.error}")
                for r in results:
                    r.status = PutMessageStatus.FLUSH_DISK_TIMEOUT
        ha = self.ha_service
        if ha is not None:
            status = ha.handle_ha(end, prepared)
            if status is not None:
                for r in results:
                    r.status = status
        return results

    def put_batch(self, topic: str, queue_id: int | list[int], sys_flag: int, born_timestamp: int, born_host: Host,
                  reconsume_times: int, flags: list[int], bodies: list[bytes] | list[memoryview],
                  props_list: list[dict[str, str]]) -> BatchPutResult | None:
        """One client batch of one topic (one queue, or one per message) without a MessageExt
        per message, or None when it needs `put_messages` (store/batchput.py says when; nothing
        is done then)."""
        if self.read_only:
            raise StoreError("store opened read-only")
        return put_batch(self, topic, queue_id, sys_flag, born_timestamp, born_host, reconsume_times, flags,
                         bodies, props_list)

    def put_encoded(self, topic: str, queue_id: int, sys_flag: int, born_timestamp: int, born_host: Host,
                    reconsume_times: int, flags: list[int], bodies: list[memoryview], props_b: list[bytes],
                    tags: list[str | None], uniqs: list[str | None], keys: list[str | None]) -> BatchPutResult | None:
        """`put_batch` of maps already encoded, with their index values, or None when it needs
        `put_batch` or `put_messages` (batchput.py `put_encoded`; nothing is done then)."""
        if self.read_only:
            raise StoreError("store opened read-only")
        return put_encoded(self, topic, queue_id, sys_flag, born_timestamp, born_host, reconsume_times, flags,
                           bodies, props_b, tags, uniqs, keys)

    def put_bodies(self, topic: str, queue_id: int, bodies: list[bytes], properties: dict[str, str],
                   uniq_keys: list[str], born_timestamp: int, born_host: Host) -> BatchPutResult | None:
        """Bodies sharing one final property map but for their UNIQ_KEY, or None when they need
        `put_messages` (batchput.py `put_bodies`; nothing is done then)."""
        if self.read_only:
            raise StoreError("store opened read-only")
        return put_bodies(self, topic, queue_id, bodies, properties, uniq_keys, born_timestamp, born_host)

    def _dispatch_locked(self, msgs: list[MessageExt], now: int,
                         dispatched: list[DispatchRequest] | None) -> Iterable[tuple[str, int]]:
        """ConsumeQueue units and index keys of appended records (caller holds the put lock).

        A unit or key that cannot be written (no room for a new ConsumeQueue or index file)
        does not undo the put: the records are in the CommitLog, as with Java's asynchronous
        ReputMessageService. As there, the store stops taking puts (the write-error flag) until
        a restart, whose recovery dispatches again from the CommitLog: the `abort` file is
        kept at close so that recovery is the abnormal one, which re-checks every record.
        """
        try:
            return self.dispatcher.dispatch_appended(msgs, now, self.delay_levels_ms, dispatched)
        except (StoreError, OSError) as e:
            self.dispatch_failed(e)
            return {(m.topic, m.queue_id) for m in msgs}

    def dispatch_failed(self, e: Exception) -> None:
        """A unit or index key of appended records could not be written (see `_dispatch_locked`)."""
        self.running_flags.make_logics_queue_error()
        log.error("consume queue or index can not write (%s): puts are refused until restart, "
                  "whose recovery builds what is missing from the CommitLog", e)

    def _refuse(self, msgs: list[MessageExt], status: PutMessageStatus) -> list[PutResult]:
        """Results that store nothing (`HookUtils.checkBeforePutMessage`, a failed file creation)."""
        if status == PutMessageStatus.SERVICE_NOT_AVAILABLE:
            if self._refused % 50_000 == 0:
                log.warning("message store is not writeable, so putMessage is forbidden %d",
                            self.running_flags.flag_bits)
            self._refused += 1
        return [PutResult(status, msg, -1, 0, -1) for msg in msgs]

    def add_arrival_listener(self, listener: Callable[[str, int], None], topics: Container[str] | None = None) -> None:
        """Call `listener(topic, queueId)` after each put that gave a queue of one of `topics`
        new units (None: of any topic). `topics` may be a live container, such as the topics
        a service has waiters on: it is asked at each put."""
        self.arrival_listeners = (*self.arrival_listeners, (topics, listener))

    def remove_arrival_listener(self, listener: Callable[[str, int], None]) -> None:
        self.arrival_listeners = tuple(e for e in self.arrival_listeners if e[1] != listener)

    def _notify_arrivals(self, queues: Iterable[tuple[str, int]]) -> None:
        listeners = self.arrival_listeners  # a tuple, replaced whole when one is added or removed
        for topic, queue_id in queues:
            for topics, listener in listeners:
                if topics is not None and topic not in topics:
                    continue
                try:
                    listener(topic, queue_id)
                except Exception:  # a listener bug must not undo a stored message
                    log.exception("arrival listener %r failed", listener)

    def _run_listeners(self) -> None:
        """Drain dispatched requests to the listeners in append order (one drainer at a time)."""
        with self._listener_lock:
            pending = self._pending
            while pending:
                try:
                    req = pending.popleft()
                except IndexError:
                    break
                for listener in list(self.dispatch_listeners):
                    try:
                        listener(req)
                    except Exception:  # a listener bug must not undo a stored message
                        log.exception("dispatch listener %r failed", listener)
