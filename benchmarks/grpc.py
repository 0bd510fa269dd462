"""Send and receive throughput of serve's gRPC endpoint against Apache's proxy + broker, same SDK.

    python benchmarks/grpc.py [--duration 5] [--threads 4] [--targets rmqtool,apache] [--rounds 1]

The load generator is Apache's Python 5.x SDK (PyPI rocketmq-python-client 5.1.2) for both
targets: `--threads` threads share one Producer and send 1 KiB messages synchronously for
`--duration` seconds (after `--warmup` seconds of unmeasured sends); then `--threads` threads share one SimpleConsumer and receive (32 at a
time, 30 s invisible) and ack until everything sent (the warm-up's too) has come back.

Targets:
  rmqtool  `python -m rmqtool serve --grpc-port 0` on a fresh store (async flush).
  apache   Apache RocketMQ 5.3.3's broker (tests/interop/java, ApacheBroker) with Apache's proxy
           5.3.3 in cluster mode in front (ProxyStartup, tests/interop/sdk5/proxy.xml); built by
           .ci/steps/10-interop.sh and 12-sdk5-proxy.sh, skipped when not built.

Prints one line per target and phase, with the server processes' CPU per message from /proc
(serve's one process; the broker's and the proxy's for Apache), and the ratios rmqtool / apache.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# run as a script, this file's folder comes first on sys.path, and this file would be `import grpc`
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]
sys.path.insert(0, str(ROOT))

BODY = bytes((i * 7) % 251 for i in range(1024))
TICK = os.sysconf("SC_CLK_TCK")


@dataclass
class Target:
    kind: str
    grpc: str
    broker: str
    namesrv: str
    pids: list[int]
    stop: object


def cpu_seconds(pids: list[int]) -> float:
    total = 0
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            total += int(fields[11]) + int(fields[12])  # utime + stime
        except OSError:
            pass
    return total / TICK


def start_rmqtool(root: Path) -> Target:
    from tests.interop.conftest import start_rmqtool_serve, stop_rmqtool_serve

    b = start_rmqtool_serve(root, "--grpc-port", "0")
    m = re.search(r"gRPC ([\d.]+:\d+)", (root / "serve.stderr").read_text())
    assert m, "serve names no gRPC endpoint"
    return Target("rmqtool", m.group(1), b.broker, b.namesrv, [b.proc.pid], lambda: stop_rmqtool_serve(b))


def start_apache_proxy(root: Path) -> Target | None:
    from tests.interop.conftest import free_port, start_apache, wait_port
    from tests.interop.harness import JAVA_OPENS, java_classpath

    cp = ROOT / "tests" / "interop" / "sdk5" / "target" / "proxy-classpath.txt"
    if java_classpath() is None or not cp.is_file():
        print("apache: skipped (run .ci/steps/10-interop.sh and .ci/steps/12-sdk5-proxy.sh)", file=sys.stderr)
        return None
    b = start_apache(root / "broker")
    port = free_port()
    conf = root / "rmq-proxy.json"
    conf.write_text(json.dumps({"rocketMQClusterName": "DefaultCluster", "namesrvAddr": b.namesrv,
                                "grpcServerPort": port, "remotingListenPort": free_port(), "proxyMode": "cluster"}))
    log = open(root / "proxy.log", "wb")  # noqa: SIM115 - lives as long as the process
    proxy = subprocess.Popen(["java", "-Xmx512m", "-Djava.net.preferIPv4Stack=true", f"-Duser.home={root / 'home'}",
                              *JAVA_OPENS, "-cp", cp.read_text().strip(), "org.apache.rocketmq.proxy.ProxyStartup",
                              "-pc", str(conf), "-pm", "cluster"],
                             stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT)
    wait_port(f"127.0.0.1:{port}", time.time() + 90)

    def stop() -> None:
        for p in (proxy, b.proc):
            p.kill()
            p.wait()

    return Target("apache", f"127.0.0.1:{port}", b.broker, b.namesrv, [b.proc.pid, proxy.pid], stop)


def run_phase(threads: int, work, stop_when) -> tuple[int, float]:
    """`threads` threads call `work()` (which returns how many messages it handled) until `stop_when()`."""
    counts = [0] * threads

    def loop(i: int) -> None:
        while not stop_when():
            counts[i] += work()

    ts = [threading.Thread(target=loop, args=(i,)) for i in range(threads)]
    t0 = time.perf_counter()
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    return sum(counts), time.perf_counter() - t0


def bench(t: Target, duration: float, threads: int, warmup: float) -> dict[str, tuple[float, float]]:
    from rocketmq import ClientConfiguration, Credentials, FilterExpression, Message, Producer, SimpleConsumer

    from tests.proxy.conftest import create_topic, unique

    topic, group = unique("BenchGrpc"), unique("BenchGrpcG")
    create_topic(t, topic, 8)
    cfg = ClientConfiguration(t.grpc, Credentials())
    consumer = SimpleConsumer(cfg, group, {topic: FilterExpression("*")}, await_duration=5)
    consumer.startup()  # before the sends: the group starts at the queues' beginning
    producer = Producer(cfg, (topic,))
    producer.startup()
    out: dict[str, tuple[float, float]] = {}

    def send() -> int:
        m = Message()
        m.topic, m.body, m.tag = topic, BODY, "B"
        producer.send(m)
        return 1

    warm_end = time.perf_counter() + warmup  # JIT and connection set-up, not measured; received below
    warm, _ = run_phase(threads, send, lambda: time.perf_counter() >= warm_end)
    c0 = cpu_seconds(t.pids)
    end = time.perf_counter() + duration
    sent, took = run_phase(threads, send, lambda: time.perf_counter() >= end)
    out["send"] = (sent / took, (cpu_seconds(t.pids) - c0) / max(1, sent) * 1e6)
    producer.shutdown()

    got = [0]
    lock = threading.Lock()
    deadline = time.perf_counter() + max(60.0, duration * 10)

    def receive() -> int:
        msgs = consumer.receive(32, 30)
        for m in msgs:
            consumer.ack(m)
        with lock:
            got[0] += len(msgs)
        return len(msgs)

    c0 = cpu_seconds(t.pids)
    received, took = run_phase(threads, receive, lambda: got[0] >= sent + warm or time.perf_counter() >= deadline)
    out["receive+ack"] = (received / took, (cpu_seconds(t.pids) - c0) / max(1, received) * 1e6)
    consumer.shutdown()
    if received < sent + warm:
        print(f"{t.kind}: only {received} of {sent + warm} messages came back", file=sys.stderr)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--duration", type=float, default=5.0)
    ap.add_argument("--threads", type=int, default=4)
    ap.add_argument("--targets", default="rmqtool,apache")
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--warmup", type=float, default=3.0, help="seconds of unmeasured sends first")
    args = ap.parse_args()
    import logging

    logging.disable(logging.WARNING)  # the SDK's INFO lines
    print(f"# {os.cpu_count()} cores, Python SDK rocketmq-python-client, {args.threads} threads, "
          f"1 KiB messages, {args.duration:g} s of sends", flush=True)
    results: dict[str, dict[str, list[float]]] = {}
    with tempfile.TemporaryDirectory(prefix="rmq-bench-grpc-") as tmp:
        targets = []
        for kind in args.targets.split(","):
            start = start_rmqtool if kind == "rmqtool" else start_apache_proxy
            tgt = start(Path(tmp) / kind)
            if tgt is not None:
                targets.append(tgt)
        try:
            for _ in range(args.rounds):
                for tgt in targets:
                    for phase, (rate, cpu_us) in bench(tgt, args.duration, args.threads, args.warmup).items():
                        results.setdefault(tgt.kind, {}).setdefault(phase, []).append(rate)
                        print(f"{tgt.kind:8} {phase:12} {rate:9.0f} msg/s  server CPU {cpu_us:7.0f} us/msg", flush=True)
        finally:
            for tgt in targets:
                tgt.stop()
    if "rmqtool" in results and "apache" in results:
        for phase in results["rmqtool"]:
            ref = statistics.median(results["apache"][phase])
            if ref <= 0:
                print(f"ratio    {phase:12} (apache handled nothing)")
                continue
            r = statistics.median(results["rmqtool"][phase]) / ref
            print(f"ratio    {phase:12} {r:9.2f}x  (rmqtool / apache, median of {args.rounds} round(s))")


if __name__ == "__main__":
    main()
