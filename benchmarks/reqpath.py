"""serve's request path in one process: single and batch sends and pulls through `Connection.data_received`.

Each request is a whole frame as Apache's Java client 5.x writes it (JSON header, the
SEND_MESSAGE_V2 letters a..n plus `bname`, a 1 KiB body with UNIQ_KEY and WAIT; a
SEND_BATCH_MESSAGE of 32 x 1 KiB as benchmarks/java's producer sends them; or a
PULL_MESSAGE of 32 with a subscription), fed to `Connection.data_received` of a connection
whose transport only keeps what is written. So one request costs what it costs serve's event
loop thread: the frame read and header decode (remoting/command.py), the controller's dispatch
and handler (broker/send.py, broker/pull.py) of a controller started as `serve` starts it (long
polling's and POP's arrival listeners, its periodic tasks; since 2026-12-04 22:55 UTC, before
which a put called neither listener here), the store (async flush, delivery services attached
and the index deferred as `serve` does), the response encode and the write call, and
the loop's turn after each request (where serve builds the deferred index keys once their
INDEX_DRAIN_DELAY_S has passed), on serve's loop (uvloop where installed); but not the socket
system calls or the loop's wake-ups.

It prints CPU time per request (`resource.getrusage`, user + system). On a loaded machine
compare instruction counts instead, which load does not move: run it under
`valgrind --tool=callgrind --callgrind-out-file=/dev/null` with two counts and divide the
difference of the "Collected" figures by the difference of the counts (start-up cancels),
after taking off those of `--build-only` runs of the same counts (making the frames).

    python benchmarks/reqpath.py send 20000
    python benchmarks/reqpath.py batch 1000       # batches of 32: also prints CPU per message
    python benchmarks/reqpath.py pull 2000        # pulls of 32 from 1,024 preloaded messages
    python benchmarks/reqpath.py send 2000 --evict 16384   # each request after 16 MiB written elsewhere

`--evict KIB` writes KIB KiB of a buffer of its own before every request (not timed) and times
each request alone on the loop thread's CPU clock (`time.thread_time_ns`): what a request costs
when what it touches has been pushed out of the caches in between, as the clients' work on the
same two cores does under the benchmark's load; `--evict 0` times the same way without it.
`--ceiling` answers sends with benchmarks/nullsend.py's handler (the serve.py target that stores
nothing): what the frame, header, answer and transport alone cost. `--calls` counts instead, per
request, the distinct Python functions and C functions it enters and its calls
(`sys.setprofile`), medians over the later half of the requests: the code a request touches,
which load does not move and which a request pays for again when the caches lost it.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import os
import resource
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from rmqtool.broker import eventloop
from rmqtool.broker.controller import BrokerController
from rmqtool.broker.durable import install_sink
from rmqtool.broker.send import encode_batch_body
from rmqtool.broker.server import _defer_index, _ensure_delivery
from rmqtool.layouts.javahash import hashmap_order
from rmqtool.layouts.net import Host
from rmqtool.remoting.command import RemotingCommand
from rmqtool.remoting.transport import Connection
from rmqtool.store.config import StoreConfig
from rmqtool.store.local import LocalBroker

TOPIC = "ReqPathBench"
PULL_SPAN = 32  # pulls cycle over the first 32 x 32 messages of one queue
BATCH = 32  # LoadGen.BATCH
BATCH_BODY = bytes((i * 7) % 251 for i in range(1024))  # LoadGen.BODY
# MessageClientIDSetter's FIX_STRING: IPv4, pid, class loader hash (20 hex digits)
FIX_STRING = f"7F000001{os.getpid() & 0xFFFF:04X}18B4AAC2"


class _Transport:
    """What `Connection` writes to: counts the writes, keeps the last."""

    def __init__(self) -> None:
        self.writes = 0
        self.last = b""

    def write(self, data: bytes) -> None:
        self.writes += 1
        self.last = data

    def writelines(self, data: Any) -> None:
        self.writes += 1
        self.last = b"".join(data)

    def is_closing(self) -> bool:
        return False

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return ("127.0.0.1", 40001) if name in ("peername", "sockname") else default

    def close(self) -> None:
        pass


def send_frame(i: int, queue_id: int = 0, size: int = 1024) -> bytes:
    """SEND_MESSAGE_V2 as `MQClientAPIImpl.sendMessage` of the Java client 5.3 writes it."""
    uniq = f"7F000001{os.getpid() & 0xFFFF:04X}18B4AAC2{i:016X}"
    ext = {"a": "bench_pg", "b": TOPIC, "c": "TBW102", "d": "4", "e": str(queue_id), "f": "0",
           "g": str(int(time.time() * 1000)), "h": "0", "i": f"UNIQ_KEY\x01{uniq}\x02WAIT\x01true",
           "j": "0", "k": "false", "m": "false", "n": "broker-a", "bname": "broker-a"}
    cmd = RemotingCommand.request(310, ext, b"x" * size)
    cmd.opaque = i
    return cmd.encode()


def _java_properties(props: dict[str, str]) -> str:
    """`MessageDecoder.messageProperties2String` of a HashMap filled in this order."""
    return "".join([f"{k}\x01{props[k]}\x02" for k in _hashmap_order(tuple(props))])


@functools.lru_cache
def _hashmap_order(keys: tuple[str, ...]) -> list[str]:
    return hashmap_order(list(keys))


def batch_frame(i: int, queue_id: int = 0) -> bytes:
    """SEND_BATCH_MESSAGE as `DefaultMQProducer.send(Collection, MessageQueue)` of the Java client
    5.3.3 writes benchmarks/java's batch: 32 `new Message(topic, "bench", BODY)` (TAGS, then WAIT
    from the constructor), each given its UNIQ_KEY by `batch()`, then the MessageBatch its own
    (WAIT from `generateFromList`); `MessageBatch.encode` -> `MessageDecoder.encodeMessages`."""
    ms = (i * 3) & 0x7FFFFFFF  # time since the month's start: the ids' middle field, a few ms a batch
    first = i * (BATCH + 1)
    uniq = [f"{FIX_STRING}{ms:08X}{(first + k) & 0xFFFF:04X}" for k in range(BATCH + 1)]
    items = [(0, BATCH_BODY, _java_properties({"TAGS": "bench", "WAIT": "true", "UNIQ_KEY": uniq[k]}))
             for k in range(BATCH)]
    ext = {"a": "bench_pg", "b": TOPIC, "c": "TBW102", "d": "4", "e": str(queue_id), "f": "0",
           "g": str(int(time.time() * 1000)), "h": "0",
           "i": _java_properties({"WAIT": "true", "UNIQ_KEY": uniq[BATCH]}), "j": "0", "k": "false",
           "m": "true", "n": "broker-a", "bname": "broker-a"}
    cmd = RemotingCommand.request(320, ext, encode_batch_body(items))
    cmd.opaque = i
    return cmd.encode()


def pull_frame(i: int, offset: int, queue_id: int = 0) -> bytes:
    """PULL_MESSAGE of 32 as `DefaultMQPullConsumer.pull` writes it (no suspend)."""
    ext = {"consumerGroup": "bench_cg", "topic": TOPIC, "queueId": str(queue_id), "queueOffset": str(offset),
           "maxMsgNums": "32", "sysFlag": "4", "commitOffset": "0", "suspendTimeoutMillis": "0",
           "subscription": "*", "subVersion": "0", "expressionType": "TAG", "bname": "broker-a"}
    cmd = RemotingCommand.request(11, ext)
    cmd.opaque = i
    return cmd.encode()


async def run(kind: str, count: int, root: Path, build_only: bool = False, evict_kib: int | None = None,
              calls: bool = False) -> float | tuple[int, int, int]:
    install_sink()  # as Serve.start does
    local = LocalBroker.open(root, StoreConfig(flush_disk_type="ASYNC_FLUSH"))
    _ensure_delivery(local)
    _defer_index(local.store, asyncio.get_running_loop())  # as Serve.start: the index after the answer
    ctl = BrokerController(local, Host("127.0.0.1", 10911))
    await ctl.start()  # as serve: long polling's and POP's arrival listeners, the periodic tasks
    try:
        local.topics.create_in_send(TOPIC, 8, 0)
        conn = Connection(ctl.handle)
        transport = _Transport()
        conn.connection_made(transport)  # type: ignore[arg-type]
        if kind == "pull":
            for i in range(32 * PULL_SPAN):  # the same preload whatever the count: it cancels
                conn.data_received(send_frame(i))
            # a first pull, answered before any is measured: the group's first pull makes its
            # subscription group (off the loop, once) and is answered some requests later
            answered = transport.writes + 1
            conn.data_received(pull_frame(0, 0))
            for _ in range(500):
                if transport.writes >= answered:
                    break
                await asyncio.sleep(0.01)
            frames = [pull_frame(i, 32 * (i % PULL_SPAN)) for i in range(count)]
        elif kind == "batch":  # LoadGen's round robin over the topic's queues
            queues = local.topics.select(TOPIC).write_queue_nums
            frames = [batch_frame(i, i % queues) for i in range(count)]
        else:
            frames = [send_frame(i) for i in range(count)]
        if build_only:
            return 0.0
        transport.writes = 0
        if calls:
            counted = await _calls(conn, frames)
            if transport.writes != count:
                raise SystemExit(f"{transport.writes} answers to {count} requests")
            return counted
        if evict_kib is not None:
            us = await _evicted(conn, frames, evict_kib)
        else:
            r0 = resource.getrusage(resource.RUSAGE_SELF)
            for f in frames:
                conn.data_received(f)
                await asyncio.sleep(0)  # the loop's turn, as between two reads in serve (the index drain)
            r1 = resource.getrusage(resource.RUSAGE_SELF)
            us = (r1.ru_utime + r1.ru_stime - r0.ru_utime - r0.ru_stime) / count * 1e6
        if transport.writes != count:
            raise SystemExit(f"{transport.writes} answers to {count} requests")
        if kind == "batch" and b'"code":0' not in transport.last:
            raise SystemExit(f"the last batch failed: {transport.last[:300]!r}")
        return us
    finally:
        await ctl.stop()
        local.close()


async def _evicted(conn: Connection, frames: list[bytes], kib: int) -> float:
    """µs of this thread's CPU per request, each after `kib` KiB written to a buffer of its own
    (preallocated: no allocation or page fault in the eviction itself)."""
    junk = bytearray(kib << 10)
    zeros = bytes(len(junk))
    clock = time.thread_time_ns
    total = 0
    for f in frames:
        if kib:
            junk[:] = zeros
        t0 = clock()
        conn.data_received(f)
        await asyncio.sleep(0)
        total += clock() - t0
    return total / len(frames) / 1000


async def _calls(conn: Connection, frames: list[bytes]) -> tuple[int, int, int]:
    """Medians over the requests of (distinct Python functions, distinct C functions, calls) each
    enters, the loop's turn after it included."""
    py: set[Any] = set()
    c: set[Any] = set()
    n = [0]

    def profile(frame: Any, event: str, arg: Any) -> None:
        if event == "call":
            py.add(frame.f_code)
            n[0] += 1
        elif event == "c_call":
            c.add(arg)
            n[0] += 1

    per = []
    for f in frames:
        py.clear()
        c.clear()
        n[0] = 0
        sys.setprofile(profile)
        try:
            conn.data_received(f)
            await asyncio.sleep(0)
        finally:
            sys.setprofile(None)
        per.append((len(py), len(c), n[0]))
    half = len(per) // 2  # the later half: first-time work (caches, lazy imports) left out
    py_n, c_n, calls = (sorted(col)[len(col) // 2] for col in zip(*per[half:], strict=True))
    return py_n, c_n, calls


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("kind", choices=["send", "batch", "pull"])
    ap.add_argument("count", type=int)
    ap.add_argument("--build-only", action="store_true",
                    help="make the frames and stop: what to take off a callgrind count of the same count")
    ap.add_argument("--evict", type=int, metavar="KIB",
                    help="write KIB KiB elsewhere before each request and time each request alone (0: no writes)")
    ap.add_argument("--ceiling", action="store_true",
                    help="sends answered as stored without storing them (benchmarks/nullsend.py's handler)")
    ap.add_argument("--calls", action="store_true",
                    help="count the distinct Python and C functions each request enters, and its calls")
    args = ap.parse_args()
    if args.ceiling:
        from nullsend import null_send  # beside this script

        from rmqtool.broker.send import SendProcessor

        SendProcessor.process_send = null_send  # type: ignore[method-assign]
    d = tempfile.mkdtemp(prefix="reqpath-")
    try:
        us = eventloop.run(run(args.kind, args.count, Path(d) / "store", args.build_only, args.evict,
                               args.calls))  # serve's loop
    finally:
        shutil.rmtree(d, ignore_errors=True)
    if isinstance(us, tuple):
        print(f"{args.kind}: {args.count} requests, per request (median of the later half): {us[0]} distinct "
              f"Python functions, {us[1]} distinct C functions, {us[2]} calls", file=sys.stderr)
        return
    per = f", {us / BATCH:.2f} µs per message" if args.kind == "batch" else ""
    evict = "" if args.evict is None else f" (each after {args.evict} KiB written elsewhere; this thread's CPU)"
    print(f"{args.kind}: {args.count} requests, {us:.1f} µs of CPU per request{per}{evict}", file=sys.stderr)


if __name__ == "__main__":
    main()
