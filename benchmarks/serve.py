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
NATS' jnats for JetStream, compiled by Maven on first use (serve_java.py). `--client python` uses
the raw-protocol asyncio generator of serve_wire.py instead, which saturates before the servers do (kept for machines
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
the client's own CPU per message in its measured window, and the cores the two kept busy together:
near the core count the case is bound by the shared CPU) and the throughput ratio rmqtool /
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
import os
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # the serve_* modules beside this script

from serve_common import BATCH, MSG_SIZE, QUEUES, Result, line, with_cpu  # noqa: E402
from serve_java import CLIENT_WARMUP, JAVA_CLIENT, build_java_client, java_consume, java_produce  # noqa: E402
from serve_targets import NATS_INSTALL, ROOT, Target, start_apache, start_nats, start_rmqtool  # noqa: E402
from serve_wire import consume, nats_setup, produce, rmq_create_topic  # noqa: E402

PRODUCE = produce  # the load generator: these, or java_produce / java_consume
CONSUME = consume


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
            r = with_cpu(t, PRODUCE, topic, mode, p, duration, client_procs)
            print(line(r), flush=True)
            out.append(r)
        if mode == "batch" and t.name != "ceiling":  # the ceiling's sends stored nothing to pull
            r = with_cpu(t, CONSUME, topic, client_procs)
            print(line(r), flush=True)
            out.append(r)
    return out


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
                         "benchmarks/java), or the raw-protocol Python generator (serve_wire.py)")
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
                print(line(r), flush=True)
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

