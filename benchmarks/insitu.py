"""Instructions `rmqtool serve` executes per message under serve.py's load: serve run under
callgrind and driven by serve.py's Java generator (Apache's RocketMQ Java client 5.3.3).

    python benchmarks/insitu.py [--cases single:1,batch:1,batch:4,consume] [--duration 20] [--python PATH]

On a shared machine CPU time per message moves by 2-3x within minutes (serve's CPU per single
send from one producer measured 176 to 288 µs within one hour of 2026-12-05); the instructions a case executes
do not move with load. benchmarks/reqpath.py counts them for a request fed to the handler in
process; this counts them where serve really runs: the socket calls, the loop's wake-ups, its
periodic tasks, the flush thread and the clients' own route and heartbeat requests included. So
a change to the request path can be weighed case by case on a noisy machine.

Each case: the counters zeroed (`callgrind_control -z`), the case run with no unmeasured warm-up
(serve under callgrind is about 50x slower, so the clients' start-up adds only their own few
requests), the counters dumped (`-d`), their total divided by the messages the case moved. Only
user-space instructions of every thread of serve's process are counted (not the kernel's).
Needs valgrind, java and mvn.
"""

from __future__ import annotations

import argparse
import asyncio
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # the serve_* modules beside this script
sys.path.insert(1, str(Path(__file__).resolve().parents[1]))

from serve_java import CLIENT_WARMUP, JAVA_CLIENT, build_java_client, java_consume, java_produce  # noqa: E402
from serve_targets import Target, start_rmqtool  # noqa: E402
from serve_wire import rmq_create_topic, rmq_route_ready  # noqa: E402

_TOTAL = re.compile(rb"^(?:summary|totals): (\d+)", re.M)


def counted(t: Target, work: Path, run) -> tuple[int, int]:
    """(instructions, messages) of `run()` between a zeroing and a dump of serve's counters."""
    before = set(work.glob("callgrind.out*"))
    subprocess.run(["callgrind_control", "-z", str(t.proc.pid)], capture_output=True, check=True)
    r = run()
    subprocess.run(["callgrind_control", "-d", str(t.proc.pid)], capture_output=True, check=True)
    for _ in range(100):
        new = set(work.glob("callgrind.out*")) - before
        totals = [_TOTAL.search(f.read_bytes()) for f in new]
        if new and all(totals):
            return sum(int(m.group(1)) for m in totals if m), r.msgs
        time.sleep(0.2)
    raise RuntimeError("callgrind wrote no dump")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cases", default="single:1,batch:1,batch:4,consume",
                    help="MODE:PRODUCERS (single or batch) or consume (pulls back what the cases sent)")
    ap.add_argument("--duration", type=float, default=20.0, help="seconds each produce case sends")
    ap.add_argument("--python", default=sys.executable, help="the interpreter that runs serve")
    ap.add_argument("--client-procs", type=int, default=2)
    args = ap.parse_args()
    if not (shutil.which("valgrind") and shutil.which("callgrind_control")):
        raise SystemExit("needs valgrind")
    cmd = build_java_client()
    if cmd is None:
        raise SystemExit("the Java load generator needs java and mvn")
    JAVA_CLIENT[:] = cmd
    CLIENT_WARMUP[0] = 0.0
    work = Path(tempfile.mkdtemp(prefix="insitu-"))  # callgrind's dumps
    # serve as serve.py's `rmqtool` target starts it (async flush, the index on the loop), under
    # callgrind: about 50x slower, so it gets 15 minutes to start
    t = start_rmqtool("async", "rmqtool", args.python,
                      ["valgrind", "--tool=callgrind", f"--callgrind-out-file={work / 'callgrind.out'}"], 900.0)
    try:
        topic = "BenchInsitu"
        asyncio.run(rmq_create_topic(t.broker, topic))
        asyncio.run(rmq_route_ready(t.namesrv, topic))
        for case in args.cases.split(","):
            if case == "consume":
                instr, msgs = counted(t, work, lambda: java_consume(t, topic, args.client_procs))
            else:
                mode, producers = case.split(":")
                instr, msgs = counted(t, work, lambda mode=mode, p=int(producers): java_produce(
                    t, topic, mode, p, args.duration, args.client_procs))
            print(f"{case:10s} {msgs:8d} msgs  {instr / max(1, msgs) / 1000:8.1f}k instructions per message",
                  flush=True)
    finally:
        t.stop()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
