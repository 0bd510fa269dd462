"""CPU of the putting process with the index built in-process and by a second process.

`put_messages` of ready-made 1 KiB messages (batches of 128, async flush), made before the
clock starts; prints the main process's CPU time per message (getrusage), wall rate, and for
the second process its CPU and how long the drain at close took. Modes run in turn.

    python benchmarks/index_process.py [--messages 200000] [--rounds 3] [--modes inproc,process]

`--mode X --messages N` alone runs one case and prints one line (for callgrind: `valgrind
--tool=callgrind --callgrind-out-file=/dev/null python benchmarks/index_process.py --mode
process --messages 20000`, less a run of `--mode make --messages 20000`, which makes the
messages and opens and closes the store without putting them; the child is not traced; with
`--trace-children=yes` and `--start-timeout 900` it is, in a callgrind file of its own).
`--mode noindex` puts without an index at all: inproc less noindex is what in-process
indexing costs the putting process, the figure the child's own CPU per message is held to.
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from rmqtool.layouts.message import MessageExt
from rmqtool.store import indexclient
from rmqtool.store.config import StoreConfig
from rmqtool.store.messagestore import MessageStore


def messages(n: int, body: bytes) -> list[MessageExt]:
    return [MessageExt(topic="BenchTopic", body=body, queue_id=i & 3, born_timestamp=1_700_000_000_000,
                       properties={"TAGS": "TagA", "UNIQ_KEY": f"7F00000100002A9F{i:016X}", "KEYS": f"k{i}"})
            for i in range(n)]


def cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def child_cpu(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def one(mode: str, n: int, batch: int, directory: Path) -> str:
    msgs = messages(n, b"x" * 1024)
    store = MessageStore.open(directory, StoreConfig(message_index_enable=mode != "noindex"))
    pid = 0
    if mode == "make":  # the messages, the open and the close only: subtracted by callgrind readings
        store.close()
        return f"make n={n}"
    if mode == "process":
        if not store.start_index_process():
            raise SystemExit("index process not started")
        pid = store.index.proc.pid  # type: ignore[union-attr]
    c0, t0 = cpu(), time.perf_counter()
    for i in range(0, n, batch):
        store.put_messages(msgs[i : i + batch])
    c1, t1 = cpu(), time.perf_counter()
    child = child_cpu(pid) if pid else 0.0
    store.close()
    t2 = time.perf_counter()
    child_total = resource.getrusage(resource.RUSAGE_CHILDREN)
    child_all = child_total.ru_utime + child_total.ru_stime if pid else 0.0
    per = 1e6 / max(n, 1)
    return (f"{mode} n={n} main_cpu_us={(c1 - c0) * per:.2f} wall_msg_s={n / max(t1 - t0, 1e-9):.0f} "
            f"child_cpu_us_during={child * per:.2f} child_cpu_us_total={child_all * per:.2f} "
            f"close_s={t2 - t1:.3f}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--messages", type=int, default=200_000)
    ap.add_argument("--batch", type=int, default=128)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--modes", default="inproc,process")
    ap.add_argument("--mode", default=None, help="run one case in this process and print it")
    ap.add_argument("--dir", type=Path, default=None)
    ap.add_argument("--start-timeout", type=float, default=None,
                    help="seconds the child may take to start (under valgrind --trace-children=yes: minutes)")
    args = ap.parse_args()
    if args.start_timeout is not None:
        indexclient._START_TIMEOUT_S = args.start_timeout
    base = Path(tempfile.mkdtemp(prefix="idxproc-", dir=args.dir))
    try:
        if args.mode:
            print(one(args.mode, args.messages, args.batch, base / "s"))
            return
        lines: dict[str, list[float]] = {}
        for r in range(args.rounds):
            for mode in args.modes.split(","):
                out = subprocess.run([sys.executable, __file__, "--mode", mode, "--messages", str(args.messages),
                                      "--batch", str(args.batch), "--dir", str(base)],
                                     capture_output=True, text=True, check=True).stdout.strip()
                print(f"round {r + 1}: {out}", flush=True)
                lines.setdefault(mode, []).append(float(out.split("main_cpu_us=")[1].split()[0]))
        for mode, values in lines.items():
            print(f"{mode}: main-process CPU per message, median {statistics.median(values):.2f} us")
    finally:
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
