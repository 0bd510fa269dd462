"""Send and consume throughput of rmqtool.client beside Apache's C++ client (PyPI `rocketmq` 0.4.4).

Both clients do the same work in the same run, each in its own process, against the same server:
`rmqtool serve`, and Apache RocketMQ 5.3.x when its jars are built (tests/interop/java):

  sync send   N messages one after another from one thread (each waits for SEND_OK)
  sync (await) rmqtool only: the same, awaited on the client's event loop (`Producer.asend`)
  async send  N messages with callbacks, all in flight at once, until every callback came
  consume     N messages with a push consumer (clustering, fresh group), first to last message
Each client runs `--repeat` times per phase, alternating with the other; the best run counts.

Usage: python benchmarks/client.py [--messages 5000] [--size 128] [--servers serve,apache]
The C++ client is looked up in tests/interop/pylib/cpp1 (installed by .ci/steps) or
$RMQ_CPP_CLIENT_PATH; without it only rmqtool's figures are printed.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "client"))
sys.path.insert(0, str(ROOT))  # tests/client/servers.py imports tests.serve_helpers


# ---- workers (run in their own process) -----------------------------------------------------------------
def worker_rmqtool(op: str, namesrv: str, topic: str, n: int, size: int) -> float:
    from rmqtool.client import CONSUME_FROM_FIRST_OFFSET, ConsumeStatus, Message, Producer, PushConsumer

    body = b"x" * size
    if op in ("sync", "async", "sync-aio"):
        with Producer(f"bench_pg_{os.getpid()}", namesrv) as p:
            p.send(Message(topic, body))  # route and connection, outside the timing
            t0 = time.perf_counter()
            if op == "sync":
                for _ in range(n):
                    p.send(Message(topic, body))
            elif op == "sync-aio":  # the same sends awaited one by one on the client's loop: no thread hop

                async def sends() -> None:
                    for _ in range(n):
                        await p.asend(Message(topic, body))

                p.instance.run(sends())
            else:
                done = threading.Event()
                left = [n]
                lock = threading.Lock()

                def cb(result, error):
                    with lock:
                        left[0] -= 1
                        if left[0] == 0:
                            done.set()

                for _ in range(n):
                    p.send_async(Message(topic, body), cb)
                done.wait(300)
            return time.perf_counter() - t0
    got = [0]
    first = [0.0]
    last = threading.Event()
    lock = threading.Lock()

    def listener(msgs, ctx):
        with lock:
            if got[0] == 0:
                first[0] = time.perf_counter()
            got[0] += len(msgs)
            if got[0] >= n:
                last.set()
        return ConsumeStatus.CONSUME_SUCCESS

    c = PushConsumer(f"bench_cg_{os.getpid()}", namesrv, consume_from_where=CONSUME_FROM_FIRST_OFFSET)
    c.subscribe(topic, "*").register_listener(listener).start()
    last.wait(300)
    t = time.perf_counter() - first[0]
    c.shutdown()
    return t


def worker_cpp(op: str, namesrv: str, topic: str, n: int, size: int) -> float:
    from rocketmq.client import Message, Producer, PushConsumer

    body = b"x" * size
    if op in ("sync", "async"):
        p = Producer(f"bench_cpp_pg_{os.getpid()}")
        p.set_namesrv_addr(namesrv)
        p.start()
        for attempt in range(20):  # the first send may race the topic's creation on the broker
            m = Message(topic)
            m.set_body(body)
            try:
                p.send_sync(m)
                break
            except Exception:
                if attempt == 19:
                    raise
                time.sleep(0.5)
        t0 = time.perf_counter()
        if op == "sync":
            for _ in range(n):
                m = Message(topic)
                m.set_body(body)
                p.send_sync(m)
        else:
            done = threading.Event()
            left = [n]
            lock = threading.Lock()

            def ok(_res):
                with lock:
                    left[0] -= 1
                    if left[0] == 0:
                        done.set()

            def err(_e):
                ok(None)

            msgs = []
            for _ in range(n):
                m = Message(topic)
                m.set_body(body)
                msgs.append(m)  # keep alive until sent
                p.send_async(m, ok, err)
            done.wait(300)
        t = time.perf_counter() - t0
        print(json.dumps({"seconds": t}), flush=True)
        os._exit(0)  # the C++ producer's shutdown may abort (boost::thread_interrupted); the figure is out
    got = [0]
    first = [0.0]
    last = threading.Event()
    lock = threading.Lock()

    def callback(msg):
        with lock:
            if got[0] == 0:
                first[0] = time.perf_counter()
            got[0] += 1
            if got[0] >= n:
                last.set()

    c = PushConsumer(f"bench_cpp_cg_{os.getpid()}")
    c.set_namesrv_addr(namesrv)
    c.subscribe(topic, callback)
    c.start()
    last.wait(300)
    t = time.perf_counter() - first[0]
    print(json.dumps({"seconds": t, "count": got[0]}), flush=True)
    os._exit(0)  # the C++ consumer's shutdown can take many seconds; the figure is already out


# ---- driver ----------------------------------------------------------------------------------------------
def cpp_path() -> Path | None:
    for p in (os.environ.get("RMQ_CPP_CLIENT_PATH"), ROOT / "tests" / "interop" / "pylib" / "cpp1"):
        if p and (Path(p) / "rocketmq" / "librocketmq.so").is_file():
            return Path(p)
    return None


def run_worker(kind: str, op: str, namesrv: str, topic: str, n: int, size: int) -> float | None:
    env = dict(os.environ)
    if kind == "cpp":
        path = cpp_path()
        if path is None:
            return None
        env["PYTHONPATH"] = str(path)
    else:
        env["PYTHONPATH"] = str(ROOT)
    p = subprocess.run([sys.executable, __file__, "--worker", kind, op, namesrv, topic, str(n), str(size)],
                       capture_output=True, env=env, timeout=600)
    for line in reversed(p.stdout.decode().splitlines()):
        if line.startswith("{"):
            return json.loads(line)["seconds"]
    print(f"  {kind} {op} failed: {p.stderr.decode(errors='replace')[-500:]}", file=sys.stderr)
    return None


def best(times: list[float | None]) -> float | None:
    ok = [t for t in times if t]
    return min(ok) if ok else None


def bench_server(kind: str, n: int, size: int, tmp: Path, repeat: int
                 ) -> list[tuple[str, str, float | None, float | None]]:
    from servers import start_server  # tests/client/servers.py

    try:
        server = start_server(kind, tmp / kind)
    except BaseException as e:  # pytest.skip outside pytest is an exception too
        print(f"{kind}: not available ({e})", file=sys.stderr)
        return []
    rows = []
    try:
        # alternate the two clients and keep each one's best run: the machine's other load varies
        for op in ("sync", "async"):
            ours, cpp = [], []
            for r in range(repeat):
                ours.append(run_worker("rmqtool", op, server.namesrv, f"BenchPy_{op}_{r}", n, size))
                cpp.append(run_worker("cpp", op, server.namesrv, f"BenchCpp_{op}_{r}", n, size))
            rows.append((kind, f"{op} send", best(ours), best(cpp)))
            if op == "sync":  # rmqtool's coroutine API, against the same C++ sync figure
                aio = [run_worker("rmqtool", "sync-aio", server.namesrv, f"BenchPy_aio_{r}", n, size)
                       for r in range(repeat)]
                rows.append((kind, "sync (await)", best(aio), best(cpp)))
        ours, cpp = [], []
        for r in range(repeat):  # each consumes a topic the sends above filled (n + 1 messages)
            ours.append(run_worker("rmqtool", "consume", server.namesrv, f"BenchPy_sync_{r}", n, size))
            cpp.append(run_worker("cpp", "consume", server.namesrv, f"BenchCpp_sync_{r}", n, size))
        rows.append((kind, "consume", best(ours), best(cpp)))
    finally:
        server.stop()
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--messages", type=int, default=5000)
    ap.add_argument("--size", type=int, default=128)
    ap.add_argument("--servers", default="serve,apache")
    ap.add_argument("--repeat", type=int, default=2, help="runs per client and phase; the best counts")
    ap.add_argument("--worker", nargs=6, metavar=("KIND", "OP", "NAMESRV", "TOPIC", "N", "SIZE"))
    ap.add_argument("--rounds", type=int, default=1,
                    help="run the whole measurement N times in turn, each round printed")
    a = ap.parse_args()
    if a.worker:
        kind, op, namesrv, topic, n, size = a.worker
        fn = worker_cpp if kind == "cpp" else worker_rmqtool
        t = fn(op, namesrv, topic, int(n), int(size))
        print(json.dumps({"seconds": t}), flush=True)
        return
    for r in range(a.rounds):
        if a.rounds > 1:
            print(f"# round {r + 1} of {a.rounds}", flush=True)
        _round(a)


def _round(a: argparse.Namespace) -> None:
    """One round of the measurement, its figures and ratios printed."""
    if cpp_path() is None:
        print("C++ client (PyPI rocketmq 0.4.4) not found: only rmqtool figures", file=sys.stderr)
    rows = []
    with tempfile.TemporaryDirectory() as d:
        for kind in a.servers.split(","):
            rows += bench_server(kind.strip(), a.messages, a.size, Path(d), a.repeat)
    n = a.messages
    print(f"{n} messages of {a.size} B each; msgs/s, best of {a.repeat} (higher is better); "
          f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
    print(f"{'server':8} {'phase':12} {'rmqtool.client':>15} {'C++ rocketmq':>13} {'ratio':>7}")
    for kind, phase, ours, cpp in rows:
        r1 = f"{n / ours:,.0f}" if ours else "-"
        r2 = f"{n / cpp:,.0f}" if cpp else "-"
        ratio = f"{cpp / ours:.2f}x" if ours and cpp else "-"
        print(f"{kind:8} {phase:12} {r1:>15} {r2:>13} {ratio:>7}")


if __name__ == "__main__":
    main()
