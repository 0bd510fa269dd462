"""Delay-level messages: `SCHEDULE_TOPIC_XXXX` and `config/delayOffset.json` (formats.md §6, §7.3).

RocketMQ 5.x `ScheduleMessageService` (broker/.../schedule) and `HookUtils.transformDelayLevelMessage`.
At put time a message with `DELAY=N` is parked on `SCHEDULE_TOPIC_XXXX` queue N-1 (N clamped to
the max level) with REAL_TOPIC/REAL_QID. One delivery loop per level walks its ConsumeQueue;
a message whose delivery time (store time + level delay, what the CQ's tagsCode holds) has come
is written again to its real topic as `messageTimeUp` builds it, and the level's next offset is
kept in `delayOffset.json`.
"""

from __future__ import annotations

import json
import logging
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rmqtool.errors import InvalidInput, InvalidMessage, RmqError, StoreError
from rmqtool.layouts import properties as P
from rmqtool.layouts.constants import (
    SCHEDULE_TOPIC,
    TRANS_HALF_TOPIC,
    TRANSACTION_COMMIT_TYPE,
    TRANSACTION_NOT_TYPE,
)
from rmqtool.layouts.message import MessageExt
from rmqtool.store.config import parse_delay_levels
from rmqtool.store.jsonconfig import write_file

log = logging.getLogger(__name__)

DEFAULT_MESSAGE_DELAY_LEVEL = "1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h"
DELAY_FOR_A_WHILE_MS = 100  # ScheduleMessageService.DELAY_FOR_A_WHILE
IDLE_RECHECK_MS = 1000  # with no level pending: arrivals wake the thread, this only backs them up
DELAY_OFFSET_UPDATE_VERSION_STEP = 200  # BrokerConfig.delayOffsetUpdateVersionStep


def delay_level_table(text: str = DEFAULT_MESSAGE_DELAY_LEVEL) -> dict[int, int]:
    """`ScheduleMessageService.delayLevelTable`: level (1-based) -> delay in ms."""
    return {i + 1: ms for i, ms in enumerate(parse_delay_levels(text))}


def delay_level_to_queue_id(level: int) -> int:
    return level - 1


def delay_level_of(msg: MessageExt) -> int:
    """`Message.getDelayTimeLevel`: the DELAY property as an int, 0 when absent."""
    text = msg.properties.get(P.DELAY)
    if text is None:
        return 0
    try:
        return int(text)
    except ValueError:
        raise InvalidMessage(f"delay level {text!r} is not an integer") from None


def is_schedulable(msg: MessageExt) -> bool:
    """Only NOT/COMMIT transaction types take the schedule and timer paths (`handleScheduleMessage`)."""
    return msg.transaction_type in (TRANSACTION_NOT_TYPE, TRANSACTION_COMMIT_TYPE)


def transform_delay_level_message(msg: MessageExt, max_delay_level: int) -> MessageExt:
    """`HookUtils.transformDelayLevelMessage`: clamp the level, park the message on its level's queue."""
    if delay_level_of(msg) > max_delay_level:
        msg.properties[P.DELAY] = str(max_delay_level)
    msg.properties[P.REAL_TOPIC] = msg.topic
    msg.properties[P.REAL_QID] = str(msg.queue_id)
    msg.properties = P.broker_order(msg.properties)
    msg.topic = SCHEDULE_TOPIC
    msg.queue_id = delay_level_to_queue_id(int(msg.properties[P.DELAY]))
    return msg


def compute_deliver_timestamp(delay_level_table: dict[int, int], level: int, store_timestamp: int) -> int:
    """`computeDeliverTimestamp`: what the store puts as tagsCode on SCHEDULE_TOPIC_XXXX."""
    delay = delay_level_table.get(level)
    return store_timestamp + (delay if delay is not None else 1000)


def message_time_up(msg: MessageExt) -> MessageExt:
    """`messageTimeUp`: the message as it goes back to its real topic.

    The stored properties string is made from the full map (so DELAY, REAL_TOPIC, REAL_QID stay
    on disk); Java removes DELAY/TIMER_DELIVER_MS/TIMER_DELAY_SEC from the map only afterwards,
    and the put path, which looks at the map, then sees no DELAY. Our put hook gets the same
    effect from `delivering()`.
    """
    props = P.broker_order(msg.properties)
    return MessageExt(
        topic=props[P.REAL_TOPIC], queue_id=int(props[P.REAL_QID]), body=msg.body, flag=msg.flag,
        properties=props, sys_flag=msg.sys_flag, born_timestamp=msg.born_timestamp, born_host=msg.born_host,
        store_host=msg.store_host, reconsume_times=msg.reconsume_times,
    )


# -- re-entrancy: a delivered message must not be parked again ---------------------------------
_local = threading.local()


class delivering:
    """Context in which the put hooks let a message through untouched (it is a delivery)."""

    def __enter__(self) -> None:
        _local.depth = getattr(_local, "depth", 0) + 1

    def __exit__(self, *exc: object) -> None:
        _local.depth -= 1


def is_delivering() -> bool:
    return getattr(_local, "depth", 0) > 0


# -- delayOffset.json ----------------------------------------------------------------------------
@dataclass(slots=True)
class DataVersion:
    counter: int = 0
    state_version: int = 0
    timestamp: int = 0

    def next_version(self, now_ms: int, state_version: int = 0) -> None:
        self.timestamp = now_ms
        self.state_version = state_version
        self.counter += 1


_UNQUOTED_INT_KEY = re.compile(r'([{,]\s*)(-?\d+)(\s*:)')


def parse_fastjson(text: str) -> Any:
    """Parse fastjson output, whose Integer map keys are not quoted (`{1:3,2:0}`)."""
    return json.loads(_UNQUOTED_INT_KEY.sub(r'\1"\2"\3', text))


def encode_delay_offset(offset_table: dict[int, int], data_version: DataVersion) -> str:
    """`DelayOffsetSerializeWrapper.toJson(true)` as fastjson 1.x writes it (formats.md §7.3)."""
    entries = ",".join(f"{level}:{offset}" for level, offset in sorted(offset_table.items()))
    table = "{" + entries + "\n\t}" if entries else "{}"
    return ("{\n"
            "\t\"dataVersion\":{\n"
            f"\t\t\"counter\":{data_version.counter},\n"
            f"\t\t\"stateVersion\":{data_version.state_version},\n"
            f"\t\t\"timestamp\":{data_version.timestamp}\n"
            "\t},\n"
            f"\t\"offsetTable\":{table}\n"
            "}")


def encode_delay_offset_4x(offset_table: dict[int, int]) -> str:
    """The 4.9.x `DelayOffsetSerializeWrapper` (no dataVersion), as a 4.x broker writes it."""
    entries = ",".join(f"{level}:{offset}" for level, offset in sorted(offset_table.items()))
    table = "{" + entries + "\n\t}" if entries else "{}"
    return "{\n" f"\t\"offsetTable\":{table}\n" "}"


def decode_delay_offset(text: str) -> tuple[dict[int, int], DataVersion | None]:
    """Both the 4.9.x (`{"offsetTable":{...}}`) and the 5.x shape."""
    obj = parse_fastjson(text)
    if not isinstance(obj, dict):
        raise ValueError("delayOffset.json is not an object")
    table = {int(k): int(v) for k, v in (obj.get("offsetTable") or {}).items()}
    dv = obj.get("dataVersion")
    version = None
    if isinstance(dv, dict):
        version = DataVersion(int(dv.get("counter", 0)), int(dv.get("stateVersion", 0)), int(dv.get("timestamp", 0)))
    return table, version


def delay_offset_path(root: Path) -> Path:
    return Path(root) / "config" / "delayOffset.json"


def write_config_file(path: Path, text: str) -> None:
    """`ConfigManager.persist` of delayOffset.json: the previous content kept as `<f>.bak`, the
    new one written to a temporary file, fsynced and renamed (jsonconfig.write_file, the writer
    of every config file). StoreError when it cannot be written (a full disk)."""
    write_file(path, text)


def read_config_file(path: Path) -> str | None:
    """`ConfigManager.load`: the file, or its `.bak` when it is missing, empty or unparsable."""
    for candidate in (path, path.with_name(path.name + ".bak")):
        try:
            text = candidate.read_text(encoding="utf-8")
        except (FileNotFoundError, UnicodeDecodeError):
            continue
        if not text.strip():
            continue
        try:
            parse_fastjson(text)
        except ValueError:
            continue
        return text
    return None


# -- the service ---------------------------------------------------------------------------------
class ScheduleMessageService:
    """Delivers due delay-level messages. `run_due(now)` does one pass over every level."""

    name = "schedule-message"

    def __init__(self, store: Any, *, clock: Callable[[], int] | None = None, read_only: bool = False) -> None:
        self.store = store
        cfg = store.config
        self.root = Path(cfg.store_path_root_dir)
        self.clock = clock or getattr(store, "clock", None) or (lambda: int(time.time() * 1000))
        self.delay_level_table = delay_level_table(getattr(cfg, "message_delay_level", DEFAULT_MESSAGE_DELAY_LEVEL))
        self.max_delay_level = max(self.delay_level_table)
        self.flush_interval_ms = int(getattr(cfg, "flush_delay_offset_interval", 10_000))
        self.read_only = read_only
        self.offset_table: dict[int, int] = {}
        self.data_version = DataVersion()
        self.legacy_shape = False  # delayOffset.json was in the 4.x form (no dataVersion)
        self._version_change_counter = 0
        self._lock = threading.RLock()
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._failed_run = False  # a level's put failed: retry after DELAY_FOR_A_WHILE
        self._last_persist = -(1 << 62)
        self._dirty = False
        self._next_due: dict[int, int] = {}  # level -> delivery time of its first pending message
        self._now_hint: int | None = None  # the time of the last run_due (the injectable clock's view)
        self.load()

    # -- persistence ----------------------------------------------------------------------------
    @property
    def config_file_path(self) -> Path:
        return delay_offset_path(self.root)

    def load(self) -> None:
        text = read_config_file(self.config_file_path)
        if text is not None:
            table, version = decode_delay_offset(text)
            self.offset_table.update(table)
            if version is not None:
                self.data_version = version
            # a 4.x broker's file keeps its shape: what that broker would write, nothing new
            self.legacy_shape = version is None
        self.correct_delay_offset()

    def correct_delay_offset(self) -> None:
        """Clamp each level's offset into its ConsumeQueue's [min, max] (5.x `correctDelayOffset`)."""
        queues = self._schedule_queues()
        for level in self.delay_level_table:
            current = self.offset_table.get(level)
            qid = delay_level_to_queue_id(level)
            if current is None or qid not in queues:
                continue
            lo = self.store.get_min_offset_in_queue(SCHEDULE_TOPIC, qid)
            hi = self.store.get_max_offset_in_queue(SCHEDULE_TOPIC, qid)
            corrected = lo if current < lo else hi if current > hi else current
            if corrected != current:
                self.offset_table[level] = corrected
                self._dirty = True

    def _schedule_queues(self) -> set[int]:
        try:
            return set(self.store.topic_queues().get(SCHEDULE_TOPIC, []))
        except AttributeError:
            return set(range(self.max_delay_level))

    def encode(self) -> str:
        if self.legacy_shape:
            return encode_delay_offset_4x(self.offset_table)
        return encode_delay_offset(self.offset_table, self.data_version)

    def persist(self) -> None:
        if self.read_only:
            return
        with self._lock:
            text = self.encode()
            self._dirty = False
        try:
            write_config_file(self.config_file_path, text)
        except StoreError as e:  # a full disk: the offsets stay in memory, the next persist tries again
            self._dirty = True
            if not getattr(self, "_persist_failed", False):
                log.warning("%s; delay offsets are kept in memory and written when the disk lets it", e)
            self._persist_failed = True
            return
        self._persist_failed = False
        self._last_persist = self._now_hint if self._now_hint is not None else self.clock()

    def _update_offset(self, level: int, offset: int) -> None:
        if self.offset_table.get(level) != offset:
            self._dirty = True
        self.offset_table[level] = offset
        self._version_change_counter += 1
        if self._version_change_counter % DELAY_OFFSET_UPDATE_VERSION_STEP == 0:
            self.data_version.next_version(self.clock())

    # -- delivery -------------------------------------------------------------------------------
    def run_due(self, now_ms: int | None = None) -> int:
        """Deliver every due message of every level; returns how many were delivered.

        Progress reaches `delayOffset.json` every `flushDelayOffsetInterval` and at `stop()`
        (which `LocalBroker.close` calls), so a short-lived embedded `consume` does not deliver
        the same messages again next time.
        """
        now = self.clock() if now_ms is None else now_ms
        self._now_hint = now
        delivered = 0
        with self._lock:
            failed = False
            for level in sorted(self.delay_level_table):
                try:
                    delivered += self._deliver_level(level, now)
                except RmqError as e:  # the level's offset did not move: retried next run
                    log.warning("delay level %d: %s; will retry", level, e)
                    failed = True
            self._failed_run = failed
        if self._dirty and not self.read_only and now - self._last_persist >= self.flush_interval_ms:
            self.persist()  # every flushDelayOffsetInterval, and at stop()
        return delivered

    def _deliver_level(self, level: int, now: int) -> int:
        qid = delay_level_to_queue_id(level)
        level_ms = self.delay_level_table[level]
        offset = self.offset_table.get(level, 0)
        delivered = 0
        next_due = self._next_due.get(level)
        if next_due is not None and now < next_due and next_due <= now + level_ms:
            return 0  # the queue's head is not due yet (later messages are due even later)
        if offset == self.store.get_max_offset_in_queue(SCHEDULE_TOPIC, qid):
            return 0  # nothing pending (or no queue yet)
        while True:
            res = self.store.get_message(SCHEDULE_TOPIC, qid, offset, 32)
            status = res.status
            if status in ("OFFSET_TOO_SMALL", "OFFSET_OVERFLOW_BADLY") or (
                    status == "NO_MATCHED_LOGIC_QUEUE" and offset != 0):
                # `executeOnTimeUp` with no iterator: reset into [min, max]
                reset = res.min_offset if offset < res.min_offset else min(offset, res.max_offset)
                if reset != offset:
                    self._update_offset(level, reset)
                    offset = reset
                    continue
                return delivered
            if not res.messages:
                return delivered
            for msg in res.messages:
                curr = msg.queue_offset
                deliver = compute_deliver_timestamp(self.delay_level_table, level, msg.store_timestamp)
                if deliver > now + level_ms:  # correctDeliverTimestamp: clock went back
                    deliver = now
                if deliver - now > 0:
                    self._update_offset(level, curr)
                    self._next_due[level] = deliver
                    return delivered
                self._next_due.pop(level, None)
                if not msg.properties.get(P.REAL_TOPIC) or msg.properties.get(P.REAL_QID) is None:
                    offset = curr + 1  # not a schedule message: nothing to deliver to
                    self._update_offset(level, offset)
                    continue
                inner = message_time_up(msg)
                if inner.topic == TRANS_HALF_TOPIC:
                    offset = curr + 1
                    self._update_offset(level, offset)
                    continue
                try:
                    with delivering():
                        result = self.store.put_message(inner)
                except InvalidInput as e:
                    # Java would retry this offset forever; a message the store can never take is skipped
                    log.warning("delay level %d offset %d skipped: %s", level, curr, e)
                    offset = curr + 1
                    self._update_offset(level, offset)
                    continue
                if getattr(result, "status", "PUT_OK") not in ("PUT_OK", "FLUSH_DISK_TIMEOUT",
                                                                  "FLUSH_SLAVE_TIMEOUT", "SLAVE_NOT_AVAILABLE"):
                    self._update_offset(level, curr)
                    return delivered
                delivered += 1
                offset = curr + 1
                self._update_offset(level, offset)
            next_begin = getattr(res, "next_begin_offset", offset)
            if next_begin > offset:
                offset = next_begin
                self._update_offset(level, offset)

    # -- background ------------------------------------------------------------------------------
    def start(self) -> None:
        if self._thread is not None:
            return
        self._stop.clear()
        self._thread = threading.Thread(target=self._loop, name="ScheduleMessageTimerThread", daemon=True)
        self._thread.start()

    def wakeup(self, topic: str = SCHEDULE_TOPIC, queue_id: int = 0) -> None:
        """Arrival listener: a message was parked on a delay level; let the thread look at it."""
        if topic == SCHEDULE_TOPIC and not self._wake.is_set():
            self._wake.set()

    def next_run_ms(self, now_ms: int) -> int:
        """When the next `run_due` can deliver something if no delay-level message arrives.

        Java's DeliverDelayedMessageTimerTask of each level runs again at the head message's
        delivery time, or after DELAY_FOR_A_WHILE (100 ms) when the level's queue is empty or
        a put failed. Empty levels are left to the arrival wake-up here (`wakeup`), rechecked
        every second only in case one was missed: ten idle scans of every level a second were
        most of what an idle broker spent once the timer service stopped polling.
        """
        if self._failed_run:
            return now_ms + DELAY_FOR_A_WHILE_MS
        due = now_ms + IDLE_RECHECK_MS
        for level in self.delay_level_table:
            qid = delay_level_to_queue_id(level)
            if self.offset_table.get(level, 0) == self.store.get_max_offset_in_queue(SCHEDULE_TOPIC, qid):
                continue
            nxt = self._next_due.get(level)
            if nxt is None or nxt <= now_ms:
                return now_ms + DELAY_FOR_A_WHILE_MS  # pending but not yet readable: Java's retry
            due = min(due, nxt)
        return due

    def _loop(self) -> None:
        while not self._stop.is_set():
            now = self.clock()
            try:
                wait_ms = self.next_run_ms(now) - now
            except Exception:  # noqa: BLE001 - a store closing under us: poll as Java does
                wait_ms = DELAY_FOR_A_WHILE_MS
            self._wake.wait(min(IDLE_RECHECK_MS, max(1, wait_ms)) / 1000)
            self._wake.clear()
            if self._stop.is_set():
                break
            try:
                self.run_due()
            except Exception:  # noqa: BLE001 - keep delivering; Java logs and reschedules
                time.sleep(1)

    def stop(self) -> None:
        if self._thread is not None:
            self._stop.set()
            self._wake.set()
            self._thread.join(timeout=10)
            self._thread = None
        self.persist()

    def pending(self) -> dict[int, tuple[int, int]]:
        """level -> (next offset, max offset): the `scheduleMessageOffset_N` running stats."""
        return {level: (self.offset_table.get(level, 0),
                        self.store.get_max_offset_in_queue(SCHEDULE_TOPIC, delay_level_to_queue_id(level)))
                for level in sorted(self.delay_level_table)}
