"""benchmarks/serve.py's Python load generator (`--client python`): raw RocketMQ remoting and NATS
protocol over asyncio, producers and pullers spread over spawned processes; and the topic or stream
each case needs, made the same way for the Java generator. It saturates before the servers do:
kept for machines without Java."""

from __future__ import annotations

import asyncio
import json
import multiprocessing as mp
import os
import struct
import time

from serve_common import BATCH, BODY, MSG_SIZE, QUEUES, Result, spread
from serve_targets import Target

from rmqtool.remoting.bodies import TopicRouteData

BUSY = [0]  # sends refused with SYSTEM_BUSY in this client process


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


async def rmq_route_ready(namesrv: str, topic: str, timeout: float = 60.0) -> None:
    """Wait until the name server gives `topic` a route with queues and a broker address (the Java
    client looks it up once and gives up without): a broker paused (SIGSTOP) while its name server
    registration of a new topic was in flight, or past the name server's broker expiry, registers
    again only on its next period."""
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        conn = await RmqConn.open(namesrv)
        try:  # GET_ROUTEINFO_BY_TOPIC, as the clients ask it (rmqtool.client's fetch_route)
            code, _, body = await conn.call(105, {"topic": topic, "acceptStandardJsonOnly": "true"})
        finally:
            conn.close()
        route = TopicRouteData.decode(body) if code == 0 and body else None
        if route is not None and any(q.writeQueueNums for q in route.queueDatas) \
                and any(b.brokerAddrs for b in route.brokerDatas):
            return
        if asyncio.get_running_loop().time() > deadline:
            raise RuntimeError(f"no route for {topic} on {namesrv} after {timeout:g} s (code {code})")
        await asyncio.sleep(0.2)


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


def produce(t: Target, topic: str, mode: str, producers: int, duration: float, client_procs: int) -> Result:
    ctx = mp.get_context("spawn")
    out: mp.Queue = ctx.Queue()
    start_at = time.time() + 1.5
    plan = spread(producers, min(producers, client_procs))
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

