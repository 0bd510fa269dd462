"""SlaveSynchronize: a slave copies its master's metadata (broker/slave/SlaveSynchronize.java).

The CommitLog comes over the HA port (store/ha); what a broker keeps beside it comes over the
remoting port, pulled by the slave: the topic table (GET_ALL_TOPIC_CONFIG, through the master's
VIP channel as BrokerOuterAPI asks it), consumer offsets (GET_ALL_CONSUMER_OFFSET), delay-level
offsets (GET_ALL_DELAY_OFFSET) and subscription groups (GET_ALL_SUBSCRIPTIONGROUP_CONFIG). As in
Java each one is taken over as a whole when its DataVersion differs (offsets always, merged over
ours with `putAll`), persisted, and a failure of one is logged without stopping the others. The
copied tables keep the master's DataVersion (`assignNewOne`); Java's slave then bumps its own once
per topic and group it deletes and re-adds on the way, which only makes its next check copy again.

As Java 5.3.3, syncAll then copies the message-request modes (GET_ALL_MESSAGE_REQUEST_MODE: the
POP/PULL setting per topic and group, into config/messageRequestMode.json) and, with
timerWheelEnable, the timer metrics (GET_TIMER_METRICS, taken when its DataVersion differs); the
timer checkpoint's read time and master queue offset (GET_TIMER_CHECK_POINT) are copied at every
3 s check, as `syncTimerCheckPoint` is ("latency-sensitive"), while the slave's timer store does
not dequeue.
"""

from __future__ import annotations

import contextlib
import logging
import time
from pathlib import Path
from typing import Any

from rmqtool.errors import RemotingError
from rmqtool.remoting import fastjson
from rmqtool.remoting.codes import RequestCode, ResponseCode
from rmqtool.remoting.command import RemotingCommand
from rmqtool.remoting.transport import Connection, connect

log = logging.getLogger("rmqtool.broker.slave")

SYNC_ALL_INTERVAL_S = 60.0  # BrokerController: syncAll when 60 s passed since the last one
SYNC_CHECK_INTERVAL_S = 3.0  # ... checked every 3 s
TIMEOUT_S = 3.0  # BrokerOuterAPI's invokeSync timeout for these requests


def vip_channel(addr: str) -> str:
    """`MixAll.brokerVIPChannel(true, addr)`: the same host, port - 2."""
    host, _, port = addr.rpartition(":")
    try:
        return f"{host}:{int(port) - 2}"
    except ValueError:
        return addr


class SlaveSynchronize:
    """Holds the master's address (learned from REGISTER_BROKER answers) and copies from it."""

    def __init__(self, local: Any, own_addr: str, modes: Any = None) -> None:
        self.local = local
        self.own_addr = own_addr
        self.modes = modes  # holds message_request_modes (QueryAssignmentProcessor's manager)
        self.master_addr: str | None = None
        self.last_sync = 0.0  # monotonic time of the last syncAll, 0 = never (or the master changed)
        self.last_errors: dict[str, str] = {}

    def set_master_addr(self, addr: str | None) -> None:
        if addr != self.master_addr:
            log.info("Update master address from %s to %s", self.master_addr, addr)
            self.master_addr = addr
            self.last_sync = 0.0  # a new master: copy from it at the next check

    async def tick(self) -> None:
        """The 3 s check: `syncAll` when a minute passed (or never ran for this master)."""
        if self.master_addr is None:
            return
        now = time.monotonic()
        if not self.last_sync or now - self.last_sync > SYNC_ALL_INTERVAL_S:
            await self.sync_all()
            self.last_sync = time.monotonic()
        if self._timer_wheel_enable() and self.master_addr != self.own_addr:
            await self._step("timer check point", self.sync_timer_check_point, self.master_addr)

    async def sync_all(self) -> None:
        master = self.master_addr
        if master is None or master == self.own_addr:
            return
        await self._step("topic config", self.sync_topic_config, master)
        await self._step("consumer offset", self.sync_consumer_offset, master)
        await self._step("delay offset", self.sync_delay_offset, master)
        await self._step("subscription group", self.sync_subscription_group_config, master)
        if self.modes is not None:
            await self._step("message request mode", self.sync_message_request_mode, master)
        if self._timer_wheel_enable():
            await self._step("timer metrics", self.sync_timer_metrics, master)

    async def _step(self, what: str, fn: Any, master: str) -> None:
        try:
            await fn(master)
            if self.last_errors.pop(what, None) is not None:
                log.info("sync of %s from master %s works again", what, master)
        except Exception as e:  # noqa: BLE001 - Java logs and goes on with the next table
            why = f"{type(e).__name__}: {e}"
            if self.last_errors.get(what) != why:
                log.warning("Sync%s from master %s failed: %s", what.title().replace(" ", ""), master, why)
            self.last_errors[what] = why

    async def _get(self, addr: str, code: int) -> bytes:
        conn: Connection = await connect(addr, timeout=TIMEOUT_S)
        try:
            resp = await conn.request(RemotingCommand.request(code, {}), TIMEOUT_S)
        finally:
            with contextlib.suppress(Exception):
                await conn.close()
        if resp.code != ResponseCode.SUCCESS:
            raise RuntimeError(f"code {resp.code}: {resp.remark}")
        return resp.body or b""

    async def _get_json(self, addr: str, code: int) -> dict[str, Any]:
        obj = fastjson.loads(await self._get(addr, code))
        if not isinstance(obj, dict):
            raise ValueError("the master's answer is not a JSON object")
        return obj

    async def sync_topic_config(self, master: str) -> None:
        from rmqtool.store.jsonconfig import DataVersion
        from rmqtool.store.topics import TopicConfig

        try:
            data = await self._get_json(vip_channel(master), RequestCode.GET_ALL_TOPIC_CONFIG)
        except (OSError, RemotingError):  # no VIP port there: the master's own
            data = await self._get_json(master, RequestCode.GET_ALL_TOPIC_CONFIG)
        topics = self.local.topics
        version = DataVersion.from_json(data.get("dataVersion"))
        if _same_version(topics.data_version, version):
            return
        table = {str(name): TopicConfig.from_json(str(name), tc)
                 for name, tc in (data.get("topicConfigTable") or {}).items() if isinstance(tc, dict)}
        topics.assign_from_master(table, version)
        log.info("Update slave topic config from master, %s", master)

    async def sync_consumer_offset(self, master: str) -> None:
        from rmqtool.store.jsonconfig import DataVersion, int_keys

        data = await self._get_json(master, RequestCode.GET_ALL_CONSUMER_OFFSET)
        offsets = self.local.offsets
        table = {str(k): {q: int(v) for q, v in int_keys(queues).items()}
                 for k, queues in (data.get("offsetTable") or {}).items() if isinstance(queues, dict)}
        offsets.put_all_from_master(table, DataVersion.from_json(data.get("dataVersion"), offsets.clock()))

    async def sync_delay_offset(self, master: str) -> None:
        from rmqtool.store.schedule import ScheduleMessageService, delay_offset_path, write_config_file

        text = (await self._get(master, RequestCode.GET_ALL_DELAY_OFFSET)).decode("utf-8")
        if not text:
            return
        write_config_file(delay_offset_path(Path(self.local.config.store_path_root_dir)), text)
        for svc in getattr(self.local, "services", []):
            if isinstance(svc, ScheduleMessageService):
                svc.load()  # loadWhenSyncDelayOffset

    async def sync_subscription_group_config(self, master: str) -> None:
        from rmqtool.store.jsonconfig import DataVersion
        from rmqtool.store.subscriptions import SubscriptionGroupConfig

        data = await self._get_json(master, RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG)
        subs = self.local.subscriptions
        version = DataVersion.from_json(data.get("dataVersion"))
        if _same_version(subs.data_version, version):
            return
        table = {str(n): SubscriptionGroupConfig.from_json(str(n), c)
                 for n, c in (data.get("subscriptionGroupTable") or {}).items() if isinstance(c, dict)}
        subs.assign_from_master(table, version)
        log.info("Update slave Subscription Group from master, %s", master)

    async def sync_message_request_mode(self, master: str) -> None:
        data = await self._get_json(master, RequestCode.GET_ALL_MESSAGE_REQUEST_MODE)
        table = {str(t): {str(g): dict(v) for g, v in groups.items() if isinstance(v, dict)}
                 for t, groups in (data.get("messageRequestModeMap") or {}).items() if isinstance(groups, dict)}
        await self.modes.assign_message_request_modes(table)
        log.info("Update slave Message Request Mode from master, %s", master)

    def _timer_wheel_enable(self) -> bool:
        return bool(getattr(self.local.config, "timer_wheel_enable", False))

    def _running_timer_store(self) -> bool:
        """A timer store that dequeues (`isShouldRunningDequeue`): then the files are its own."""
        return any(getattr(svc, "name", "") == "timer-message-store" and getattr(svc, "_thread", None) is not None
                   for svc in getattr(self.local, "services", []))

    def _config_dir(self) -> Path:
        return Path(self.local.config.store_path_root_dir) / "config"

    async def sync_timer_metrics(self, master: str) -> None:
        """`syncTimerMetrics` into config/timermetrics (a slave runs no timer store here, Java's
        keeps one that does not dequeue: either way the file is what a promoted store reads)."""
        from rmqtool.store.timer.timermetrics import TimerMetrics

        if self._running_timer_store():
            return
        data = await self._get_json(master, RequestCode.GET_TIMER_METRICS)
        metrics = TimerMetrics(self._config_dir())
        metrics.load()
        if metrics.assign_from_master(data):
            log.info("Update slave timer metrics from master, %s", master)

    async def sync_timer_check_point(self, master: str) -> None:
        """`syncTimerCheckPoint`: the master's lastReadTimeMs, masterTimerQueueOffset and
        DataVersion into config/timercheck (TimerMessageStore.recover caps its queue offset by
        masterTimerQueueOffset, so a store taken over from the slave resumes where the master was)."""
        from rmqtool.store.timer.timercheck import TimerCheckpoint, TimerCheckpointValue

        if self._running_timer_store():
            return
        theirs = TimerCheckpointValue.unpack(await self._get(master, RequestCode.GET_TIMER_CHECK_POINT))
        cp = TimerCheckpoint(self._config_dir() / "timercheck")
        try:
            cp.value.last_read_time_ms = theirs.last_read_time_ms
            cp.value.master_timer_queue_offset = theirs.master_timer_queue_offset
            cp.value.state_version, cp.value.timestamp, cp.value.counter = (
                theirs.state_version, theirs.timestamp, theirs.counter)  # getDataVersion().assignNewOne
            cp.write()
        finally:
            cp.close()


def _same_version(a: Any, b: Any) -> bool:
    """`DataVersion.equals`: counter, timestamp and stateVersion."""
    return (a.counter, a.timestamp, a.state_version) == (b.counter, b.timestamp, b.state_version)
