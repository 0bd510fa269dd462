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
  rmqtool-index  (not by default) `rmqtool serve` with its index built by a second process
           (RMQTOOL_INDEX_PROCESS=1; `rmqtool` itself runs with it set to 0), printed against
           `rmqtool` and the references.
  rmqtool-nopoll  (not by default) `rmqtool serve --busy-poll 0`: serve's loop sleeping as soon as it
           is idle (before 2026-12-05 it always did), printed against `rmqtool` and the references.
  ceiling  (not by default) benchmarks/nullsend.py: serve answering every send as stored without
           storing it; its rates are near the most any broker reaches here with the same clients
           sharing the cores (no consume case); printed as ceiling / broker per case.
  nats     NATS JetStream (`nats-server -js`, Debian package nats-server, installed with apt-get by
           the setup when missing and the user may) with file storage: the same
           generator speaking NATS' protocol, publishing with acks (JetStream's equivalent of a
           stored send), batches as 32 pipelined publishes, consumption through a pull consumer.

Every target is started once on a fresh store and warmed up; then each case runs on every target
in turn while the others are paused (SIGSTOP), the order rotating from case to case and round to
round, so the two sides of a ratio are measured seconds apart (this machine's pace drifts by 2x
within minutes; `--sequential` runs one target through every case after another, as before
2026-12-04 19:50 UTC). With `--rounds N` every ratio is given twice: of each case's median round,
and the median of the N rounds' own ratios with their range.

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
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # the serve_* modules beside this script
sys.path.insert(1, str(Path(__file__).resolve().parents[1]))  # rmqtool itself, installed or not (as nullsend.py)

from serve_common import BATCH, MSG_SIZE, QUEUES, Result, line, with_cpu  # noqa: E402
from serve_java import CLIENT_WARMUP, JAVA_CLIENT, build_java_client, java_consume, java_produce  # noqa: E402
from serve_targets import NATS_INSTALL, ROOT, Target, start_apache, start_nats, start_rmqtool  # noqa: E402
from serve_wire import consume, nats_setup, produce, rmq_create_topic, rmq_route_ready  # noqa: E402

SERVES = ["rmqtool", "rmqtool-index", "rmqtool-nopoll"]  # serve as by default, with the index process, without busy polling
PRODUCE = produce  # the load generator: these, or java_produce / java_consume
CONSUME = consume


def warm_up(t: Target, warmup: float, client_procs: int) -> None:
    """JIT, page cache, first mapped files: load that is not measured."""
    if warmup <= 0:
        return
    make_topic(t, "BenchWarmup")
    for mode in ("single", "batch"):
        PRODUCE(t, "BenchWarmup", mode, 4, warmup / 2, client_procs)


def make_topic(t: Target, topic: str) -> None:
    if t.kind == "rocketmq":
        asyncio.run(rmq_create_topic(t.broker, topic))
    else:
        asyncio.run(nats_setup(t.broker, topic))


def case_plan(producers: list[int]) -> list[tuple[str, int]]:
    """The cases in the order they run: single sends from each producer count, batch sends, then
    everything the batch cases sent pulled back (`("consume", 0)`)."""
    return [("single", p) for p in producers] + [("batch", p) for p in producers] + [("consume", 0)]


def case_topic(mode: str, suffix: str = "") -> str:
    """The topic a case sends to, or (consume) pulls from: the batch cases' for the pulls."""
    return "Bench" + ("batch" if mode == "consume" else mode).capitalize() + suffix


def run_case(t: Target, mode: str, producers: int, topic: str, args: argparse.Namespace) -> Result:
    if t.kind == "rocketmq" and t.namesrv:
        asyncio.run(rmq_route_ready(t.namesrv, topic))
    if mode == "consume":
        return with_cpu(t, CONSUME, topic, args.client_procs)
    return with_cpu(t, PRODUCE, topic, mode, producers, args.duration, args.client_procs)


def bench_target(t: Target, producers: list[int], args: argparse.Namespace) -> list[Result]:
    """Every case against `t`, one after another (`--sequential`)."""
    warm_up(t, args.warmup, args.client_procs)
    out = []
    for mode, p in case_plan(producers):
        if mode == "consume" and t.name == "ceiling":  # the ceiling's sends stored nothing to pull
            continue
        topic = case_topic(mode)
        if mode != "consume" and p == producers[0]:
            make_topic(t, topic)
        r = run_case(t, mode, p, topic, args)
        print(line(r), flush=True)
        out.append(r)
    return out


def start_target(name: str, args: argparse.Namespace) -> Target | None:
    """Start `name` on a fresh store; None (said on stdout) when it is not on this machine."""
    if name in ("rmqtool", "rmqtool-index", "rmqtool-nopoll", "ceiling"):
        return start_rmqtool(args.flush, name, args.python)
    if name == "apache":
        t = start_apache(args.apache_java_dir)
        if t is None:
            print("# apache: skipped (Apache RocketMQ Java launcher not built)", flush=True)
        return t
    if name == "nats":
        t = start_nats()
        if t is None:
            print("# nats: skipped (nats-server is not installed and this user cannot install it; as root: "
                  f"{' '.join(NATS_INSTALL)})", flush=True)
        return t
    raise SystemExit(f"unknown target {name}")


def run_sequential(wanted: list[str], args: argparse.Namespace,
                   producers: list[int]) -> dict[str, list[list[Result]]]:
    """Each round: every target started, run through every case and stopped, one after another."""
    rounds: dict[str, list[list[Result]]] = {}
    for round_no in range(args.rounds):
        if args.rounds > 1:
            print(f"# round {round_no + 1} of {args.rounds}", flush=True)
        for name in wanted:
            t = start_target(name, args)
            if t is None:
                continue
            try:
                rounds.setdefault(name, []).append(bench_target(t, producers, args))
            finally:
                t.stop()
    return rounds


def rotated(targets: list[Target], k: int) -> list[Target]:
    """`targets` starting at the k-th (mod their number): who goes first changes from case to case."""
    k %= max(1, len(targets))
    return targets[k:] + targets[:k]


def run_interleaved(wanted: list[str], args: argparse.Namespace,
                    producers: list[int]) -> dict[str, list[list[Result]]]:
    """Every target started once and warmed up; then each case runs on every target in turn, a
    few seconds apart, while the others are paused (SIGSTOP), the order rotating from case to case
    and round to round. On a machine whose pace drifts by 2x within minutes, the two sides of a
    ratio are then measured seconds apart instead of the minutes a target's whole run takes."""
    targets: list[Target] = []
    rounds: dict[str, list[list[Result]]] = {}
    try:
        for name in wanted:
            t = start_target(name, args)
            if t is None:
                continue
            targets.append(t)
            warm_up(t, args.warmup, args.client_procs)
            t.pause()
        plan = case_plan(producers)
        for round_no in range(args.rounds):
            if args.rounds > 1:
                print(f"# round {round_no + 1} of {args.rounds}", flush=True)
            suffix = f"R{round_no + 1}"  # each round's own topics: its consume pulls what it sent
            for t in targets:
                t.resume()
                try:
                    for mode in ("single", "batch"):
                        make_topic(t, case_topic(mode, suffix))
                finally:
                    t.pause()
            per: dict[str, list[Result]] = {t.name: [] for t in targets}
            for i, (mode, p) in enumerate(plan):
                topic = case_topic(mode, suffix)
                for t in rotated(targets, round_no + i):
                    if mode == "consume" and t.name == "ceiling":
                        continue
                    t.resume()
                    try:
                        r = run_case(t, mode, p, topic, args)
                    finally:
                        t.pause()
                    print(line(r), flush=True)
                    per[t.name].append(r)
            for name, results in per.items():
                rounds.setdefault(name, []).append(results)
    finally:
        for t in targets:
            t.stop()
    return rounds


def paired_ratios(mine: list[list[Result]], ref: list[list[Result]]) -> dict[str, list[float]]:
    """Per case, the throughput ratio mine / ref of each round (the two measured in the same
    round, which `--sequential` runs minutes apart and the default interleaving seconds apart)."""
    out: dict[str, list[float]] = {}
    for m_round, r_round in zip(mine, ref, strict=False):
        theirs = {r.case: r for r in r_round}
        for m in m_round:
            r = theirs.get(m.case)
            if r is not None and r.rate > 0:
                out.setdefault(m.case, []).append(m.rate / r.rate)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--duration", type=float, default=5.0, help="seconds per produce case")
    ap.add_argument("--producers", default="1,4,16")
    ap.add_argument("--rounds", type=int, default=1,
                    help="run every case this many times; ratios use each case's median round, and beside "
                         "them the median of the rounds' own ratios")
    ap.add_argument("--sequential", action="store_true",
                    help="start, run through every case and stop one target after another (the method before "
                         "2026-12-04 19:50 UTC) instead of every case on every target in turn, the others paused")
    ap.add_argument("--warmup", type=float, default=4.0, help="unmeasured seconds of load first (JIT etc.)")
    ap.add_argument("--client-warmup", type=float, default=2.0,
                    help="Java generator: seconds every producer sends, unmeasured, before each case's window "
                         "(the client JVM's JIT warm-up kept out of the measurement, the same for every target)")
    ap.add_argument("--targets", default="rmqtool,apache,nats")
    ap.add_argument("--client-procs", type=int, default=max(2, min(4, os.cpu_count() or 2)))
    ap.add_argument("--flush", default="async", choices=["async", "sync"], help="rmqtool serve's --flush")
    ap.add_argument("--python", default=sys.executable,
                    help="the interpreter that runs serve (default: this one); it needs rmqtool's dependencies. "
                         "An interpreter built without PGO and LTO (pyenv's default) runs serve's loop slower")
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
    if any(n in SERVES or n == "ceiling" for n in wanted):
        try:
            version = subprocess.run([args.python, "-c", "import rmqtool, platform; print(platform.python_version())"],
                                     capture_output=True, text=True, check=True, env=dict(
                                         os.environ, PYTHONPATH=str(ROOT))).stdout.strip()
        except (OSError, subprocess.CalledProcessError) as e:
            raise SystemExit(f"--python {args.python}: cannot run rmqtool with it ({e})") from None
        print(f"# serve run by {args.python} (Python {version})", flush=True)
    run = run_sequential if args.sequential else run_interleaved
    rounds = run(wanted, args, producers)
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
    for own in [n for n in SERVES if n in all_results]:
        # each serve against the references; the default against the variant too (once, not both ways)
        refs = [n for n in SERVES[1:] if own == SERVES[0] and n in all_results]
        for ref in refs + [n for n in all_results if n not in SERVES and n != "ceiling"]:
            print_ratios(own, ref, all_results, rounds, args.rounds)


def print_ratios(own: str, ref: str, all_results: dict[str, list[Result]], rounds: dict[str, list[list[Result]]],
                 n_rounds: int) -> None:
    """The throughput ratio own / ref per case (of each case's median round) and its geometric mean,
    with the server CPU ratio and, for several rounds, the median of the rounds' own ratios."""
    mine = {r.case: r for r in all_results.get(own, [])}
    pairs = paired_ratios(rounds.get(own, []), rounds[ref]) if n_rounds > 1 else {}
    print(f"# ratio {own} / {ref} (throughput; in brackets server CPU per message, {ref} / {own}"
          + ("; then the median of the rounds' own ratios, their least and greatest" if pairs else "") + "):")
    ratios, cpu_ratios, pair_medians = [], [], []
    for r in all_results[ref]:
        m = mine.get(r.case)
        if m and r.rate > 0:
            ratios.append(m.rate / r.rate)
            mc, rc = m.cpu_per_msg_us, r.cpu_per_msg_us
            cpu = f"  ({rc / mc:5.2f})" if mc and rc else ""
            if mc and rc:
                cpu_ratios.append(rc / mc)
            own_ratios = pairs.get(r.case)
            if own_ratios:
                pair_medians.append(statistics.median(own_ratios))
                cpu += (f"  rounds {statistics.median(own_ratios):5.2f} "
                        f"({min(own_ratios):.2f}-{max(own_ratios):.2f})")
            print(f"#   {r.case}  {m.rate / r.rate:6.2f}{cpu}")
    if ratios:
        print(f"#   geometric mean {statistics.geometric_mean(ratios):.2f}"
              + (f"  ({statistics.geometric_mean(cpu_ratios):.2f})" if cpu_ratios else "")
              + (f"  rounds {statistics.geometric_mean(pair_medians):.2f}"
                 if pair_medians and len(pair_medians) == len(ratios) else ""))


if __name__ == "__main__":
    main()
