"""serve's request path in one process: single sends and pulls through `Connection.data_received`.

Each request is a whole frame as Apache's Java client 5.x writes it (JSON header, the
SEND_MESSAGE_V2 letters a..n plus `bname`, a 1 KiB body with UNIQ_KEY and WAIT; or a
PULL_MESSAGE of 32 with a subscription), fed to `Connection.data_received` of a connection
whose transport only keeps what is written. So one request costs what it costs serve's event
loop thread: the frame read and header decode (remoting/command.py), the controller's dispatch
and handler (broker/send.py, broker/pull.py), the store (async flush, delivery services
attached as `serve` attaches them), the response encode and the write call, but not the
socket system calls or the loop's wake-ups.

It prints CPU time per request (`resource.getrusage`, user + system). On a loaded machine
compare instruction counts instead, which load does not move: run it under
`valgrind --tool=callgrind --callgrind-out-file=/dev/null` with two counts and divide the
difference of the "Collected" figures by the difference of the counts (start-up cancels).

    python benchmarks/reqpath.py send 20000
    python benchmarks/reqpath.py pull 2000        # pulls of 32 from 1,024 preloaded messages
"""

from __future__ import annotations

import argparse
import asyncio
import os
import resource
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from rmqtool.broker.controller import BrokerController
from rmqtool.broker.durable import install_sink
from rmqtool.broker.server import _ensure_delivery
from rmqtool.layouts.net import Host
from rmqtool.remoting.command import RemotingCommand
from rmqtool.remoting.transport import Connection
from rmqtool.store.config import StoreConfig
from rmqtool.store.local import LocalBroker

TOPIC = "ReqPathBench"
PULL_SPAN = 32  # pulls cycle over the first 32 x 32 messages of one queue


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


def pull_frame(i: int, offset: int, queue_id: int = 0) -> bytes:
    """PULL_MESSAGE of 32 as `DefaultMQPullConsumer.pull` writes it (no suspend)."""
    ext = {"consumerGroup": "bench_cg", "topic": TOPIC, "queueId": str(queue_id), "queueOffset": str(offset),
           "maxMsgNums": "32", "sysFlag": "4", "commitOffset": "0", "suspendTimeoutMillis": "0",
           "subscription": "*", "subVersion": "0", "expressionType": "TAG", "bname": "broker-a"}
    cmd = RemotingCommand.request(11, ext)
    cmd.opaque = i
    return cmd.encode()


async def run(kind: str, count: int, root: Path) -> float:
    install_sink()  # as Serve.start does
    local = LocalBroker.open(root, StoreConfig(flush_disk_type="ASYNC_FLUSH"))
    _ensure_delivery(local)
    ctl = BrokerController(local, Host("127.0.0.1", 10911))
    try:
        local.topics.create_in_send(TOPIC, 8, 0)
        conn = Connection(ctl.handle)
        transport = _Transport()
        conn.connection_made(transport)  # type: ignore[arg-type]
        if kind == "pull":
            for i in range(32 * PULL_SPAN):  # the same preload whatever the count: it cancels
                conn.data_received(send_frame(i))
            frames = [pull_frame(i, 32 * (i % PULL_SPAN)) for i in range(count)]
        else:
            frames = [send_frame(i) for i in range(count)]
        transport.writes = 0
        r0 = resource.getrusage(resource.RUSAGE_SELF)
        for f in frames:
            conn.data_received(f)
        r1 = resource.getrusage(resource.RUSAGE_SELF)
        if transport.writes != count:
            raise SystemExit(f"{transport.writes} answers to {count} requests")
        return (r1.ru_utime + r1.ru_stime - r0.ru_utime - r0.ru_stime) / count * 1e6
    finally:
        ctl.executor.shutdown(wait=False)
        local.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("kind", choices=["send", "pull"])
    ap.add_argument("count", type=int)
    args = ap.parse_args()
    d = tempfile.mkdtemp(prefix="reqpath-")
    try:
        us = asyncio.run(run(args.kind, args.count, Path(d) / "store"))
    finally:
        shutil.rmtree(d, ignore_errors=True)
    print(f"{args.kind}: {args.count} requests, {us:.1f} µs of CPU per request", file=sys.stderr)


if __name__ == "__main__":
    main()
