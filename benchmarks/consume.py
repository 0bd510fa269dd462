"""Embedded `rmqtool consume` to a pipe, JSON Lines: messages per second, with references.

Fills a fresh store with N messages (in-process, batch sends), then times the real command
`python -m rmqtool consume --store S TOPIC --from first --no-commit --json` writing to a pipe that
this script drains. Reported in the same run:

* end-to-end msg/s (process start, store open + recovery, reading, formatting, writing);
* streaming msg/s: the same minus a `--count 1` run (start-up and recovery cost);
* reference 1: `cat` of the very JSON Lines the command printed, to a pipe (the I/O floor);
* reference 2: a plain in-process `json.dumps(msg.to_json())` loop over the same messages
  (what a straightforward Python implementation would cost for formatting alone).

Usage: python benchmarks/consume.py [N] [BODY_BYTES]     (defaults 200000 and 100)
Target (issue 2): >= 100,000 msg/s streaming on a 2-core machine.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from rmqtool.layouts.message import MessageExt, decode_record  # noqa: E402
from rmqtool.store.local import LocalBroker  # noqa: E402

TOPIC = "BenchConsume"


def fill(store: Path, n: int, body_size: int) -> None:
    body = (b"0123456789abcdef" * (body_size // 16 + 1))[:body_size]
    with LocalBroker.open(store) as broker:
        batch: list[MessageExt] = []
        for i in range(n):
            batch.append(MessageExt(TOPIC, body, queue_id=i % 4,
                                    properties={"TAGS": "TagA", "KEYS": f"key{i}", "WAIT": "true"}))
            if len(batch) == 1000:
                broker.send_batch(batch)
                batch = []
        if batch:
            broker.send_batch(batch)


def run_consume(store: Path, *extra: str) -> tuple[float, bytes]:
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    env.pop("NAMESRV_ADDR", None)
    cmd = [sys.executable, "-m", "rmqtool", "consume", "--store", str(store), TOPIC, "--from", "first",
           "--no-commit", "--json", *extra]
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, env=env)
    out = proc.stdout.read() if proc.stdout else b""
    proc.wait()
    dt = time.perf_counter() - t0
    if proc.returncode != 0:
        raise SystemExit(f"consume failed with exit {proc.returncode}")
    return dt, out


def main() -> None:
    import argparse

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("messages", nargs="?", type=int, default=200_000)
    ap.add_argument("body_bytes", nargs="?", type=int, default=100)
    ap.add_argument("--rounds", type=int, default=1,
                    help="run the whole measurement N times in turn, each round printed")
    args = ap.parse_args()
    for r in range(args.rounds):
        if args.rounds > 1:
            print(f"# round {r + 1} of {args.rounds}", flush=True)
        _round(args)


def _round(args: Any) -> None:
    """One round of the measurement, its figures and ratios printed."""
    n, body_size = args.messages, args.body_bytes
    with tempfile.TemporaryDirectory() as tmp:
        store = Path(tmp) / "store"
        t0 = time.perf_counter()
        fill(store, n, body_size)
        print(f"filled {n} messages of {body_size} B in {time.perf_counter() - t0:.1f} s", file=sys.stderr)

        startup, _ = run_consume(store, "--count", "1")
        full, out = run_consume(store)
        lines = out.count(b"\n")
        assert lines == n, f"consume printed {lines} lines, expected {n}"
        stream = max(full - startup, 1e-9)

        jsonl = Path(tmp) / "out.jsonl"
        jsonl.write_bytes(out)
        t0 = time.perf_counter()
        cat = subprocess.run(["cat", str(jsonl)], stdout=subprocess.PIPE, check=True)
        cat_s = time.perf_counter() - t0
        assert len(cat.stdout) == len(out)

        with LocalBroker.open(store) as broker:
            raws: list[bytes] = []
            for q in range(4):
                off = 0
                while True:
                    got, nxt = broker.pull_raw(TOPIC, q, off, 4096)
                    if nxt == off:
                        break
                    raws += got
                    off = nxt
        msgs = [decode_record(r, check_crc=False) for r in raws]
        t0 = time.perf_counter()
        for m in msgs:
            json.dumps(m.to_json(), ensure_ascii=False, separators=(",", ":"))
        dumps_s = time.perf_counter() - t0

    mb = len(out) / 1e6
    print(f"machine: {os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f} (figures scale with it)")
    print(f"consume end-to-end : {n / full:12,.0f} msg/s  ({full:.2f} s, {mb:.1f} MB of JSON Lines)")
    print(f"consume streaming  : {n / stream:12,.0f} msg/s  (start-up incl. store recovery {startup:.2f} s)")
    print(f"ref cat to a pipe  : {n / cat_s:12,.0f} msg/s  ({cat_s:.3f} s)")
    print(f"ref json.dumps loop: {n / dumps_s:12,.0f} msg/s  ({dumps_s:.2f} s, in-process, formatting only)")
    print(f"ratio streaming / json.dumps loop: {dumps_s / stream:.2f}")
    print(f"ratio streaming / cat            : {cat_s / stream:.3f}")


if __name__ == "__main__":
    main()
