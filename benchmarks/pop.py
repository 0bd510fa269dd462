"""POP receive + ack throughput of `rmqtool serve` against Apache RocketMQ 5.3.3's broker, same client, same run.

    python benchmarks/pop.py [--messages 20000] [--consumers 4] [--targets rmqtool,apache] [--rounds 3]

For each target: a fresh broker, one topic with 8 queues preloaded with N 1 KiB messages (batch
sends), then `--consumers` concurrent POP consumers of one group (each a connection: POP_MESSAGE
of up to 32 messages from every queue, 60 s invisible, then one ACK_MESSAGE per message, all in
flight at once) until every message was received and acked once. The client is rmqtool's asyncio
remoting codec in one process for both brokers; Apache's broker comes from tests/interop/java
(built by .ci/steps/10-interop.sh) and is skipped when that is not built. Prints messages/s per
round, the server's CPU per message (from /proc), and the ratio rmqtool / apache of the medians.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from rmqtool.layouts.message import decode_record  # noqa: E402
from rmqtool.remoting.command import RemotingCommand  # noqa: E402
from rmqtool.remoting.transport import connect  # noqa: E402

TOPIC, GROUP, QUEUES = "PopBench", "cg_pop_bench", 8
BODY = bytes((i * 7) % 251 for i in range(1024))


def _batch_body(n: int) -> bytes:
    from rmqtool.broker.send import encode_batch_body

    return encode_batch_body([(0, BODY, "TAGS\x01b\x02") for _ in range(n)])


async def preload(addr: str, n: int) -> None:
    conn = await connect(addr)
    try:
        r = await conn.request(RemotingCommand.request(17, {
            "topic": TOPIC, "defaultTopic": "TBW102", "readQueueNums": QUEUES, "writeQueueNums": QUEUES, "perm": 6,
            "topicFilterType": "SINGLE_TAG", "topicSysFlag": 0, "order": "false"}), timeout=10)
        assert r.code == 0, r.remark
        body = _batch_body(32)
        sent = 0
        while sent < n:
            ext = {"a": "pop_bench_pg", "b": TOPIC, "c": "TBW102", "d": QUEUES, "e": (sent // 32) % QUEUES, "f": 0,
                   "g": int(time.time() * 1000), "h": 0, "i": "", "j": 0, "k": "false", "m": "true"}
            r = await conn.request(RemotingCommand.request(320, ext, body), timeout=10)
            assert r.code == 0, r.remark
            sent += 32
    finally:
        await conn.close()


async def consume(addr: str, total: int, consumers: int, deadline_s: float) -> tuple[int, float]:
    """Pop + ack until `total` messages were acked; (acked, seconds)."""
    done = 0
    t0 = time.monotonic()

    async def one() -> None:
        nonlocal done
        conn = await connect(addr)
        try:
            while done < total and time.monotonic() - t0 < deadline_s:
                ext = {"consumerGroup": GROUP, "topic": TOPIC, "queueId": -1, "maxMsgNums": 32, "invisibleTime": 60000,
                       "pollTime": 1000, "bornTime": int(time.time() * 1000), "initMode": 0, "expType": "TAG",
                       "exp": "*"}
                r = await conn.request(RemotingCommand.request(200050, ext), timeout=10)
                if r.code != 0:
                    continue
                h = r.ext_fields
                start = {f"{f[0]}@{f[1]}": f[2] for f in (x.split() for x in h["startOffsetInfo"].split(";") if x)}
                acks = []
                pos = 0
                while pos < len(r.body):
                    m = decode_record(r.body, pos, read_body=False, check_crc=False)
                    pos += m.total_size
                    extra = f"{start['0@' + str(m.queue_id)]} {h['popTime']} {h['invisibleTime']} {h['reviveQid']} 0 " \
                            f"broker-a {m.queue_id} {m.queue_offset}"
                    acks.append(conn.request(RemotingCommand.request(200051, {
                        "consumerGroup": GROUP, "topic": TOPIC, "queueId": m.queue_id, "extraInfo": extra,
                        "offset": m.queue_offset}), timeout=10))
                for a in await asyncio.gather(*acks):
                    if a.code == 0:
                        done += 1
        finally:
            await conn.close()

    await asyncio.gather(*(one() for _ in range(consumers)))
    return done, time.monotonic() - t0


def _cpu_s(pid: int) -> float:
    f = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(f[11]) + int(f[12])) / os.sysconf("SC_CLK_TCK")


def run_round(kind: str, n: int, consumers: int, work: Path) -> tuple[float, float] | None:
    from tests.interop.conftest import start_apache, start_rmqtool_serve, stop_rmqtool_serve
    from tests.interop.harness import java_classpath

    if kind == "apache" and java_classpath() is None:
        print("apache: not built (run .ci/steps/10-interop.sh); skipped", file=sys.stderr)
        return None
    b = start_apache(work) if kind == "apache" else start_rmqtool_serve(work)
    try:
        asyncio.run(preload(b.broker, n))
        time.sleep(1.0)  # Apache dispatches a moment after it answered
        cpu0 = _cpu_s(b.proc.pid)
        acked, secs = asyncio.run(consume(b.broker, n, consumers, 300))
        cpu = _cpu_s(b.proc.pid) - cpu0
    finally:
        if kind == "apache":
            b.proc.kill()
            b.proc.wait()
        else:
            stop_rmqtool_serve(b)
    if acked < n:
        print(f"{kind}: only {acked} of {n} acked", file=sys.stderr)
    return acked / secs, cpu / max(1, acked) * 1e6


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--messages", type=int, default=20_000)
    ap.add_argument("--consumers", type=int, default=4)
    ap.add_argument("--targets", default="rmqtool,apache")
    ap.add_argument("--rounds", type=int, default=1)
    args = ap.parse_args()
    print(f"{os.cpu_count()} cores shared by servers and client; {args.messages} messages of 1 KiB, "
          f"{args.consumers} POP consumers, pop 32 + one ack per message")
    medians: dict[str, float] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for kind in args.targets.split(","):
            rates = []
            for i in range(args.rounds):
                r = run_round(kind, args.messages, args.consumers, Path(tmp) / f"{kind}-{i}")
                if r is None:
                    break
                rates.append(r[0])
                print(f"{kind:8s} round {i + 1}: {r[0]:9.0f} msg/s received+acked, server CPU {r[1]:6.1f} µs/msg",
                      flush=True)
            if rates:
                medians[kind] = statistics.median(rates)
    if "rmqtool" in medians and "apache" in medians:
        print(f"rmqtool / apache (medians): {medians['rmqtool'] / medians['apache']:.2f}x")


if __name__ == "__main__":
    main()
