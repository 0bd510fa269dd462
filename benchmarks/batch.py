"""CPU cost of the batch send path without the network, in µs per message.

`serve`: a decoded SEND_BATCH_MESSAGE (320) request of N x SIZE-byte messages handed to
`BrokerController.process_send` (header decode, msgCheck, batch body unpacking, one
`LocalBroker.send_batch`, the comma-joined msgId answer) on a LocalBroker with async flush.
`local`: `LocalBroker.send_batch` alone on ready-made MessageExts; `store`:
`MessageStore.put_messages` alone (the store engine, for reference). Times are CPU time
(`time.process_time`), best of `--rounds`.

    python benchmarks/batch.py [--batch 32] [--size 1024] [--seconds 1] [--rounds 3] [--profile serve]
                               [--index-process]

With `--index-process` the index is built by a second process and its CPU per message (up to a
look-up that waits for everything put) is printed beside the best round's.
"""

from __future__ import annotations

import argparse
import cProfile
import os
import pstats
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from rmqtool.broker.controller import BrokerController
from rmqtool.broker.send import encode_batch_body
from rmqtool.layouts.message import MessageExt
from rmqtool.layouts.net import Host
from rmqtool.remoting.command import RemotingCommand
from rmqtool.store.config import StoreConfig
from rmqtool.store.local import LocalBroker

TOPIC = "BatchBench"


class _Conn:
    peer = Host("127.0.0.1", 50123)


def _props(**kv: str) -> str:
    return "".join(f"{k}\x01{v}\x02" for k, v in kv.items()).rstrip("\x02")


def batch_request(n: int, body: bytes, seq: int) -> RemotingCommand:
    """A 320 request as the Java client sends a MessageBatch (UNIQ_KEY + WAIT per message)."""
    items = [(0, body, _props(KEYS=f"k{seq}-{i}", WAIT="true", UNIQ_KEY=f"7F0000010000{seq:012X}{i:08X}"))
             for i in range(n)]
    ext = {"a": "bench_pg", "b": TOPIC, "c": "TBW102", "d": "4", "e": "-1", "f": "0",
           "g": str(int(time.time() * 1000)), "h": "0", "i": _props(WAIT="true"), "j": "0", "k": "false",
           "m": "true"}
    return RemotingCommand(320, ext, encode_batch_body(items), seq, 0)


def inner_messages(n: int, body: bytes, seq: int) -> list[MessageExt]:
    return [MessageExt(TOPIC, body, seq & 3, 0, {"KEYS": f"k{seq}-{i}", "WAIT": "true",
                                                 "UNIQ_KEY": f"7F0000010000{seq:012X}{i:08X}"},
                       0, 1_700_000_000_000, _Conn.peer) for i in range(n)]


def measure(step: Callable[[int], object], make: Callable[[int], object], n: int, seconds: float,
            counted: list[int] | None = None) -> float:
    """CPU µs per message of `step(arg)` over batches made (untimed) by `make(seq)`; the messages
    put are added to `counted`."""
    spent, done, seq = 0.0, 0, 0
    while spent < seconds:
        args = [make(seq + j) for j in range(64)]
        t = time.process_time()
        for a in args:
            step(a)
        spent += time.process_time() - t
        done += len(args) * n
        seq += len(args)
    if counted is not None:
        counted.append(done)
    return spent / done * 1e6


def _proc_cpu(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


CHILD_US: list[float] = []  # with --index-process: the index process's CPU µs per message of each run


def run(kind: str, root: Path, n: int, size: int, seconds: float, profile: bool = False,
        index_process: bool = False) -> float:
    shutil.rmtree(root, ignore_errors=True)
    body = os.urandom(size)
    local = LocalBroker.open(root, StoreConfig(flush_disk_type="ASYNC_FLUSH"))
    child = 0
    if index_process:
        if not local.store.start_index_process():
            raise SystemExit("index process not started")
        child = local.store.index.proc.pid  # type: ignore[union-attr]
    ctl = BrokerController(local, Host("127.0.0.1", 10911))
    conn = _Conn()
    try:
        if kind == "serve":
            def step(cmd: RemotingCommand) -> None:
                r = ctl.process_send(cmd, conn)
                assert r.code == 0, r.remark

            make: Callable[[int], object] = lambda s: batch_request(n, body, s)  # noqa: E731
        elif kind == "local":
            step = local.send_batch  # type: ignore[assignment]
            make = lambda s: inner_messages(n, body, s)  # noqa: E731
        else:
            step = local.store.put_messages  # type: ignore[assignment]
            make = lambda s: inner_messages(n, body, s)  # noqa: E731
        measure(step, make, n, min(0.2, seconds))  # warm up: topic creation, caches
        if child:  # the child's CPU up to a look-up, which it answers once all put before is indexed
            counted: list[int] = []
            c0 = _proc_cpu(child)
            us = measure(step, make, n, seconds, counted)
            local.store.index.query_offsets(TOPIC, "k0-0", 1, 0, 1 << 62)
            CHILD_US.append((_proc_cpu(child) - c0) / counted[0] * 1e6)
            return us
        if not profile:
            return measure(step, make, n, seconds)
        prof = cProfile.Profile()
        prof.enable()
        us = measure(step, make, n, seconds)
        prof.disable()
        pstats.Stats(prof, stream=sys.stdout).sort_stats("tottime").print_stats(25)
        return us
    finally:
        ctl.executor.shutdown(wait=False)
        local.close()
        shutil.rmtree(root, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--size", type=int, default=1024)
    ap.add_argument("--seconds", type=float, default=1.0)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--dir", type=Path, default=None)
    ap.add_argument("--only", choices=("serve", "local", "store"), action="append")
    ap.add_argument("--profile", choices=("serve", "local", "store"))
    ap.add_argument("--index-process", action="store_true",
                    help="build the index in a second process (MessageStore.start_index_process); prints its CPU too")
    args = ap.parse_args(argv)
    base = args.dir or Path(tempfile.mkdtemp(prefix="rmq-batch-bench-"))
    try:
        if args.profile:
            us = run(args.profile, base / "store", args.batch, args.size, args.seconds, profile=True)
            print(f"{args.profile}: {us:.2f} µs/msg (under cProfile)")
            return 0
        for kind in args.only or ("serve", "local", "store"):
            CHILD_US.clear()
            runs = [run(kind, base / "store", args.batch, args.size, args.seconds, index_process=args.index_process)
                    for _ in range(args.rounds)]
            best = min(runs)
            child = f"  index process {CHILD_US[runs.index(best)]:6.2f} µs/msg CPU" if CHILD_US else ""
            print(f"{kind:6s} {args.batch} x {args.size} B: {best:6.2f} µs/msg CPU  "
                  f"({best * args.batch:7.1f} µs/batch){child}")
    finally:
        if args.dir is None:
            shutil.rmtree(base, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
