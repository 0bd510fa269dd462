"""The shell path against the store API, in one run: `seq`-style 1 KiB lines piped into
`rmqtool send T --batch 256` (embedded, ASYNC_FLUSH) next to `MessageStore.put_messages` of
the same messages in batches of 256, and their ratio (the goal is 0.9 or more); then
`rmqtool replay --jsonl` of the same messages as `consume` prints them (body, properties),
against the same reference (the goal: the same rate).

    python benchmarks/send_pipe.py [--messages 100000] [--rounds 3] [--no-replay] [--dir DIR] [--pipe]
                                   [--code CHECKOUT]

With `--rounds N` every case runs N times in turn and the medians are shown. The commands read
their input from a file on stdin, or with `--pipe` from a pipe `cat` writes into (the shell
path as typed: 64 KiB reads, where a file gives 1 MiB ones).
`--code` runs the commands of another checkout (old code against new, the same benchmark).

The store API side builds each message as `send` does (TAGS-free, WAIT, UNIQ_KEY in the
client's property order) and puts them through `LocalBroker.send_batch`, which is what `send`
calls per batch; the pipe side pays for everything else: reading and splitting stdin, building
messages, printing one JSON result per message (to /dev/null), start-up and close. Start-up
(one message through the same command) is timed separately and shown; the ratio is given with
and without it, in wall-clock and in CPU seconds (the child's rusage), which a loaded machine
disturbs less.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from rmqtool.cli.send import MessageBuilder  # noqa: E402
from rmqtool.store.config import StoreConfig  # noqa: E402
from rmqtool.store.local import LocalBroker  # noqa: E402

BATCH = 256


def line(i: int) -> bytes:
    """A 1 KiB line (1023 bytes + newline) that starts like `seq`'s."""
    head = str(i + 1).encode()
    return head + b" " + b"x" * (1022 - len(head)) + b"\n"


def store_api(root: Path, n: int) -> tuple[float, float]:
    """(wall, CPU) seconds for `send_batch` of n messages, BATCH at a time, on a fresh store."""
    build = MessageBuilder("PipeBench", None, None, {}, {}, None)
    bodies = [line(i)[:-1] for i in range(n)]
    broker = LocalBroker.open(root, StoreConfig(store_path_root_dir=root, flush_disk_type="ASYNC_FLUSH"))
    try:
        t, c = time.perf_counter(), time.process_time()
        q = 0
        for i in range(0, n, BATCH):
            msgs = build.messages(bodies[i:i + BATCH])
            for m in msgs:
                m.queue_id = q & 3
            q += 1
            broker.send_batch(msgs)
        dt, dc = time.perf_counter() - t, time.process_time() - c
    finally:
        broker.close()
    return dt, dc


CODE = ROOT  # the checkout whose commands are run (--code)
PIPE = False  # stdin through `cat |` instead of a file (--pipe)


def _run_cli(args: list[str], stdin: Path) -> tuple[float, float]:
    """(wall, CPU) seconds of `python -m rmqtool ARGS < stdin` (or `cat stdin | ...`), output to
    /dev/null; the CPU is the command's own, not cat's."""
    env = dict(os.environ, PYTHONPATH=str(CODE) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    with open(stdin, "rb") as src, open(os.devnull, "wb") as out, open(os.devnull, "wb") as err:
        t = time.perf_counter()
        cat = subprocess.Popen(["cat"], stdin=src, stdout=subprocess.PIPE) if PIPE else None
        # cwd: `python -m` puts the working directory first on sys.path, ahead of PYTHONPATH; run
        # from another checkout, the command would otherwise time that checkout's code
        proc = subprocess.Popen([sys.executable, "-m", "rmqtool", *args], stdin=cat.stdout if cat else src,
                                stdout=out, stderr=err, env=env, cwd=CODE)
        if cat is not None and cat.stdout is not None:
            cat.stdout.close()
        _, status, usage = os.wait4(proc.pid, 0)
        dt = time.perf_counter() - t
        if cat is not None:
            cat.wait()
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise SystemExit(f"rmqtool {args[0]} failed ({proc.returncode})")
    return dt, usage.ru_utime + usage.ru_stime


def pipe(root: Path, data: Path) -> tuple[float, float]:
    """(wall, CPU) seconds of `rmqtool send --batch BATCH` reading `data` on stdin."""
    return _run_cli(["send", "PipeBench", "--batch", str(BATCH), "--store", str(root), "--flush", "async", "--json"],
                    data)


def replay(root: Path, jsonl: Path) -> tuple[float, float]:
    """(wall, CPU) seconds of `rmqtool replay --jsonl -` reading `jsonl` on stdin."""
    return _run_cli(["replay", "--jsonl", "-", "--store", str(root), "--json"], jsonl)


def write_jsonl(path: Path, n: int) -> None:
    """The messages as `rmqtool consume --json` prints them (the fields replay reads)."""
    with open(path, "w", encoding="utf-8") as f:
        for i in range(n):
            body = line(i)[:-1].decode("ascii")
            f.write(json.dumps({"topic": "PipeBench", "queueId": i & 3, "queueOffset": i >> 2,
                                "msgId": f"7F00000100002A9F0000{i:012X}", "body": body,
                                "properties": {"WAIT": "true", "UNIQ_KEY": f"7F00000100002A9F0000{i:012X}"}})
                    + "\n")


def _median(xs: list[float]) -> float:
    return statistics.median(xs)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--messages", type=int, default=100_000)
    ap.add_argument("--rounds", type=int, default=1, help="runs of every case, in turn (medians shown)")
    ap.add_argument("--no-replay", action="store_true", help="leave out the `rmqtool replay --jsonl` case")
    ap.add_argument("--dir", type=Path, default=None, help="scratch directory (default: a temporary one)")
    ap.add_argument("--pipe", action="store_true", help="the commands' stdin is a pipe `cat` writes, not a file")
    ap.add_argument("--code", type=Path, default=ROOT, help="the checkout whose rmqtool commands are run")
    args = ap.parse_args()
    global CODE, PIPE
    CODE, PIPE = args.code.resolve(), args.pipe
    # start-up as an installed rmqtool has it: pip writes the bytecode at install, a checkout
    # run with PYTHONDONTWRITEBYTECODE=1 would compile every module from source in each command
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(CODE / "rmqtool")], check=False,
                   stdout=subprocess.DEVNULL)
    scratch = Path(tempfile.mkdtemp(prefix="send-pipe-", dir=args.dir))
    try:
        n = args.messages
        data = scratch / "lines"
        with open(data, "wb") as f:
            for i in range(n):
                f.write(line(i))
        one = scratch / "one"
        one.write_bytes(line(0))
        jsonl = scratch / "messages.jsonl"
        if not args.no_replay:
            write_jsonl(jsonl, n)
        runs: dict[str, list[tuple[float, float]]] = {"api": [], "startup": [], "pipe": [], "replay": []}
        for r in range(args.rounds):
            for case, fn in (("api", lambda root: store_api(root, n)), ("startup", lambda root: pipe(root, one)),
                             ("pipe", lambda root: pipe(root, data)), ("replay", lambda root: replay(root, jsonl))):
                if case == "replay" and args.no_replay:
                    continue
                root = scratch / f"{case}-{r}"
                runs[case].append(fn(root))
                shutil.rmtree(root, ignore_errors=True)
        api_s, api_cpu = (_median([x[i] for x in runs["api"]]) for i in (0, 1))
        startup_s, startup_cpu = (_median([x[i] for x in runs["startup"]]) for i in (0, 1))
        pipe_s, pipe_cpu = (_median([x[i] for x in runs["pipe"]]) for i in (0, 1))
        rounds = f", median of {args.rounds}" if args.rounds > 1 else ""
        print(f"store API send_batch({BATCH}): {n / api_s:10,.0f} msg/s  ({api_s:.2f} s, {api_cpu:.2f} s CPU, "
              f"for {n:,} x 1 KiB{rounds})")
        stdin = "a pipe" if PIPE else "a file"
        print(f"stdin: {stdin}; commands of {'this checkout' if CODE == ROOT else 'another checkout (--code)'}")
        print(f"seq | rmqtool send --batch {BATCH}: {n / pipe_s:10,.0f} msg/s  ({pipe_s:.2f} s, {pipe_cpu:.2f} s CPU; "
              f"start-up and close {startup_s:.2f} s, {startup_cpu:.2f} s CPU)")
        print(f"ratio (wall): {api_s / pipe_s:.2f}x with start-up, {api_s / max(pipe_s - startup_s, 1e-9):.2f}x "
              "without (goal >= 0.9x)")
        print(f"ratio (CPU):  {api_cpu / pipe_cpu:.2f}x with start-up, "
              f"{api_cpu / max(pipe_cpu - startup_cpu, 1e-9):.2f}x without (CPU time is steadier on a shared machine)")
        if runs["replay"]:
            rep_s, rep_cpu = (_median([x[i] for x in runs["replay"]]) for i in (0, 1))
            print(f"rmqtool replay --jsonl: {n / rep_s:10,.0f} msg/s  ({rep_s:.2f} s, {rep_cpu:.2f} s CPU)")
            print(f"ratio (wall): {api_s / rep_s:.2f}x, (CPU): {api_cpu / rep_cpu:.2f}x the store API (goal: 1.0x)")
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
