"""benchmarks/serve.py's Java load generator (the default): benchmarks/java's LoadGen, Apache's
RocketMQ Java client 5.3.3 and NATS' jnats, built with Maven on first use; each case's producers
start together after their unmeasured warm-up, and the server's CPU is read over the same window."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import threading
import time

from serve_common import QUEUES, Result, loop_sched, server_cpu, spread
from serve_targets import ROOT, Target

JAVA_DIR = ROOT / "benchmarks" / "java"
JAVA_CLIENT: list[str] = []  # the java command line prefix once built
CLIENT_WARMUP = [2.0]  # --client-warmup: unmeasured seconds each Java producer sends before its window


def build_java_client() -> list[str] | None:
    """Compile benchmarks/java (Apache's RocketMQ Java client + NATS' jnats) with Maven, once."""
    cp_file = JAVA_DIR / "target" / "classpath.txt"
    main_class = JAVA_DIR / "target" / "classes" / "rmqtool" / "bench" / "LoadGen.class"
    source = JAVA_DIR / "src" / "main" / "java" / "rmqtool" / "bench" / "LoadGen.java"
    if not shutil.which("java"):
        return None
    if not (cp_file.is_file() and main_class.is_file() and main_class.stat().st_mtime >= source.stat().st_mtime):
        if not shutil.which("mvn"):
            return None
        goals = ["-q", "-B", "-f", str(JAVA_DIR / "pom.xml"), "compile", "dependency:build-classpath"]
        ok = subprocess.run(["mvn", "-o", *goals], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).returncode == 0
        if not ok and subprocess.run(["mvn", *goals]).returncode != 0:
            return None
    cp = str(JAVA_DIR / "target" / "classes") + os.pathsep + cp_file.read_text().strip()
    return ["java", "-Xms256m", "-Xmx512m", "-XX:+UseParallelGC", "-XX:TieredStopAtLevel=1",
            "-Djava.net.preferIPv4Stack=true", "-cp", cp, "rmqtool.bench.LoadGen"]


def _java_results(procs: list[subprocess.Popen], timeout: float) -> list[dict]:
    """Each load generator's JSON line: count, lat, busy, and its measured window (t0, t1, epoch
    ms) with the client CPU seconds spent in it (cpu)."""
    out = []
    for p in procs:
        try:
            stdout, _ = p.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            p.kill()
            stdout, _ = p.communicate()
        lines = [x for x in stdout.decode("utf-8", "replace").splitlines() if x.startswith("{")]
        if not lines:
            raise RuntimeError(f"java load generator exited {p.returncode} without a result")
        r = json.loads(lines[-1])
        if "error" in r:
            raise RuntimeError(r["error"])
        out.append(r)
    return out


def java_produce(t: Target, topic: str, mode: str, producers: int, duration: float, client_procs: int) -> Result:
    kind = "nats" if t.kind == "nats" else "rocketmq"
    addr = t.broker if t.kind == "nats" else t.namesrv
    warmup = CLIENT_WARMUP[0]
    # JVM start, client start and route lookups, then `warmup` s of unmeasured sends, before the go
    start_at = int((time.time() + 6 + warmup) * 1000)
    procs, first = [], 0
    for n in spread(producers, min(producers, client_procs)):
        procs.append(subprocess.Popen([*JAVA_CLIENT, kind, "produce", mode, addr, topic, str(first), str(n),
                                       str(start_at), str(duration), str(warmup)], stdout=subprocess.PIPE,
                                      stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL))
        first += n
    # the server's CPU in the measured window alone (not the clients' start nor their warm-up)
    marks: list[tuple[float | None, tuple[float, float] | None]] = []
    sampler = threading.Thread(target=_sample_cpu, args=(t, start_at / 1000, duration, marks), daemon=True)
    sampler.start()
    results = _java_results(procs, duration + 120)
    sampler.join()
    res = Result(t.name, f"produce {mode:6s} x{producers:<2d}", sum(r["count"] for r in results), duration,
                 [x for r in results for x in r["lat"]], sum(r["busy"] for r in results),
                 client_cpu=sum(r["cpu"] for r in results))
    if len(marks) == 2:
        (c0, s0), (c1, s1) = marks
        if c0 is not None and c1 is not None:
            res.server_cpu = c1 - c0
        if s0 is not None and s1 is not None:
            res.loop_run, res.loop_wait = s1[0] - s0[0], s1[1] - s0[1]
    return res


def _sample_cpu(t: Target, start: float, duration: float,
                marks: list[tuple[float | None, tuple[float, float] | None]]) -> None:
    """`server_cpu` and `loop_sched` at epoch second `start` and `duration` s later, into `marks`."""
    for at in (start, start + duration):
        time.sleep(max(0.0, at - time.time()))
        marks.append((server_cpu(t), loop_sched(t)))


def java_consume(t: Target, topic: str, client_procs: int) -> Result:
    """Everything back, a puller per queue; timed from the moment every puller of every process has
    its queue (client start-up, about 1-2 s of JVM and client start, is outside, as for produce)."""
    kind = "nats" if t.kind == "nats" else "rocketmq"
    addr = t.broker if t.kind == "nats" else t.namesrv
    groups = [list(range(QUEUES))[i::client_procs] for i in range(client_procs)]
    procs = [subprocess.Popen([*JAVA_CLIENT, kind, "consume", addr, topic, ",".join(map(str, g))],
                              stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL)
             for g in groups]
    results = _java_results(procs, 600)
    took = (max(r["t1"] for r in results) - min(r["t0"] for r in results)) / 1000
    return Result(t.name, "consume (pull 32)     ", sum(r["count"] for r in results), took,
                  [x for r in results for x in r["lat"]], client_cpu=sum(r["cpu"] for r in results))
