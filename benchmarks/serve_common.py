"""What every part of benchmarks/serve.py shares: the workload's constants, a case's Result and its
line, the server's CPU from /proc.

A case's line gives, with the Java generator, the cores the server and the clients kept busy
together in the measured window: near the machine's core count the case is bound by CPU on the
shared cores, so a broker gains there only what CPU per message it saves (its own, or its
clients' when they cost less per message against it). For `rmqtool serve` it also gives the cores'
worth its event-loop thread ran (`loop run`) and waited runnable in a run queue (`wait`) per second
of the window: when the two add up to about 1, the loop thread was never idle, it is the
bottleneck, and what it waited is the clients' threads taking the cores' fair shares.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

MSG_SIZE = 1024
BATCH = 32
QUEUES = 8
BODY = bytes((i * 7) % 251 for i in range(MSG_SIZE))


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
    # serve's event-loop thread in the window (Java generator, rmqtool targets): seconds it ran,
    # seconds it waited runnable in the CPU's run queue
    loop_run: float | None = None
    loop_wait: float | None = None

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
    def cores_busy(self) -> float | None:
        """Cores the server and the load generators used together per second of the window
        (Java generator): near `os.cpu_count()` the case is bound by the shared CPU."""
        if self.server_cpu is None or self.client_cpu is None or self.seconds <= 0:
            return None
        return (self.server_cpu + self.client_cpu) / self.seconds

    @property
    def loop_busy(self) -> float | None:
        """The share of the window serve's event-loop thread ran or wanted to: near 1 it is saturated,
        however much of a core it got (what it waited is the clients' threads running instead)."""
        if self.loop_run is None or self.loop_wait is None or self.seconds <= 0:
            return None
        return (self.loop_run + self.loop_wait) / self.seconds

    @property
    def rate(self) -> float:
        return self.msgs / self.seconds if self.seconds > 0 else 0.0

    def pct(self, p: float) -> float:
        if not self.lat:
            return float("nan")
        s = sorted(self.lat)
        return s[min(len(s) - 1, int(p / 100 * len(s)))] * 1000


def spread(total_tasks: int, procs: int) -> list[int]:
    base, extra = divmod(total_tasks, procs)
    return [base + (1 if i < extra else 0) for i in range(procs) if base + (1 if i < extra else 0) > 0]


def _stat_fields(pid: int | str) -> list[str]:
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()


def process_tree(pid: int) -> list[int]:
    """`pid` and its running descendants, from the parent ids in /proc/N/stat (parents first)."""
    children: dict[int, list[int]] = {}
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                ppid = int(_stat_fields(entry.name)[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(entry.name))
    out, todo = [], [pid]
    while todo:
        p = todo.pop(0)
        out.append(p)
        todo.extend(children.get(p, []))
    return out


def server_cpu(t: Any) -> float | None:
    """CPU seconds (user + system) the target's server has used so far, from /proc: its own, its
    running descendants' (rmqtool's index process, RMQTOOL_INDEX_PROCESS=1) and its reaped
    children's."""
    if t.proc is None:
        return None
    pid = t.proc.pid
    try:
        fields = _stat_fields(pid)
    except OSError:
        return None
    ticks = sum(int(x) for x in fields[11:15])  # utime, stime, cutime, cstime
    for child in process_tree(pid)[1:]:
        try:
            f = _stat_fields(child)
        except OSError:
            continue
        ticks += int(f[11]) + int(f[12])
    return ticks / os.sysconf("SC_CLK_TCK")


def loop_sched(t: Any) -> tuple[float, float] | None:
    """(seconds run, seconds waited runnable) of the server's event-loop thread so far, from
    /proc/PID/task/PID/schedstat of its main thread; None for a server whose requests do not
    run on its main thread (`Target.loop_thread` false: Apache's, NATS') or without schedstat."""
    if t.proc is None or not t.loop_thread:
        return None
    pid = t.proc.pid
    try:
        run_ns, wait_ns = Path(f"/proc/{pid}/task/{pid}/schedstat").read_text().split()[:2]
    except (OSError, ValueError):
        return None
    return int(run_ns) / 1e9, int(wait_ns) / 1e9


def with_cpu(t: Any, run: Callable[..., Result], *args: object) -> Result:
    """`run(t, *args)` with the server CPU it cost recorded on the Result (unless `run` measured
    it over its own window)."""
    c0 = server_cpu(t)
    r = run(t, *args)
    c1 = server_cpu(t)
    if c0 is not None and c1 is not None and r.server_cpu is None:
        r.server_cpu = c1 - c0
    return r


def line(r: Result) -> str:
    cpu = r.cpu_per_msg_us
    return (f"{r.target:8s} {r.case}  {r.rate:10.0f} msg/s  {r.rate * MSG_SIZE / 1e6:7.1f} MB/s  "
            f"p50 {r.pct(50):7.2f} ms  p99 {r.pct(99):7.2f} ms  "
            + (f"cpu {cpu:7.1f} us/msg  " if cpu is not None else "")
            + (f"client {r.client_cpu_per_msg_us:7.1f} us/msg  " if r.client_cpu is not None else "")
            + (f"cores {r.cores_busy:4.2f}  " if r.cores_busy is not None else "")
            + (f"loop run {r.loop_run / r.seconds:4.2f} wait {r.loop_wait / r.seconds:4.2f}  "
               if r.loop_busy is not None else "")
            + f"({r.msgs} msgs"
            + (f", {r.busy} refused busy)" if r.busy else ")"))
