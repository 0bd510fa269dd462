"""GET_BROKER_RUNTIME_INFO 28: what `mqadmin brokerStatus` prints, `clusterList` and
`exportMetrics` parse and the dashboard's cluster page shows, measured.

`BrokerController.getRuntimeInfo` + `StoreStatsService` of the Java broker: counters sampled
once a second (600 samples kept), TPS over the last 10 / 60 / 600 s as `getPutTps` formats them
(a window not yet filled is an empty string), today's and yesterday's morning counters rolled at
local midnight (`BrokerStats.record`), disk capacity and usage of the CommitLog's partition,
and the store time of the oldest message (`getEarliestMessageTime`). Serve has no request
thread pools: their queues are reported empty, their capacities as Java's defaults.
"""

from __future__ import annotations

import collections
import os
import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rmqtool.remoting import fastjson
from rmqtool.remoting.bodies import KVTable
from rmqtool.remoting.command import RemotingCommand
from rmqtool.remoting.transport import Connection

BROKER_VERSION_DESC = "V5_3_0"
BROKER_VERSION = 473
MAX_SAMPLES = 601  # StoreStatsService.MAX_RECORDS_OF_SAMPLING + 1
# queue capacities of BrokerConfig (sendThreadPoolQueueCapacity, ...), reported as Java does
_POOLS = {"send": 10000, "pull": 100000, "litePull": 100000, "query": 20000, "ack": 100000}


@dataclass
class Snapshot:
    ms: int
    put: int
    get_found: int
    get_miss: int
    transferred: int


def tps(samples: collections.deque[Snapshot], window: int, field: str) -> str:
    """`getPutTps(time)`: (last - the one `window` samples before) per second, "" while too few."""
    if len(samples) <= window:
        return ""
    last, before = samples[-1], samples[-1 - window]
    dt = last.ms - before.ms
    if dt <= 0:
        return ""
    return repr((getattr(last, field) - getattr(before, field)) * 1000.0 / dt)


def tps3(samples: collections.deque[Snapshot], field: str) -> str:
    return " ".join(tps(samples, w, field) for w in (10, 60, 600))


def human_bytes(n: int) -> str:
    """`MixAll.humanReadableByteCount(bytes, false)`."""
    if n < 1024:
        return f"{n} B"
    exp = 0
    v = float(n)
    while v >= 1024 and exp < 6:
        v /= 1024
        exp += 1
    return f"{n / 1024 ** exp:.1f} {'KMGTPE'[exp - 1]}iB"


def disk_ratio(path: Path) -> float:
    """`UtilAll.getDiskPartitionSpaceUsedPercent`: used / total of the partition, -1 if unknown."""
    try:
        u = shutil.disk_usage(path)
    except OSError:
        return -1.0
    return (u.total - u.free) / u.total if u.total else -1.0


class RuntimeStats:
    """The sampled counters of one broker."""

    def __init__(self, controller: Any) -> None:
        self.controller = controller
        self.samples: collections.deque[Snapshot] = collections.deque(maxlen=MAX_SAMPLES)
        self.boot_phy = int(controller.store.max_phy_offset)
        self.day = time.localtime().tm_yday
        self.put_today_morning = self.put_yesterday_morning = 0
        self.get_today_morning = self.get_yesterday_morning = 0
        self.sample()

    def snapshot(self) -> Snapshot:
        s = self.controller.stats
        return Snapshot(self.controller.clock(), s.get("put", 0), s.get("get_found", 0), s.get("get_miss", 0),
                        s.get("get", 0))

    def sample(self) -> None:
        snap = self.snapshot()
        self.samples.append(snap)
        day = time.localtime().tm_yday
        if day != self.day:  # BrokerStats.record at midnight
            self.day = day
            self.put_yesterday_morning, self.put_today_morning = self.put_today_morning, snap.put
            self.get_yesterday_morning, self.get_today_morning = self.get_today_morning, snap.transferred

    def table(self) -> dict[str, str]:
        c = self.controller
        store = c.store
        now = c.clock()
        snap = self.snapshot()
        samples = collections.deque(self.samples, maxlen=MAX_SAMPLES)
        samples.append(snap)
        uptime_s = max(0, (now - c.boot_ms) // 1000)
        root = Path(c.config.store_path_root_dir)
        commitlog_dir = root / "commitlog"
        probe = commitlog_dir if commitlog_dir.exists() else root
        try:
            usage = shutil.disk_usage(probe)
            capacity = f"Total : {human_bytes(usage.total)}, Free : {human_bytes(usage.free)}."
        except OSError:
            capacity = "Total : 0 B, Free : 0 B."
        ratio = disk_ratio(probe)
        cq_ratio = disk_ratio(root / "consumequeue" if (root / "consumequeue").exists() else probe)
        earliest = earliest_message_time(store)
        put_bytes = max(0, int(store.max_phy_offset) - self.boot_phy)
        gets = snap.get_found + snap.get_miss
        table = {
            "brokerVersionDesc": BROKER_VERSION_DESC,
            "brokerVersion": str(BROKER_VERSION),
            # isSpecialServiceRunning: the master runs them, a slave does not; clusterList's #ACTIVATED
            "brokerActive": "false" if c.cluster.is_slave else "true",
            "bootTimestamp": str(c.boot_ms),
            "runtime": f"[ {uptime_s // 86400} days, {uptime_s // 3600 % 24} hours, {uptime_s // 60 % 60} minutes, "
                       f"{uptime_s % 60} seconds ]",
            "msgPutTotalTodayNow": str(snap.put),
            "msgGetTotalTodayNow": str(snap.transferred),
            "msgPutTotalTodayMorning": str(self.put_today_morning),
            "msgPutTotalYesterdayMorning": str(self.put_yesterday_morning),
            "msgGetTotalTodayMorning": str(self.get_today_morning),
            "msgGetTotalYesterdayMorning": str(self.get_yesterday_morning),
            "putTps": tps3(samples, "put"),
            "getFoundTps": tps3(samples, "get_found"),
            "getMissTps": tps3(samples, "get_miss"),
            "getTotalTps": " ".join(_sum_tps(samples, w) for w in (10, 60, 600)),
            "getTransferredTps": tps3(samples, "transferred"),
            "getTransferedTps": tps3(samples, "transferred"),
            "putMessageTimesTotal": str(snap.put),
            "putMessageSizeTotal": str(put_bytes),
            "putMessageAverageSize": repr(put_bytes / snap.put) if snap.put else "0.0",
            "putMessageFailedTimes": str(c.stats.get("put_failed", 0)),
            "getMessageTimesTotalFound": str(snap.get_found),
            "getMessageTimesTotalMiss": str(snap.get_miss),
            "getMessageTransferedMsgCount": str(snap.transferred),
            "getMessageTimesTotal": str(gets),
            "commitLogMinOffset": str(int(store.min_phy_offset)),
            "commitLogMaxOffset": str(int(store.max_phy_offset)),
            "commitLogDiskRatio": _ratio(ratio),
            f"commitLogDiskRatio_{commitlog_dir}": _ratio(ratio),
            "consumeQueueDiskRatio": _ratio(cq_ratio),
            "commitLogDirCapacity": capacity,
            "dispatchBehindBytes": str(_dispatch_behind(store)),
            "dispatchMaxBuffer": "0",
            "remainHowManyDataToFlush": human_bytes(_unflushed(store)),
            "remainTransientStoreBufferNumbs": str(2 ** 31 - 1),  # transientStorePoolEnable is off
            "pageCacheLockTimeMills": "0",
            "earliestMessageTimeStamp": str(earliest),
            "startAcceptSendRequestTimeStamp": "0",
            "timerReadBehind": "0",
            "timerOffsetBehind": "0",
            "timerCongestNum": "0",
            "timerEnqueueTps": "0.0",
            "timerDequeueTps": "0.0",
            "EndTransactionQueueSize": "0",
            "EndTransactionThreadPoolQueueCapacity": "100000",
            "totalMemKBytes": str(_total_mem_kb()),
        }
        for pool, capacity_n in _POOLS.items():
            table[f"{pool}ThreadPoolQueueSize"] = "0"
            table[f"{pool}ThreadPoolQueueCapacity"] = str(capacity_n)
            table[f"{pool}ThreadPoolQueueHeadWaitTimeMills"] = "0"
        return table


def _sum_tps(samples: collections.deque[Snapshot], window: int) -> str:
    found, miss = tps(samples, window, "get_found"), tps(samples, window, "get_miss")
    return "" if not found else repr(float(found) + float(miss or 0))


def _ratio(r: float) -> str:
    return f"{r:.2f}" if r >= 0 else "-1"


def earliest_message_time(store: Any) -> int:
    """The store time of the message at the CommitLog's min offset; -1 while the log is empty."""
    try:
        if int(store.max_phy_offset) <= int(store.min_phy_offset):
            return -1
        msg = store.look_message_by_offset(int(store.min_phy_offset))
    except Exception:  # noqa: BLE001 - a file deleted under us: report none
        return -1
    return int(getattr(msg, "store_timestamp", -1) or -1) if msg is not None else -1


def _dispatch_behind(store: Any) -> int:
    pending = getattr(store, "_pending", None)
    return sum(getattr(r, "msg_size", 0) for r in list(pending)) if pending else 0


def _unflushed(store: Any) -> int:
    mfq = store.commitlog.mfq
    return max(0, int(store.max_phy_offset) - int(getattr(mfq, "flushed_where", store.max_phy_offset)))


def _total_mem_kb() -> int:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") // 1024
    except (ValueError, OSError, AttributeError):
        return 0


class RuntimeInfoProcessor:
    @property
    def runtime_stats(self: Any) -> RuntimeStats:
        rs = getattr(self, "_runtime_stats", None)
        if rs is None:
            rs = self._runtime_stats = RuntimeStats(self)
        return rs

    def sample_runtime_stats(self: Any) -> None:
        """Once a second (`StoreStatsService.sampling`), and the stats items' snapshots when due."""
        self.runtime_stats.sample()
        self.broker_stats.sample()

    async def process_broker_runtime_info(self: Any, cmd: RemotingCommand, conn: Connection) -> RemotingCommand:
        table = await self.run(self.runtime_stats.table)
        table["now"] = str(int(time.time() * 1000))
        return cmd.response(body=fastjson.dumpb(KVTable(dict(sorted(table.items())))))
