"""Append throughput of the store engine, against a plain sequential write measured in the same run.

For 128 B, 1 KiB and 4 KiB bodies: put_message (1 and 16 sender threads) and put_messages
(batches), under ASYNC_FLUSH and SYNC_FLUSH. Each line prints msg/s, MB/s of CommitLog bytes
and the ratio to writing the same number of bytes with plain sequential writes + one fsync.

    python benchmarks/append.py [--seconds 2] [--rounds 3] [--dir DIR]

With `--rounds N` every case runs N times (each against its own plain write) and the medians
are printed; `--floor` runs N times; `--open` takes N as its `--repeat`.

With `--floor` it prints the least Python work one 1 KiB message can cost: making the
MessageExt this script sends, one struct pack + CRC + copy of its record, one ConsumeQueue unit
and two index entries (no queue offsets, checks, file ends or bookkeeping), next to what
`put_messages` costs in the same run: how far a pure-Python store can go on this machine.
Each figure is given in wall and in process CPU time.

    python benchmarks/append.py --floor

With `--open N[,N...]` it instead times MessageStore.open on a store of N messages (1 KiB bodies)
after kill -9 of the writer (abnormal recovery) and after a clean close, against reading every
CommitLog byte once in the same run (wall and CPU time; medians of `--repeat` opens).

    python benchmarks/append.py --open 100000,1000000 [--repeat 3]
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import signal
import statistics
import struct
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from rmqtool.layouts.message import MessageExt
from rmqtool.store.config import StoreConfig
from rmqtool.store.messagestore import MessageStore


def message(i: int, body: bytes) -> MessageExt:
    return MessageExt(topic="BenchTopic", body=body, queue_id=i & 3, born_timestamp=1_700_000_000_000,
                      properties={"TAGS": "TagA", "UNIQ_KEY": f"7F00000100002A9F{i:016X}", "KEYS": f"k{i}"})


def plain_write(path: Path, total: int) -> float:
    """Seconds to write `total` bytes sequentially in 1 MiB chunks, then fsync."""
    chunk = os.urandom(1 << 20)
    t = time.perf_counter()
    with open(path, "wb") as f:
        left = total
        while left > 0:
            f.write(chunk[: min(left, len(chunk))])
            left -= len(chunk)
        f.flush()
        os.fsync(f.fileno())
    dt = time.perf_counter() - t
    path.unlink()
    return dt


def run_case(root: Path, body_size: int, flush: str, threads: int, batch: int,
             seconds: float) -> tuple[int, int, float, float]:
    shutil.rmtree(root, ignore_errors=True)
    cfg = StoreConfig(flush_disk_type=flush)
    body = os.urandom(body_size)
    store = MessageStore.open(root, cfg)
    stop = time.perf_counter() + seconds
    counts = [0] * threads

    def sender(t: int) -> None:
        n = 0
        base = t << 40
        while time.perf_counter() < stop:
            if batch == 1:
                for _ in range(64):
                    store.put_message(message(base + n, body))
                    n += 1
            else:
                store.put_messages([message(base + n + k, body) for k in range(batch)])
                n += batch
        counts[t] = n

    t0 = time.perf_counter()
    c0 = time.process_time()
    workers = [threading.Thread(target=sender, args=(t,)) for t in range(threads)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    store.flush()
    dt = time.perf_counter() - t0
    cpu = time.process_time() - c0
    nbytes = store.max_phy_offset
    store.close()
    shutil.rmtree(root, ignore_errors=True)
    return sum(counts), nbytes, dt, cpu


def floor_main(n: int = 200_000) -> None:
    """Per-message µs of the bare minimum an append does, against put_messages(128) on the same messages."""
    import mmap
    import zlib

    from rmqtool.layouts.constants import MESSAGE_MAGIC_CODE
    from rmqtool.layouts.consumequeue import CQ_UNIT
    from rmqtool.layouts.index import INDEX_ENTRY
    from rmqtool.layouts.message import _FIXED, topic_field
    from rmqtool.layouts.net import pack_host

    body = os.urandom(1024)
    t = _now()
    msgs = [message(i, body) for i in range(n)]
    make = _since(t)
    head, topic_b = _FIXED[False, False], topic_field("BenchTopic")[0]
    host = pack_host(msgs[0].born_host)
    log = mmap.mmap(-1, n * 1200)
    t = _now()
    pos, pack, crc32, i16 = 0, head.pack, zlib.crc32, struct.Struct(">h").pack
    for b in range(0, n, 128):
        parts: list[bytes] = []
        start = pos
        for m in msgs[b : b + 128]:
            props = "\x02".join(map("\x01".join, m.properties.items())).encode()
            size = head.size + len(m.body) + len(topic_b) + 2 + len(props)
            parts += (pack(size, MESSAGE_MAGIC_CODE, crc32(m.body) & 0x7FFFFFFF, m.queue_id, 0, 0, pos, 0, m.born_timestamp,
                           host, 0, host, 0, 0, len(m.body)), m.body, topic_b, i16(len(props)), props)
            pos += size
        log[start:pos] = b"".join(parts)
    encode = _since(t)
    cq = mmap.mmap(-1, 20 * n)
    t = _now()
    cq_pack = CQ_UNIT.pack_into
    for i in range(n):
        cq_pack(cq, 20 * i, i * 1100, 1100, 12345)
    unit = _since(t)
    slots = 5_000_000
    index = mmap.mmap(-1, 40 + 4 * slots + 40 * n + 20)
    t = _now()
    i32 = struct.Struct(">i")
    read, write, entry, count, base = i32.unpack_from, i32.pack_into, INDEX_ENTRY.pack_into, 1, 40 + 4 * slots
    for i, m in enumerate(msgs):  # Python's own str hash stands in for Java's: cheaper than the real one
        props = m.properties
        for h in (hash(props["UNIQ_KEY"]) & 0x7FFFFFFF, hash(props["KEYS"]) & 0x7FFFFFFF):
            slot = 40 + (h % slots) * 4
            entry(index, base + count * 20, h, i * 1100, 0, read(index, slot)[0])
            write(index, slot, count)
            count += 1
    keys = _since(t)
    root = Path(tempfile.mkdtemp(prefix="rmq-floor-"))
    try:
        store = MessageStore.open(root / "store", StoreConfig())
        t = _now()
        for b in range(0, n, 128):
            store.put_messages(msgs[b : b + 128])
        put = _since(t)
        store.close()
    finally:
        shutil.rmtree(root, ignore_errors=True)
    parts = [("make the MessageExt", make), ("record: pack, CRC, copy", encode), ("ConsumeQueue unit", unit),
             ("two index entries", keys)]
    us = {k: v[0] / n * 1e6 for k, v in parts}
    cpu = {k: v[1] / n * 1e6 for k, v in parts}
    for name, v in us.items():
        print(f"{name:40} {v:6.2f} µs/msg  (CPU {cpu[name]:6.2f})")
    least = us["record: pack, CRC, copy"] + us["ConsumeQueue unit"] + us["two index entries"]
    least_cpu = cpu["record: pack, CRC, copy"] + cpu["ConsumeQueue unit"] + cpu["two index entries"]
    print(f"{'floor of the store part':40} {least:6.2f} µs/msg  (CPU {least_cpu:6.2f}; at most {1e6 / least:,.0f} "
          f"msg/s; {1e6 / (least + us['make the MessageExt']):,.0f} with making the messages)")
    print(f"{'put_messages(128), same messages':40} {put[0] / n * 1e6:6.2f} µs/msg  (CPU {put[1] / n * 1e6:6.2f}; "
          f"{n / put[0]:,.0f} msg/s, {put[0] / n * 1e6 / least:.2f}x the floor, CPU {put[1] / least_cpu / n * 1e6:.2f}x)")


def _now() -> tuple[float, float]:
    return time.perf_counter(), time.process_time()


def _since(t: tuple[float, float]) -> tuple[float, float]:
    """Wall and CPU seconds since `_now()` gave `t` (CPU time moves less with the machine's load)."""
    return time.perf_counter() - t[0], time.process_time() - t[1]


_WRITER = """
import os, signal, sys
from pathlib import Path
sys.path.insert(0, sys.argv[3])
from benchmarks_append import message
from rmqtool.store.messagestore import MessageStore
store = MessageStore.open(Path(sys.argv[1]))
body = os.urandom(1024)
n = int(sys.argv[2])
for i in range(0, n, 256):
    store.put_messages([message(i + k, body) for k in range(min(256, n - i))])
store.flush()
print("ready", flush=True)
sys.stdin.read()
"""


def build_killed(root: Path, n: int) -> None:
    """Write `n` messages in a child process and kill -9 it: `abort` stays, as after a crash."""
    here = Path(__file__).resolve().parent
    shim = root.parent / "benchmarks_append.py"
    shutil.copy(Path(__file__), shim)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(here.parent), os.environ.get("PYTHONPATH", "")]))
    child = subprocess.Popen([sys.executable, "-c", _WRITER, str(root), str(n), str(root.parent)],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env, text=True)
    assert child.stdout is not None
    if child.stdout.readline().strip() != "ready":
        raise SystemExit("writer failed")
    child.send_signal(signal.SIGKILL)
    child.wait()
    shim.unlink()


def read_all(root: Path, nbytes: int) -> tuple[float, float]:
    """Wall and CPU seconds to read the first `nbytes` CommitLog bytes once (the reference)."""
    t, c = time.perf_counter(), time.process_time()
    for f in sorted((root / "commitlog").iterdir()):
        with open(f, "rb") as fh:
            while nbytes > 0 and fh.read(min(nbytes, 1 << 20)):
                nbytes -= 1 << 20
    return time.perf_counter() - t, time.process_time() - c


def _children_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def timed_open(root: Path) -> tuple[float, float, int]:
    """Wall and CPU seconds of MessageStore.open, the CPU of the processes recovery forks
    to check records on the other cores (store/scanparallel.py) included."""
    t, c, k = time.perf_counter(), time.process_time(), _children_cpu()
    store = MessageStore.open(root)
    dt, cpu = time.perf_counter() - t, time.process_time() - c + _children_cpu() - k
    end = store.max_phy_offset
    store.close()
    return dt, cpu, end


def open_main(base: Path, counts: list[int], repeat: int) -> None:
    """Each case `repeat` times on a fresh copy of the killed store; medians of the ratios.

    The CPU ratio (process time of the open against that of the read) moves much less than
    the wall one when other work shares the cores.
    """
    print(f"{'case':40} {'open s':>8} {'read-all s':>10} {'ratio':>6} {'open cpu-s':>10} {'read cpu-s':>10} "
          f"{'cpu ratio':>9}")
    for n in counts:
        killed = base / f"killed{n}"
        build_killed(killed, n)
        for label in ("after kill -9", "after clean close"):
            rows = []
            for _ in range(repeat):
                root = base / f"store{n}"
                shutil.rmtree(root, ignore_errors=True)
                shutil.copytree(killed, root)
                if label == "after clean close":
                    timed_open(root)  # recovers and closes cleanly
                dt, cpu, end = timed_open(root)
                ref, ref_cpu = read_all(root, end)
                rows.append((dt / ref, cpu / max(ref_cpu, 1e-6), dt, ref, cpu, ref_cpu))
            ratio = statistics.median(r[0] for r in rows)
            cpu_ratio = statistics.median(r[1] for r in rows)
            dt, ref, cpu, ref_cpu = (statistics.median(r[k] for r in rows) for k in (2, 3, 4, 5))
            print(f"{f'{n} msgs 1KiB open {label}':40} {dt:8.2f} {ref:10.2f} {ratio:6.2f} {cpu:10.2f} {ref_cpu:10.2f} "
                  f"{cpu_ratio:9.2f}", flush=True)
        shutil.rmtree(base / f"store{n}", ignore_errors=True)
        shutil.rmtree(killed, ignore_errors=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--seconds", type=float, default=2.0, help="duration of each case")
    ap.add_argument("--dir", type=Path, default=None, help="where to write (default: a temp dir)")
    ap.add_argument("--sizes", default="128,1024,4096")
    ap.add_argument("--floor", action="store_true", help="print the least Python work per message instead")
    ap.add_argument("--open", default=None, help="message counts: time store open instead of appends")
    ap.add_argument("--repeat", type=int, default=3, help="--open: opens per case (medians printed)")
    ap.add_argument("--rounds", type=int, default=1, help="runs of every case (medians printed)")
    args = ap.parse_args()
    if args.floor:
        for _ in range(max(1, args.rounds)):
            floor_main()
        return
    if args.rounds > 1 and args.open:
        args.repeat = args.rounds
    base = Path(tempfile.mkdtemp(dir=args.dir, prefix="rmq-bench-"))
    try:
        if args.open:
            open_main(base, [int(n) for n in args.open.split(",")], args.repeat)
            return
        # msg/cpu-s divides by the CPU time of this process (all threads) instead of the wall
        # time: on a shared machine it moves much less with what else runs
        print(f"{'case':44} {'msg/s':>10} {'MB/s':>8} {'plain MB/s':>10} {'ratio':>6} {'msg/cpu-s':>10}")
        for size in (int(s) for s in args.sizes.split(",")):
            for flush, threads, batch in [("ASYNC_FLUSH", 1, 1), ("ASYNC_FLUSH", 16, 1), ("ASYNC_FLUSH", 1, 128),
                                          ("SYNC_FLUSH", 1, 1), ("SYNC_FLUSH", 16, 1), ("SYNC_FLUSH", 1, 128)]:
                runs = []
                for _ in range(max(1, args.rounds)):
                    n, nbytes, dt, cpu = run_case(base / "store", size, flush, threads, batch, args.seconds)
                    runs.append((n / dt, nbytes / dt / 1e6, nbytes / plain_write(base / "plain", nbytes) / 1e6,
                                 n / cpu))
                rate, mbs, plain_mbs, per_cpu = (statistics.median(r[k] for r in runs) for k in range(4))
                api = "put_message" if batch == 1 else f"put_messages({batch})"
                name = f"{size}B {flush} {threads}thr {api}"
                print(f"{name:44} {rate:10.0f} {mbs:8.1f} {plain_mbs:10.1f} {mbs / plain_mbs:6.2f} {per_cpu:10.0f}",
                      flush=True)
    finally:
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
