"""Produce / consume throughput and latency of `rmqtool serve` against the references on this machine.

    python benchmarks/serve.py [--duration 5] [--producers 1,4,16] [--targets rmqtool,apache,nats] [--rounds 3]

Measured in one run with the same load generator for every target: 1 KiB messages from 1, 4 and
16 producers (each a connection with one request in flight, like a synchronous producer), single
sends (SEND_MESSAGE_V2) and batch sends (SEND_BATCH_MESSAGE, 32 messages), then consumers pulling
everything back (PULL_MESSAGE, 32 per pull, one puller per queue). Producers are spread over
several client processes; the script prints the machine's core count because server and clients
share it.

The load generator (`--client java`, the default) is benchmarks/java: Apache RocketMQ's own Java
client 5.3.3 (DefaultMQProducer per producer, DefaultMQPullConsumer) for both RocketMQ brokers and
NATS' jnats for JetStream, compiled by Maven on first use. `--client python` uses this script's
raw-protocol asyncio generator instead, which saturates before the servers do (kept for machines
without Java).

Targets:
  rmqtool  `python -m rmqtool serve` on a fresh store (async flush, like Apache's default).
  apache   Apache RocketMQ 5.3.3's broker via tests/interop/java (built by .ci/steps of the interop
           suite: mvn -q -f tests/interop/java/pom.xml package); skipped when not built.
  ceiling  (not by default) benchmarks/nullsend.py: serve answering every send as stored without
           storing it; its rates are near the most any broker reaches here with the same clients
           sharing the cores (no consume case); printed as ceiling / broker per case.
  nats     NATS JetStream (`nats-server -js`, Debian package nats-server, installed with apt-get by
           the setup when missing and the user may) with file storage: the same
           generator speaking NATS' protocol, publishing with acks (JetStream's equivalent of a
           stored send), batches as 32 pipelined publishes, consumption through a pull consumer.

Prints one line per case (with the server's CPU per message, its child processes' included, from /proc: on a shared
machine throughput moves with other load, CPU per message much less; with the Java generator also
the client's own CPU per message in its measured window) and the throughput ratio rmqtool /
reference. With the Java generator every case is timed without the clients' start-up: produce from
an agreed start, after `--client-warmup` seconds (default 2) in which every producer already sends
what is not counted (its JVM's JIT compiles the send path before the window, as for every target;
before 2026-12-03 each case's fresh client JVMs warmed up inside the window, which moved a case by
up to 2x between rounds), consume from the moment every puller has its queue (the Python generator's
consume still includes its processes' start). Where the client's CPU per message is several times
the server's (Apache's Java client on single sends), the case measures the client on 2 shared cores
as much as the server.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing as mp
import os
import re
import shutil
import signal
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

MSG_SIZE = 1024
BATCH = 32
QUEUES = 8
BODY = bytes((i * 7) % 251 for i in range(MSG_SIZE))
BUSY = [0]  # sends refused with SYSTEM_BUSY in this client process


# ---------------------------------------------------------------------------------------- targets

@dataclass
class Target:
    name: str
    kind: str  # "rocketmq" | "nats"
    broker: str  # host:port of the broker (RocketMQ) or the NATS server
    proc: subprocess.Popen | None = None
    workdir: Path | None = None
    notes: list[str] = field(default_factory=list)
    namesrv: str = ""  # host:port of the name server (RocketMQ), where the Java client starts

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self.workdir is not None:
            shutil.rmtree(self.workdir, ignore_errors=True)


def _wait_line(stream, pattern: re.Pattern, timeout: float, proc: subprocess.Popen) -> re.Match:
    deadline = time.time() + timeout
    buf = ""
    os.set_blocking(stream.fileno(), False)
    while time.time() < deadline:
        chunk = stream.read()
        if chunk:
            buf += chunk.decode(errors="replace") if isinstance(chunk, bytes) else chunk
            m = pattern.search(buf)
            if m:
                return m
        if proc.poll() is not None:
            break
        time.sleep(0.05)
    raise RuntimeError(f"not ready: {buf[-2000:]}")


def start_rmqtool(flush: str, name: str = "rmqtool") -> Target:
    """`rmqtool serve`, or for the `ceiling` target benchmarks/nullsend.py's serve that answers sends
    without storing them."""
    work = Path(tempfile.mkdtemp(prefix=f"bench-{name}-"))
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    entry = ["-m", "rmqtool"] if name == "rmqtool" else [str(ROOT / "benchmarks" / "nullsend.py")]
    proc = subprocess.Popen([sys.executable, *entry, "serve", "--store", str(work / "store"),
                             "--namesrv-port", "0", "--broker-port", "0", "--flush", flush],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
    m = _wait_line(proc.stderr, re.compile(r"name server ([\d.]+:\d+), broker \S+ ([\d.]+:\d+)"), 60, proc)
    return Target(name, "rocketmq", m.group(2), proc, work, namesrv=m.group(1))


def start_apache(classpath_dir: Path) -> Target | None:
    cp_file = classpath_dir / "target" / "classpath.txt"
    classes = classpath_dir / "target" / "classes"
    if not cp_file.is_file() or not (classes / "rmqtool" / "interop" / "ApacheBroker.class").is_file() \
            or not shutil.which("java"):
        return None
    work = Path(tempfile.mkdtemp(prefix="bench-apache-"))
    cp = str(classes) + os.pathsep + cp_file.read_text().strip()
    cmd = ["java", "-Xms1g", "-Xmx1g", "-XX:+UseG1GC", "-Djava.net.preferIPv4Stack=true",
           f"-Duser.home={work}", "--add-opens=java.base/java.nio=ALL-UNNAMED",
           "--add-opens=java.base/sun.nio.ch=ALL-UNNAMED", "--add-opens=java.base/java.lang=ALL-UNNAMED",
           "--add-opens=java.base/java.util=ALL-UNNAMED", "--add-exports=java.base/sun.nio.ch=ALL-UNNAMED",
           "-cp", cp, "rmqtool.interop.ApacheBroker", "--store", str(work / "store"),
           "mappedFileSizeCommitLog=1073741824", "flushDiskType=ASYNC_FLUSH"]
    proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    m = _wait_line(proc.stdout, re.compile(r"READY namesrv=(\S+) broker=(\S+)"), 120, proc)
    return Target("apache", "rocketmq", m.group(2), proc, work, namesrv=m.group(1))


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


NATS_INSTALL = ["apt-get", "install", "-y", "-q", "nats-server"]


def nats_exe() -> str | None:
    return shutil.which("nats-server") or ("/usr/sbin/nats-server" if Path("/usr/sbin/nats-server").exists() else None)


def install_nats() -> str | None:
    """The benchmark's setup for the NATS column: Debian's nats-server package, installed with
    apt-get when it is missing (as root, or through `sudo -n`); None when that cannot be done."""
    exe = nats_exe()
    if exe is not None or shutil.which("apt-get") is None:
        return exe
    if os.geteuid() == 0:
        prefix: list[str] = []
    elif shutil.which("sudo") and subprocess.run(["sudo", "-n", "true"], capture_output=True).returncode == 0:
        prefix = ["sudo", "-n"]
    else:
        return None
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    print(f"# nats: installing: {' '.join(prefix + NATS_INSTALL)}", file=sys.stderr, flush=True)
    for step in ([], ["apt-get", "update", "-q"]):  # a stale package list: update once, then retry
        if step:
            subprocess.run(prefix + step, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        if subprocess.run(prefix + NATS_INSTALL, env=env, stdout=subprocess.DEVNULL,
                          stderr=subprocess.DEVNULL).returncode == 0:
            break
    return nats_exe()


def start_nats() -> Target | None:
    exe = install_nats()
    if exe is None:
        return None
    work = Path(tempfile.mkdtemp(prefix="bench-nats-"))
    port = _free_port()
    proc = subprocess.Popen([exe, "-js", "-sd", str(work / "js"), "-a", "127.0.0.1", "-p", str(port)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 20
    while time.time() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), 0.5).close()
            break
        except OSError:
            time.sleep(0.1)
    return Target("nats", "nats", f"127.0.0.1:{port}", proc, work)


# ------------------------------------------------------------------------- RocketMQ wire client

class RmqConn:
    """A minimal remoting channel: one request in flight, JSON headers (what Java clients send)."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.r, self.w = reader, writer
        self.opaque = 0

    @classmethod
    async def open(cls, addr: str) -> RmqConn:
        host, port = addr.rsplit(":", 1)
        r, w = await asyncio.open_connection(host, int(port))
        return cls(r, w)

    async def call(self, code: int, ext: dict[str, str], body: bytes = b"") -> tuple[int, dict, bytes]:
        self.opaque += 1
        header = json.dumps({"code": code, "extFields": ext, "flag": 0, "language": "JAVA",
                             "opaque": self.opaque, "serializeTypeCurrentRPC": "JSON", "version": 473},
                            separators=(",", ":")).encode()
        self.w.write(struct.pack(">ii", 4 + len(header) + len(body), len(header)) + header + body)
        while True:
            length, hl = struct.unpack(">ii", await self.r.readexactly(8))
            data = await self.r.readexactly(length - 4)
            h = json.loads(data[: hl & 0xFFFFFF])
            if h.get("flag", 0) & 1 and h.get("opaque") == self.opaque:
                return h["code"], h.get("extFields") or {}, data[hl & 0xFFFFFF:]

    def close(self) -> None:
        self.w.close()


def _props(i: int, pid: int) -> str:
    return f"UNIQ_KEY\x01{pid:08X}{i:024X}\x02WAIT\x01true\x02TAGS\x01bench"


def _batch_body(pid: int, base: int) -> bytes:
    parts = []
    for k in range(BATCH):
        p = f"UNIQ_KEY\x01{pid:08X}{base + k:024X}\x02WAIT\x01true".encode()
        parts.append(struct.pack(">iiiii", 20 + MSG_SIZE + len(p), 0, 0, 0, MSG_SIZE) + BODY
                     + struct.pack(">h", len(p)) + p)
    return b"".join(parts)


async def rmq_producer(addr: str, topic: str, mode: str, idx: int, stop_at: float,
                       lat: list[float]) -> int:
    conn = await RmqConn.open(addr)
    pid = os.getpid() & 0xFFFF
    sent = 0
    i = idx << 32
    try:
        while time.perf_counter() < stop_at:
            q = (idx + sent) % QUEUES
            ext = {"a": "bench_pg", "b": topic, "c": "TBW102", "d": "4", "e": str(q), "f": "0",
                   "g": str(int(time.time() * 1000)), "h": "0", "j": "0", "k": "false"}
            t0 = time.perf_counter()
            if mode == "single":
                ext["i"] = _props(i, pid)
                ext["m"] = "false"
                code, _, _ = await conn.call(310, ext, BODY)
                n = 1
            else:
                ext["i"] = "WAIT\x01true"
                ext["m"] = "true"
                code, _, _ = await conn.call(320, ext, _batch_body(pid, i))
                n = BATCH
            if code in (2, 14):  # SYSTEM_BUSY / SERVICE_NOT_AVAILABLE: flow control, back off and go on
                BUSY[0] += 1
                await asyncio.sleep(0.001)
                continue
            lat.append(time.perf_counter() - t0)
            if code != 0:
                raise RuntimeError(f"send failed with code {code}")
            sent += n
            i += n
    finally:
        conn.close()
    return sent


async def rmq_puller(addr: str, topic: str, queue_id: int, lat: list[float]) -> int:
    conn = await RmqConn.open(addr)
    off, got = 0, 0
    try:
        while True:
            ext = {"consumerGroup": "bench_cg", "topic": topic, "queueId": str(queue_id), "queueOffset": str(off),
                   "maxMsgNums": "32", "sysFlag": "4", "commitOffset": "0", "suspendTimeoutMillis": "0",
                   "subscription": "*", "subVersion": "0", "expressionType": "TAG"}
            t0 = time.perf_counter()
            code, hdr, body = await conn.call(11, ext)
            lat.append(time.perf_counter() - t0)
            if code != 0:
                return got
            n, p = 0, 0
            while p < len(body):
                (size,) = struct.unpack_from(">i", body, p)
                p += size
                n += 1
            got += n
            off = int(hdr["nextBeginOffset"])
    finally:
        conn.close()


async def rmq_create_topic(addr: str, topic: str) -> None:
    conn = await RmqConn.open(addr)
    try:
        code, _, _ = await conn.call(17, {"topic": topic, "defaultTopic": "TBW102", "readQueueNums": str(QUEUES),
                                          "writeQueueNums": str(QUEUES), "perm": "6", "topicFilterType": "SINGLE_TAG",
                                          "topicSysFlag": "0", "order": "false"})
        if code != 0:
            raise RuntimeError(f"create topic failed: {code}")
    finally:
        conn.close()


# ----------------------------------------------------------------------------- NATS wire client

class NatsConn:
    """NATS text protocol with JetStream publish acks on a reply inbox (one request in flight)."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, inbox: str) -> None:
        self.r, self.w = reader, writer
        self.n = 0
        self.inbox = inbox  # this connection's own reply subjects: acks must not reach other producers

    @classmethod
    async def open(cls, addr: str) -> NatsConn:
        host, port = addr.rsplit(":", 1)
        r, w = await asyncio.open_connection(host, int(port), limit=1 << 22)
        await r.readline()  # INFO
        inbox = f"_INBOX.{os.getpid()}x{id(r):x}"
        w.write(b'CONNECT {"verbose":false,"pedantic":false,"headers":true,"no_responders":true}\r\n'
                + f"SUB {inbox}.> 1\r\nPING\r\n".encode())
        c = cls(r, w, inbox)
        while (await r.readline()).strip() != b"PONG":
            pass
        return c

    async def _msg(self) -> tuple[str, bytes, bytes]:
        """Next MSG/HMSG: (subject, headers, payload); answers PINGs."""
        while True:
            line = await self.r.readline()
            if line.startswith(b"MSG "):
                parts = line.split()
                size = int(parts[-1])
                data = await self.r.readexactly(size + 2)
                return parts[1].decode(), b"", data[:-2]
            if line.startswith(b"HMSG "):
                parts = line.split()
                hsize, total = int(parts[-2]), int(parts[-1])
                data = await self.r.readexactly(total + 2)
                return parts[1].decode(), data[:hsize], data[hsize:-2]
            if line.startswith(b"PING"):
                self.w.write(b"PONG\r\n")
            elif line.startswith(b"-ERR"):
                raise RuntimeError(line.decode().strip())
            elif not line:
                raise ConnectionError("closed")

    def pub(self, subject: str, payload: bytes, reply: str) -> None:
        self.w.write(f"PUB {subject} {reply} {len(payload)}\r\n".encode() + payload + b"\r\n")

    async def request(self, subject: str, payload: bytes) -> bytes:
        self.n += 1
        self.pub(subject, payload, f"{self.inbox}.{self.n}")
        _, _, data = await self._msg()
        return data

    async def publish_acked(self, subject: str, count: int) -> None:
        """`count` pipelined publishes, then wait for every PubAck."""
        for _ in range(count):
            self.n += 1
            self.pub(subject, BODY, f"{self.inbox}.{self.n}")
        for _ in range(count):
            _, _, data = await self._msg()
            if b'"error"' in data:
                raise RuntimeError(data.decode())

    def close(self) -> None:
        self.w.close()


async def nats_setup(addr: str, stream: str) -> None:
    c = await NatsConn.open(addr)
    try:
        cfg = {"name": stream, "subjects": [f"{stream}.>"], "storage": "file", "retention": "limits",
               "discard": "old", "num_replicas": 1}
        resp = await c.request(f"$JS.API.STREAM.CREATE.{stream}", json.dumps(cfg).encode())
        if b'"error"' in resp and b"already in use" not in resp:
            raise RuntimeError(resp.decode())
    finally:
        c.close()


async def nats_producer(addr: str, stream: str, mode: str, idx: int, stop_at: float, lat: list[float]) -> int:
    conn = await NatsConn.open(addr)
    sent = 0
    try:
        while time.perf_counter() < stop_at:
            subject = f"{stream}.q{(idx + sent) % QUEUES}"
            n = 1 if mode == "single" else BATCH
            t0 = time.perf_counter()
            await conn.publish_acked(subject, n)
            lat.append(time.perf_counter() - t0)
            sent += n
    finally:
        conn.close()
    return sent


async def nats_puller(addr: str, stream: str, queue_id: int, lat: list[float]) -> int:
    conn = await NatsConn.open(addr)
    name = f"pull{queue_id}"
    cfg = {"stream_name": stream, "config": {"durable_name": name, "ack_policy": "none", "deliver_policy": "all",
                                             "filter_subject": f"{stream}.q{queue_id}"}}
    await conn.request(f"$JS.API.CONSUMER.CREATE.{stream}.{name}", json.dumps(cfg).encode())
    got = 0
    try:
        while True:
            conn.n += 1
            t0 = time.perf_counter()
            conn.pub(f"$JS.API.CONSUMER.MSG.NEXT.{stream}.{name}", b'{"batch":32,"no_wait":true}',
                     f"{conn.inbox}.{conn.n}")
            n = 0
            while True:
                _, hdr, data = await conn._msg()
                if hdr.startswith(b"NATS/1.0 4"):  # 404 no messages / 408 request timeout: batch over
                    break
                n += 1
                if n == 32:
                    break
            lat.append(time.perf_counter() - t0)
            if n == 0:
                return got
            got += n
    finally:
        conn.close()


# ------------------------------------------------------------------------ Java load generator

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
    for n in _spread(producers, min(producers, client_procs)):
        procs.append(subprocess.Popen([*JAVA_CLIENT, kind, "produce", mode, addr, topic, str(first), str(n),
                                       str(start_at), str(duration), str(warmup)], stdout=subprocess.PIPE,
                                      stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL))
        first += n
    # the server's CPU in the measured window alone (not the clients' start nor their warm-up)
    marks: list[float | None] = []
    sampler = threading.Thread(target=_sample_cpu, args=(t, start_at / 1000, duration, marks), daemon=True)
    sampler.start()
    results = _java_results(procs, duration + 120)
    sampler.join()
    res = Result(t.name, f"produce {mode:6s} x{producers:<2d}", sum(r["count"] for r in results), duration,
                 [x for r in results for x in r["lat"]], sum(r["busy"] for r in results),
                 client_cpu=sum(r["cpu"] for r in results))
    if len(marks) == 2 and None not in marks:
        res.server_cpu = marks[1] - marks[0]
    return res


def _sample_cpu(t: Target, start: float, duration: float, marks: list[float | None]) -> None:
    """`server_cpu` at epoch second `start` and `duration` s later, into `marks`."""
    for at in (start, start + duration):
        time.sleep(max(0.0, at - time.time()))
        marks.append(server_cpu(t))


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


# -------------------------------------------------------------------------------- measurement

def _produce_proc(kind: str, addr: str, topic: str, mode: str, first_idx: int, tasks: int, start_at: float,
                  duration: float, out: mp.Queue) -> None:
    async def go() -> tuple[int, list[float]]:
        while time.time() < start_at:
            await asyncio.sleep(0.005)
        stop_at = time.perf_counter() + duration
        lat: list[float] = []
        fn = rmq_producer if kind == "rocketmq" else nats_producer
        counts = await asyncio.gather(*(fn(addr, topic, mode, first_idx + i, stop_at, lat) for i in range(tasks)))
        return sum(counts), lat, BUSY[0]

    try:
        out.put(asyncio.run(go()))
    except Exception as e:  # report, do not hang the parent
        out.put((-1, [str(e)], 0))


def _consume_proc(kind: str, addr: str, topic: str, queues: list[int], out: mp.Queue) -> None:
    async def go() -> tuple[int, list[float]]:
        lat: list[float] = []
        fn = rmq_puller if kind == "rocketmq" else nats_puller
        counts = await asyncio.gather(*(fn(addr, topic, q, lat) for q in queues))
        return sum(counts), lat

    try:
        out.put(asyncio.run(go()))
    except Exception as e:
        out.put((-1, [str(e)]))


@dataclass
class Result:
    target: str
    case: str
    msgs: int
    seconds: float
    lat: list[float]
    busy: int = 0
    server_cpu: float | None = None  # seconds of server CPU (user + system) during the case
    client_cpu: float | None = None  # seconds of the load generators' CPU in their measured window (Java)

    @property
    def cpu_per_msg_us(self) -> float | None:
        """Server CPU per message: unlike throughput, barely moved by other load on the machine."""
        if self.server_cpu is None or not self.msgs:
            return None
        return self.server_cpu / self.msgs * 1e6

    @property
    def client_cpu_per_msg_us(self) -> float | None:
        """The load generator's CPU per message: on 2 shared cores a costly client leaves the
        server less, so a case whose client costs more than its server measures the client."""
        if self.client_cpu is None or not self.msgs:
            return None
        return self.client_cpu / self.msgs * 1e6

    @property
    def rate(self) -> float:
        return self.msgs / self.seconds if self.seconds > 0 else 0.0

    def pct(self, p: float) -> float:
        if not self.lat:
            return float("nan")
        s = sorted(self.lat)
        return s[min(len(s) - 1, int(p / 100 * len(s)))] * 1000


def _spread(total_tasks: int, procs: int) -> list[int]:
    base, extra = divmod(total_tasks, procs)
    return [base + (1 if i < extra else 0) for i in range(procs) if base + (1 if i < extra else 0) > 0]


def produce(t: Target, topic: str, mode: str, producers: int, duration: float, client_procs: int) -> Result:
    ctx = mp.get_context("spawn")
    out: mp.Queue = ctx.Queue()
    start_at = time.time() + 1.5
    plan = _spread(producers, min(producers, client_procs))
    procs, first = [], 0
    for n in plan:
        p = ctx.Process(target=_produce_proc, args=(t.kind, t.broker, topic, mode, first, n, start_at, duration, out))
        p.start()
        procs.append(p)
        first += n
    results = [out.get(timeout=duration + 120) for _ in procs]
    for p in procs:
        p.join()
    errors = [r[1][0] for r in results if r[0] < 0]
    if errors:
        raise RuntimeError(f"{t.name} {mode} x{producers}: {errors[0]}")
    return Result(t.name, f"produce {mode:6s} x{producers:<2d}", sum(r[0] for r in results), duration,
                  [x for r in results for x in r[1]], sum(r[2] for r in results))


def consume(t: Target, topic: str, client_procs: int) -> Result:
    ctx = mp.get_context("spawn")
    out: mp.Queue = ctx.Queue()
    groups = [list(range(QUEUES))[i::client_procs] for i in range(client_procs)]
    t0 = time.perf_counter()
    procs = []
    for g in groups:
        p = ctx.Process(target=_consume_proc, args=(t.kind, t.broker, topic, g, out))
        p.start()
        procs.append(p)
    results = [out.get(timeout=600) for _ in procs]
    for p in procs:
        p.join()
    took = time.perf_counter() - t0
    errors = [r[1][0] for r in results if r[0] < 0]
    if errors:
        raise RuntimeError(f"{t.name} consume: {errors[0]}")
    return Result(t.name, "consume (pull 32)     ", sum(r[0] for r in results), took,
                  [x for r in results for x in r[1]])


PRODUCE = produce  # the load generator: these, or java_produce / java_consume
CONSUME = consume


def _stat_fields(pid: int | str) -> list[str]:
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()


def server_cpu(t: Target) -> float | None:
    """CPU seconds (user + system) the target's server has used so far, from /proc: its own, its
    running children's (rmqtool's index process, RMQTOOL_INDEX_PROCESS=1) and its reaped ones'."""
    if t.proc is None:
        return None
    pid = t.proc.pid
    try:
        fields = _stat_fields(pid)
    except OSError:
        return None
    ticks = sum(int(x) for x in fields[11:15])  # utime, stime, cutime, cstime
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                child = _stat_fields(entry.name)
            except OSError:
                continue
            if child[1] == str(pid):  # ppid
                ticks += int(child[11]) + int(child[12])
    return ticks / os.sysconf("SC_CLK_TCK")


def _with_cpu(t: Target, run: Callable[..., Result], *args: object) -> Result:
    """`run(t, *args)` with the server CPU it cost recorded on the Result (unless `run` measured
    it over its own window)."""
    c0 = server_cpu(t)
    r = run(t, *args)
    c1 = server_cpu(t)
    if c0 is not None and c1 is not None and r.server_cpu is None:
        r.server_cpu = c1 - c0
    return r


def bench_target(t: Target, producers: list[int], duration: float, client_procs: int,
                 warmup: float) -> list[Result]:
    out = []
    if warmup > 0:  # JIT, page cache, first mapped files: not measured
        if t.kind == "rocketmq":
            asyncio.run(rmq_create_topic(t.broker, "BenchWarmup"))
        else:
            asyncio.run(nats_setup(t.broker, "BenchWarmup"))
        for mode in ("single", "batch"):
            PRODUCE(t, "BenchWarmup", mode, 4, warmup / 2, client_procs)
    for mode in ("single", "batch"):
        topic = f"Bench{mode.capitalize()}"
        if t.kind == "rocketmq":
            asyncio.run(rmq_create_topic(t.broker, topic))
        else:
            asyncio.run(nats_setup(t.broker, topic))
        for p in producers:
            r = _with_cpu(t, PRODUCE, topic, mode, p, duration, client_procs)
            print(_line(r), flush=True)
            out.append(r)
        if mode == "batch" and t.name != "ceiling":  # the ceiling's sends stored nothing to pull
            r = _with_cpu(t, CONSUME, topic, client_procs)
            print(_line(r), flush=True)
            out.append(r)
    return out


def _line(r: Result) -> str:
    cpu = r.cpu_per_msg_us
    return (f"{r.target:8s} {r.case}  {r.rate:10.0f} msg/s  {r.rate * MSG_SIZE / 1e6:7.1f} MB/s  "
            f"p50 {r.pct(50):7.2f} ms  p99 {r.pct(99):7.2f} ms  "
            + (f"cpu {cpu:7.1f} us/msg  " if cpu is not None else "")
            + (f"client {r.client_cpu_per_msg_us:7.1f} us/msg  " if r.client_cpu is not None else "")
            + f"({r.msgs} msgs"
            + (f", {r.busy} refused busy)" if r.busy else ")"))


def run_target(name: str, args: argparse.Namespace, producers: list[int]) -> list[Result] | None:
    """Start `name`, run every case against it, stop it; None when it is not on this machine."""
    if name in ("rmqtool", "ceiling"):
        t = start_rmqtool(args.flush, name)
    elif name == "apache":
        t = start_apache(args.apache_java_dir)
        if t is None:
            print("# apache: skipped (Apache RocketMQ Java launcher not built)", flush=True)
            return None
    elif name == "nats":
        t = start_nats()
        if t is None:
            print("# nats: skipped (nats-server is not installed and this user cannot install it; as root: "
                  f"{' '.join(NATS_INSTALL)})", flush=True)
            return None
    else:
        raise SystemExit(f"unknown target {name}")
    try:
        return bench_target(t, producers, args.duration, args.client_procs, args.warmup)
    finally:
        t.stop()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--duration", type=float, default=5.0, help="seconds per produce case")
    ap.add_argument("--producers", default="1,4,16")
    ap.add_argument("--rounds", type=int, default=1,
                    help="run every target this many times, in turn; ratios use each case's median round")
    ap.add_argument("--warmup", type=float, default=4.0, help="unmeasured seconds of load first (JIT etc.)")
    ap.add_argument("--client-warmup", type=float, default=2.0,
                    help="Java generator: seconds every producer sends, unmeasured, before each case's window "
                         "(the client JVM's JIT warm-up kept out of the measurement, the same for every target)")
    ap.add_argument("--targets", default="rmqtool,apache,nats")
    ap.add_argument("--client-procs", type=int, default=max(2, min(4, os.cpu_count() or 2)))
    ap.add_argument("--flush", default="async", choices=["async", "sync"], help="rmqtool serve's --flush")
    ap.add_argument("--client", default="java", choices=["java", "python"],
                    help="load generator: Apache's RocketMQ Java client and jnats (built with Maven from "
                         "benchmarks/java), or the raw-protocol Python generator of this script")
    ap.add_argument("--apache-java-dir", type=Path, default=ROOT / "tests" / "interop" / "java",
                    help="where the interop suite's Maven project (with target/) is")
    args = ap.parse_args()
    producers = [int(x) for x in args.producers.split(",")]
    global PRODUCE, CONSUME
    if args.client == "java":
        cmd = build_java_client()
        if cmd is None:
            raise SystemExit("the Java load generator needs java and mvn (or use --client python)")
        JAVA_CLIENT[:] = cmd
        CLIENT_WARMUP[0] = args.client_warmup
        PRODUCE, CONSUME = java_produce, java_consume
    wanted = args.targets.split(",")
    print(f"# {os.cpu_count()} cores shared by server and {args.client_procs} {args.client} client processes; "
          f"{MSG_SIZE} B messages, batches of {BATCH}, {QUEUES} queues, {args.duration:g} s per case", flush=True)
    rounds: dict[str, list[list[Result]]] = {}
    for round_no in range(args.rounds):
        if args.rounds > 1:
            print(f"# round {round_no + 1} of {args.rounds}", flush=True)
        for name in wanted:
            results = run_target(name, args, producers)
            if results is not None:
                rounds.setdefault(name, []).append(results)
    # per case, the round with the median throughput: one slow or fast round on a shared machine
    # moves neither side
    all_results = {name: [sorted(rs, key=lambda r: r.rate)[(len(rs) - 1) // 2] for rs in zip(*per_round, strict=True)]
                   for name, per_round in rounds.items()}
    if args.rounds > 1:
        print(f"# median of {args.rounds} rounds per case:", flush=True)
        for results in all_results.values():
            for r in results:
                print(_line(r), flush=True)
    ceiling = {r.case: r for r in all_results.get("ceiling", [])}
    if ceiling:  # what any broker could reach here with these clients, against each broker
        for ref in [n for n in all_results if n in ("rmqtool", "apache")]:
            cases = [(r.case, ceiling[r.case].rate / r.rate) for r in all_results[ref]
                     if r.case in ceiling and r.rate > 0]
            print(f"# ceiling / {ref} (the rate with sends answered unstored, over {ref}'s):")
            for case, ratio in cases:
                print(f"#   {case}  {ratio:6.2f}")
            if cases:
                print(f"#   geometric mean {statistics.geometric_mean([c[1] for c in cases]):.2f}")
    mine = {r.case: r for r in all_results.get("rmqtool", [])}
    for ref in [n for n in all_results if n not in ("rmqtool", "ceiling")]:
        print(f"# ratio rmqtool / {ref} (throughput; in brackets server CPU per message, {ref} / rmqtool):")
        ratios, cpu_ratios = [], []
        for r in all_results[ref]:
            m = mine.get(r.case)
            if m and r.rate > 0:
                ratios.append(m.rate / r.rate)
                mc, rc = m.cpu_per_msg_us, r.cpu_per_msg_us
                cpu = f"  ({rc / mc:5.2f})" if mc and rc else ""
                if mc and rc:
                    cpu_ratios.append(rc / mc)
                print(f"#   {r.case}  {m.rate / r.rate:6.2f}{cpu}")
        if ratios:
            print(f"#   geometric mean {statistics.geometric_mean(ratios):.2f}"
                  + (f"  ({statistics.geometric_mean(cpu_ratios):.2f})" if cpu_ratios else ""))


if __name__ == "__main__":
    main()
