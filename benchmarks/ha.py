"""Classic HA replication of `rmqtool serve` against Apache RocketMQ 5.3.3, measured in one run.

    python benchmarks/ha.py [--rounds 3] [--preload-mb 64] [--load-seconds 8] [--latency-sends 400]
                            [--targets rmqtool,apache]

For each target, a master and a slave of the same implementation (rmqtool serve -> rmqtool serve,
Apache -> Apache through tests/interop/java's ApacheBroker + LoopbackHAService), on loopback:

  catch-up    the slave is connected and caught up, then stopped (SIGSTOP) while the master takes
              --preload-mb of 1 KiB messages; MB/s from SIGCONT until the slave has the master's
              max offset (replication alone: transfer, write, dispatch into its queues and index).
  lag         producers send 1 KiB messages for --load-seconds; master and slave max offsets
              (GET_BROKER_RUNTIME_INFO) sampled every 100 ms: mean and max lag in bytes, and the
              replication rate over the window.
  latency     one producer, one send in flight, 1 KiB: p50/p99 of SEND_MESSAGE_V2 round trips to
              an ASYNC_MASTER and to a SYNC_MASTER (inSyncReplicas=2), each with its slave attached.

The load generator is the same for every target: rmqtool's asyncio remoting client speaking the
raw protocol (4 connections, one request in flight each, for the load; it saturates before the
brokers on 2 cores, so `lag` compares replication under the same offered load, not peak ingest).
Prints one line per target and round (rounds alternate the targets, so that a drift of the
machine's load hits both alike), then with several rounds the median of each figure per target,
and the rmqtool / Apache ratios of the medians (with each round's own ratio beside them).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import signal
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from rmqtool.remoting.command import RemotingCommand  # noqa: E402
from rmqtool.remoting.transport import connect  # noqa: E402
from tests.interop.conftest import free_port, start_apache  # noqa: E402
from tests.interop.harness import java_classpath  # noqa: E402
from tests.serve_helpers import start_serve, stop_process  # noqa: E402

MSG = bytes((i * 7) % 251 for i in range(1024))
FILE_SIZE = 256 << 20
QUIET_MS = 300_000  # haHousekeepingInterval: a slave stopped for the preload must not be dropped
TOPIC = "HaBench"


def ext(queue: int) -> dict[str, str]:
    return {"a": "ha_bench_pg", "b": TOPIC, "c": "TBW102", "d": "8", "e": str(queue), "f": "0",
            "g": str(int(time.time() * 1000)), "h": "0", "i": "WAIT\x01true", "j": "0", "k": "false", "m": "false"}


async def _send_for(addr: str, conns: int, *, seconds: float | None = None, count: int | None = None,
                    latencies: list[float] | None = None) -> int:
    stop_at = time.monotonic() + seconds if seconds else None
    sent = [0]

    async def one(c: int) -> None:
        conn = await connect(addr)
        try:
            i = 0
            while True:
                if stop_at is not None and time.monotonic() >= stop_at:
                    return
                if count is not None and sent[0] >= count:
                    return
                sent[0] += 1
                t0 = time.perf_counter()
                r = await conn.request(RemotingCommand.request(310, ext((c + i) % 8), MSG), 30)
                if latencies is not None:
                    latencies.append(time.perf_counter() - t0)
                if r.code not in (0, 12):
                    raise RuntimeError(f"send failed: {r.code} {r.remark}")
                i += 1
        finally:
            await conn.close()

    await asyncio.gather(*(one(c) for c in range(conns)))
    return sent[0]


async def _max_offset(addr: str) -> int:
    """commitLogMaxOffset of GET_BROKER_RUNTIME_INFO; a broker still starting may answer without it."""
    for _ in range(100):
        conn = await connect(addr)
        try:
            r = await conn.request(RemotingCommand.request(28), 10)
        finally:
            await conn.close()
        if r.code == 0 and r.body:
            return int(json.loads(r.body)["table"]["commitLogMaxOffset"])
        await asyncio.sleep(0.1)
    raise RuntimeError(f"{addr} answers GET_BROKER_RUNTIME_INFO with {r.code} {r.remark}")


def max_offset(addr: str) -> int:
    return asyncio.run(_max_offset(addr))


def create_topic(addr: str) -> None:
    async def go() -> None:
        conn = await connect(addr)
        try:
            r = await conn.request(RemotingCommand.request(17, {
                "topic": TOPIC, "defaultTopic": "TBW102", "readQueueNums": "8", "writeQueueNums": "8", "perm": "6",
                "topicFilterType": "SINGLE_TAG", "topicSysFlag": "0", "order": "false"}), 10)
            assert r.code == 0, r.remark
        finally:
            await conn.close()
    asyncio.run(go())


class Pair:
    """A master and (after `start_slave`) its slave, of one implementation."""

    def __init__(self, kind: str, work: Path, role: str) -> None:
        self.kind, self.work, self.role = kind, work, role
        self.ha_port = free_port()
        self.slave = None
        if kind == "apache":
            self.master = start_apache(work / "m", f"haListenPort={self.ha_port}", f"mappedFileSizeCommitLog={FILE_SIZE}",
                                       f"brokerRole={role}", "inSyncReplicas=2", f"haHousekeepingInterval={QUIET_MS}", heap="1g")
            self.master_addr = self.master.broker
        else:
            (work / "m").mkdir(parents=True)
            conf = work / "m" / "broker.conf"
            conf.write_text(f"mappedFileSizeCommitLog={FILE_SIZE}\nhaListenPort={self.ha_port}\nbrokerRole={role}\n"
                            f"inSyncReplicas=2\nhaHousekeepingInterval={QUIET_MS}\n")
            self.master, m = start_serve(work / "m" / "store", conf, work / "m" / "serve.stderr")
            assert m, (work / "m" / "serve.stderr").read_text()
            self.master_addr = f"{m.group(4)}:{m.group(5)}"
        create_topic(self.master_addr)

    def start_slave(self) -> None:
        if self.kind == "apache":
            self.slave = start_apache(self.work / "s", "brokerRole=SLAVE", "brokerId=1",
                                      f"haMasterAddress=127.0.0.1:{self.ha_port}", f"haListenPort={free_port()}",
                                      f"mappedFileSizeCommitLog={FILE_SIZE}", "haSendHeartbeatInterval=1000",
                                      f"haHousekeepingInterval={QUIET_MS}", heap="1g")
            self.slave_addr = self.slave.broker
        else:
            (self.work / "s").mkdir(parents=True)
            conf = self.work / "s" / "broker.conf"
            conf.write_text(f"mappedFileSizeCommitLog={FILE_SIZE}\nbrokerRole=SLAVE\nbrokerId=1\n"
                            f"haMasterAddress=127.0.0.1:{self.ha_port}\nhaHousekeepingInterval={QUIET_MS}\n")
            self.slave, m = start_serve(self.work / "s" / "store", conf, self.work / "s" / "serve.stderr")
            assert m, (self.work / "s" / "serve.stderr").read_text()
            self.slave_addr = f"{m.group(4)}:{m.group(5)}"

    @property
    def slave_pid(self) -> int:
        assert self.slave is not None
        return self.slave.proc.pid if self.kind == "apache" else self.slave.pid

    def wait_slave(self, target: int, timeout: float = 300) -> float:
        t0 = time.monotonic()
        while max_offset(self.slave_addr) < target:
            if time.monotonic() - t0 > timeout:
                raise TimeoutError(f"{self.kind} slave stuck at {max_offset(self.slave_addr)} of {target}")
            time.sleep(0.02)
        return time.monotonic() - t0

    def close(self) -> None:
        for p in (self.slave, self.master):
            if p is None:
                continue
            if self.kind == "apache":
                p.proc.kill()
                p.proc.wait()
            else:
                stop_process(p)


def catch_up_and_lag(kind: str, work: Path, preload_mb: int, load_s: float) -> dict[str, float]:
    pair = Pair(kind, work, "ASYNC_MASTER")
    try:
        pair.start_slave()
        asyncio.run(_send_for(pair.master_addr, 1, count=10))
        pair.wait_slave(max_offset(pair.master_addr), 60)
        # the slave, connected and caught up, is stopped (SIGSTOP) while the master takes the preload,
        # then let go: the time it takes to catch up is replication alone, no start-up in it
        before = max_offset(pair.slave_addr)
        os.kill(pair.slave_pid, signal.SIGSTOP)
        try:
            asyncio.run(_send_for(pair.master_addr, 4, count=preload_mb * 1024))
            target = max_offset(pair.master_addr)
        finally:
            os.kill(pair.slave_pid, signal.SIGCONT)
        t0 = time.monotonic()
        pair.wait_slave(target)
        catch_up = (target - before) / (time.monotonic() - t0) / 1e6
        # steady state under load
        base_m, base_s = max_offset(pair.master_addr), max_offset(pair.slave_addr)
        lags: list[int] = []
        done = [False]

        async def sample() -> None:
            while not done[0]:
                m, s = await _max_offset(pair.master_addr), await _max_offset(pair.slave_addr)
                lags.append(max(0, m - s))
                await asyncio.sleep(0.1)

        async def run() -> None:
            task = asyncio.create_task(sample())
            await _send_for(pair.master_addr, 4, seconds=load_s)
            done[0] = True
            await task

        t0 = time.monotonic()
        asyncio.run(run())
        end_m = max_offset(pair.master_addr)
        pair.wait_slave(end_m)
        window = time.monotonic() - t0
        rate = (max_offset(pair.slave_addr) - base_s) / window / 1e6
        return {"catch_up_mb_s": catch_up, "lag_mean_kb": statistics.fmean(lags) / 1024 if lags else 0.0,
                "lag_max_kb": max(lags) / 1024 if lags else 0.0, "load_mb_s": rate,
                "ingest_mb_s": (end_m - base_m) / load_s / 1e6}
    finally:
        pair.close()


def latency(kind: str, work: Path, role: str, sends: int) -> dict[str, float]:
    pair = Pair(kind, work, role)
    try:
        pair.start_slave()
        asyncio.run(_send_for(pair.master_addr, 1, count=5))
        pair.wait_slave(max_offset(pair.master_addr), 60)
        lat: list[float] = []
        asyncio.run(_send_for(pair.master_addr, 1, count=sends, latencies=lat))
        lat.sort()
        return {"p50_ms": lat[len(lat) // 2] * 1000, "p99_ms": lat[int(len(lat) * 0.99)] * 1000}
    finally:
        pair.close()


def measure(kind: str, work: Path, args: argparse.Namespace) -> dict[str, float]:
    r = catch_up_and_lag(kind, work / f"{kind}-repl", args.preload_mb, args.load_seconds)
    for role, prefix in (("ASYNC_MASTER", "async"), ("SYNC_MASTER", "sync")):
        r.update({f"{prefix}_{k}": v for k, v in latency(kind, work / f"{kind}-{prefix}", role,
                                                         args.latency_sends).items()})
    return r


def line(kind: str, r: dict[str, float], label: str) -> str:
    return (f"{kind:8} {label:>9} catch-up {r['catch_up_mb_s']:7.1f} MB/s | under load: ingest "
            f"{r['ingest_mb_s']:5.1f} MB/s, replicated {r['load_mb_s']:5.1f} MB/s, lag mean {r['lag_mean_kb']:8.1f} KiB "
            f"max {r['lag_max_kb']:8.1f} KiB | send p50/p99 ASYNC {r['async_p50_ms']:.2f}/{r['async_p99_ms']:.2f} ms, "
            f"SYNC {r['sync_p50_ms']:.2f}/{r['sync_p99_ms']:.2f} ms")


RATIOS = (("catch-up", "catch_up_mb_s"), ("replicated under load", "load_mb_s"),
          ("SYNC send p50 (lower is faster)", "sync_p50_ms"))


def ratio(a: dict[str, float], b: dict[str, float], key: str) -> str:
    return f"{a[key] / b[key]:.2f}x" if b.get(key) else "n/a"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=1, help="measure every target this many times (median)")
    ap.add_argument("--preload-mb", type=int, default=64)
    ap.add_argument("--load-seconds", type=float, default=8)
    ap.add_argument("--latency-sends", type=int, default=400)
    ap.add_argument("--targets", default="rmqtool,apache")
    args = ap.parse_args()
    if args.rounds < 1:
        ap.error("--rounds must be at least 1")
    targets = args.targets.split(",")
    if "apache" in targets and java_classpath() is None:
        print("apache: not built (bash .ci/steps/10-interop.sh), skipped", file=sys.stderr)
        targets.remove("apache")
    print(f"cores: {os.cpu_count()}, load average {os.getloadavg()[0]:.2f}, rounds: {args.rounds}")
    runs: dict[str, list[dict[str, float]]] = {kind: [] for kind in targets}
    with tempfile.TemporaryDirectory(prefix="ha-bench-") as tmp:
        for rnd in range(args.rounds):
            for kind in targets:
                work = Path(tmp) / f"round{rnd}"
                try:
                    r = measure(kind, work, args)
                finally:
                    shutil.rmtree(work, ignore_errors=True)  # each pair's stores reserve their files' blocks
                runs[kind].append(r)
                print(line(kind, r, f"round {rnd + 1}"), flush=True)
    medians = {kind: {k: statistics.median(r[k] for r in rs) for k in rs[0]} for kind, rs in runs.items() if rs}
    if args.rounds > 1:
        for kind, m in medians.items():
            print(line(kind, m, "median"))
    if "rmqtool" in medians and "apache" in medians:
        a, b = medians["rmqtool"], medians["apache"]
        parts = []
        for name, key in RATIOS:
            each = ", ".join(ratio(x, y, key) for x, y in zip(runs["rmqtool"], runs["apache"], strict=True))
            parts.append(f"{name} {ratio(a, b, key)}" + (f" (rounds: {each})" if args.rounds > 1 else ""))
        print("ratio rmqtool/apache" + (" of the medians" if args.rounds > 1 else "") + ": " + "; ".join(parts))


if __name__ == "__main__":
    main()
