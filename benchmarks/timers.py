"""Timer store benchmark: 1,000,000 pending timer messages spread over an hour.

Prints, for one run:
* the plain CommitLog append rate (messages/s through `MessageStore.put_messages`, no timer):
  the reference;
* the timer put rate (the same path with the TIMER_DELIVER_MS rewrite to rmq_sys_wheel_timer);
* the timer enqueue rate (ConsumeQueue rmq_sys_wheel_timer/0 -> TimerLog unit + wheel slot),
  target >= 50,000/s, and its ratio to the reference;
* peak RSS (target <= 200 MB), split into anonymous memory and mapped store-file pages;
* lateness p50/p99 of delivery on a shortened horizon with the real clock and the service
  thread (target p99 <= precision + 100 ms): the time a delivered message became visible in
  its real topic (its dispatch) - the requested time. The default shortened horizon keeps the
  per-slot density of the full run (1,000,000 / 3600 s = 278 messages per 1 s slot).

usage: python benchmarks/timers.py [--count N] [--horizon-s S] [--lateness-count N] [--lateness-horizon-s S]
"""

from __future__ import annotations

import argparse
import resource
import shutil
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from rmqtool.layouts.message import MessageExt  # noqa: E402
from rmqtool.store.config import StoreConfig  # noqa: E402
from rmqtool.store.messagestore import MessageStore  # noqa: E402
from rmqtool.store.timer import attach_to_store  # noqa: E402

BATCH = 1000


def now_ms() -> int:
    return time.time_ns() // 1_000_000


def proc_status() -> dict[str, int]:
    """VmHWM / VmRSS / RssAnon / RssFile in kB (Linux)."""
    out = {}
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            k, _, v = line.partition(":")
            if k in ("VmHWM", "VmRSS", "RssAnon", "RssFile", "RssShmem"):
                out[k] = int(v.split()[0])
    except OSError:
        pass
    return out


def open_store(root: Path, clock=None) -> MessageStore:
    cfg = StoreConfig(store_path_root_dir=root, message_index_enable=False)
    return MessageStore.open(root, cfg, clock=clock)


def put_rate(store: MessageStore, count: int, make) -> float:
    t = time.perf_counter()
    for base in range(0, count, BATCH):
        store.put_messages([make(i) for i in range(base, min(count, base + BATCH))])
    return count / (time.perf_counter() - t)


def throughput(root: Path, count: int, horizon_s: int) -> dict[str, float]:
    store = open_store(root / "tput")
    schedule, timer = attach_to_store(store)
    body = b"0123456789abcdef"
    ref = put_rate(store, count, lambda i: MessageExt(topic="Plain", body=body,
                                                      properties={"UNIQ_KEY": f"P{i:012d}"}))
    put_started = now_ms()
    start = put_started + 900_000  # beyond the time the puts take, so every message is pending
    span = horizon_s * 1000
    put = put_rate(store, count, lambda i: MessageExt(
        topic="Timed", body=body,
        properties={"UNIQ_KEY": f"T{i:012d}", "TIMER_DELIVER_MS": str(start + (i * 7_919_993) % span)}))
    t = time.perf_counter()
    # the wheel's clock as of the start of the puts: with 1M puts taking minutes, the first
    # messages would otherwise already be due and skip the wheel
    timer.run_due(put_started)
    enq = time.perf_counter() - t
    assert timer.enqueued == count, (timer.enqueued, count)
    pending = timer.pending_count()
    t = time.perf_counter()
    timer.close()
    schedule.stop()
    store.close()
    close_s = time.perf_counter() - t
    t = time.perf_counter()
    store = open_store(root / "tput")
    store_open_s = time.perf_counter() - t
    t = time.perf_counter()
    schedule, timer = attach_to_store(store)
    reopen_s = time.perf_counter() - t
    timer.close()
    store.close()
    return {"ref": ref, "put": put, "enq": count / enq, "enq_s": enq, "pending": pending, "close_s": close_s,
            "reopen_s": reopen_s, "store_open_s": store_open_s}


def lateness(root: Path, count: int, horizon_s: int) -> tuple[list[int], int]:
    store = open_store(root / "late")
    schedule, timer = attach_to_store(store)
    visible: dict[str, int] = {}

    def on_dispatch(req) -> None:  # when a delivered message becomes visible to consumers
        if req.topic == "Late":
            visible[req.uniq_key] = now_ms()

    store.dispatch_listeners.append(on_dispatch)
    timer.start()
    start = now_ms() + 2000
    span = horizon_s * 1000
    requested = {}
    for base in range(0, count, BATCH):
        msgs = []
        for i in range(base, min(count, base + BATCH)):
            due = start + (i * 7_919_993) % span
            requested[f"L{i:09d}"] = due
            msgs.append(MessageExt(topic="Late", body=b"x", properties={"UNIQ_KEY": f"L{i:09d}",
                                                                        "TIMER_DELIVER_MS": str(due)}))
        store.put_messages(msgs)
    late: list[int] = []
    offset = 0
    deadline = time.monotonic() + horizon_s + 30
    # read the delivered records only once the horizon is over: the measuring must not compete with
    # the timer thread for the interpreter; the records' store timestamps say when they were delivered
    time.sleep(max(0.0, (start + span) / 1000 - time.time() + 1.5))
    while len(late) < count and time.monotonic() < deadline:
        res = store.get_message("Late", 0, offset, 1000, max_bytes=1 << 30)
        if not res.messages:
            time.sleep(0.1)
            continue
        for m in res.messages:
            key = m.properties["UNIQ_KEY"]
            late.append(visible.get(key, m.store_timestamp) - requested[key])
        offset = res.next_begin_offset
    timer.close()
    store.close()
    return late, timer.precision_ms


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--count", type=int, default=1_000_000)
    ap.add_argument("--horizon-s", type=int, default=3600)
    ap.add_argument("--lateness-count", type=int, default=16_680)
    ap.add_argument("--lateness-horizon-s", type=int, default=60)
    ap.add_argument("--dir", type=Path, default=None, help="where to put the scratch stores")
    ap.add_argument("--rounds", type=int, default=1,
                    help="run the whole measurement N times in turn, each round printed")
    args = ap.parse_args()
    for r in range(args.rounds):
        if args.rounds > 1:
            print(f"# round {r + 1} of {args.rounds}", flush=True)
        _round(args)


def _round(args: argparse.Namespace) -> None:
    """One round of the measurement, its figures and ratios printed."""
    root = Path(tempfile.mkdtemp(prefix="rmqtool-bench-timers-", dir=args.dir))
    peak = {"hwm": 0}

    def watch() -> None:
        while not stop.is_set():
            st = proc_status()
            if st.get("VmRSS", 0) > peak["hwm"]:
                peak.update(hwm=st["VmRSS"], anon=st.get("RssAnon", 0), file=st.get("RssFile", 0))
            stop.wait(0.2)

    stop = threading.Event()
    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    try:
        r = throughput(root, args.count, args.horizon_s)
        late, precision = lateness(root, args.lateness_count, args.lateness_horizon_s)
    finally:
        stop.set()
        shutil.rmtree(root, ignore_errors=True)
    maxrss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"messages: {args.count:,} timer messages spread over {args.horizon_s} s")
    print(f"reference: plain CommitLog append   {r['ref']:>10,.0f} msg/s")
    print(f"timer put (rewrite + append)        {r['put']:>10,.0f} msg/s  ({r['put'] / r['ref']:.2f} x reference)")
    print(f"timer enqueue (CQ -> TimerLog+wheel) {r['enq']:>9,.0f} msg/s  ({r['enq'] / r['ref']:.2f} x reference)"
          f"  target >= 50,000/s: {'OK' if r['enq'] >= 50_000 else 'MISSED'}")
    print(f"pending in the wheel after enqueue:  {r['pending']:,}")
    print(f"close (flush) {r['close_s']:.2f} s; reopen: timer + schedule recovery {r['reopen_s']:.2f} s "
          f"(MessageStore.open before it: {r['store_open_s']:.2f} s)")
    print(f"peak RSS (ru_maxrss)                 {maxrss_mb:,.0f} MB  target <= 200 MB: "
          f"{'OK' if maxrss_mb <= 200 else 'MISSED'}")
    if peak.get("hwm"):
        print(f"  at the sampled peak: anonymous {peak['anon'] / 1024:,.0f} MB, mapped store files "
              f"{peak['file'] / 1024:,.0f} MB")
    if late:
        q = statistics.quantiles(late, n=100)
        p50, p99 = statistics.median(late), q[98]
        print(f"lateness ({len(late):,} of {args.lateness_count:,} delivered over {args.lateness_horizon_s} s, "
              f"precision {precision} ms): p50 {p50:.0f} ms, p99 {p99:.0f} ms, max {max(late)} ms, min {min(late)} ms"
              f"  target p99 <= {precision + 100} ms: {'OK' if p99 <= precision + 100 else 'MISSED'}")


if __name__ == "__main__":
    main()
