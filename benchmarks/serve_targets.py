"""The servers benchmarks/serve.py measures, each started on a fresh store and stopped after its
last case: `rmqtool serve`, the `ceiling` (benchmarks/nullsend.py), Apache's broker 5.3.3 (the
interop suite's launcher) and NATS JetStream (installed with apt-get when missing and the user
may). While another target's case runs, a target is paused (SIGSTOP, its child processes too):
idle, Apache's broker keeps about a tenth of a core busy (its services poll, ReputMessageService
every millisecond), which the other target's case would lose."""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from serve_common import process_tree

ROOT = Path(__file__).resolve().parents[1]


@dataclass
class Target:
    name: str
    kind: str  # "rocketmq" | "nats"
    broker: str  # host:port of the broker (RocketMQ) or the NATS server
    proc: subprocess.Popen | None = None
    workdir: Path | None = None
    notes: list[str] = field(default_factory=list)
    namesrv: str = ""  # host:port of the name server (RocketMQ), where the Java client starts
    loop_thread: bool = False  # its requests run on its main thread's event loop (rmqtool serve)

    def pause(self) -> None:
        """Stop the server and its child processes (SIGSTOP) until `resume`."""
        self._signal_tree(signal.SIGSTOP)

    def resume(self) -> None:
        self._signal_tree(signal.SIGCONT)

    def _signal_tree(self, sig: signal.Signals) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        for pid in process_tree(self.proc.pid):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, sig)

    def stop(self) -> None:
        self.resume()  # a stopped process would hold SIGTERM until continued
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self.workdir is not None:
            shutil.rmtree(self.workdir, ignore_errors=True)


def _wait_line(stream, pattern: re.Pattern, timeout: float, proc: subprocess.Popen) -> re.Match:
    deadline = time.time() + timeout
    buf = ""
    os.set_blocking(stream.fileno(), False)
    while time.time() < deadline:
        chunk = stream.read()
        if chunk:
            buf += chunk.decode(errors="replace") if isinstance(chunk, bytes) else chunk
            m = pattern.search(buf)
            if m:
                return m
        if proc.poll() is not None:
            break
        time.sleep(0.05)
    raise RuntimeError(f"not ready: {buf[-2000:]}")


def start_rmqtool(flush: str, name: str = "rmqtool", python: str = sys.executable, wrapper: list[str] | None = None,
                  ready_timeout: float = 60.0) -> Target:
    """`rmqtool serve` run by the interpreter `python` (under `wrapper`, benchmarks/insitu.py's
    callgrind, when given); for the `rmqtool-index` target the same with its index built by a
    second process (`RMQTOOL_INDEX_PROCESS=1`), for `rmqtool-nopoll` the same without busy polling
    (`--busy-poll 0`), for `ceiling` benchmarks/nullsend.py's serve that answers sends without
    storing them."""
    work = Path(tempfile.mkdtemp(prefix=f"bench-{name}-"))
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    if name in ("rmqtool", "rmqtool-index", "rmqtool-nopoll"):
        env["RMQTOOL_INDEX_PROCESS"] = "1" if name == "rmqtool-index" else "0"
    entry = ["-m", "rmqtool"] if name != "ceiling" else [str(ROOT / "benchmarks" / "nullsend.py")]
    extra = ["--busy-poll", "0"] if name == "rmqtool-nopoll" else []
    proc = subprocess.Popen([*(wrapper or []), python, *entry, "serve", "--store", str(work / "store"),
                             "--namesrv-port", "0", "--broker-port", "0", "--flush", flush, *extra],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
    m = _wait_line(proc.stderr, re.compile(r"name server ([\d.]+:\d+), broker \S+ ([\d.]+:\d+)"), ready_timeout, proc)
    return Target(name, "rocketmq", m.group(2), proc, work, namesrv=m.group(1), loop_thread=True)


def start_apache(classpath_dir: Path) -> Target | None:
    cp_file = classpath_dir / "target" / "classpath.txt"
    classes = classpath_dir / "target" / "classes"
    if not cp_file.is_file() or not (classes / "rmqtool" / "interop" / "ApacheBroker.class").is_file() \
            or not shutil.which("java"):
        return None
    work = Path(tempfile.mkdtemp(prefix="bench-apache-"))
    cp = str(classes) + os.pathsep + cp_file.read_text().strip()
    cmd = ["java", "-Xms1g", "-Xmx1g", "-XX:+UseG1GC", "-Djava.net.preferIPv4Stack=true",
           f"-Duser.home={work}", "--add-opens=java.base/java.nio=ALL-UNNAMED",
           "--add-opens=java.base/sun.nio.ch=ALL-UNNAMED", "--add-opens=java.base/java.lang=ALL-UNNAMED",
           "--add-opens=java.base/java.util=ALL-UNNAMED", "--add-exports=java.base/sun.nio.ch=ALL-UNNAMED",
           "-cp", cp, "rmqtool.interop.ApacheBroker", "--store", str(work / "store"),
           "mappedFileSizeCommitLog=1073741824", "flushDiskType=ASYNC_FLUSH"]
    proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    m = _wait_line(proc.stdout, re.compile(r"READY namesrv=(\S+) broker=(\S+)"), 120, proc)
    return Target("apache", "rocketmq", m.group(2), proc, work, namesrv=m.group(1))


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


NATS_INSTALL = ["apt-get", "install", "-y", "-q", "nats-server"]


def nats_exe() -> str | None:
    return shutil.which("nats-server") or ("/usr/sbin/nats-server" if Path("/usr/sbin/nats-server").exists() else None)


def install_nats() -> str | None:
    """The benchmark's setup for the NATS column: Debian's nats-server package, installed with
    apt-get when it is missing (as root, or through `sudo -n`); None when that cannot be done."""
    exe = nats_exe()
    if exe is not None or shutil.which("apt-get") is None:
        return exe
    if os.geteuid() == 0:
        prefix: list[str] = []
    elif shutil.which("sudo") and subprocess.run(["sudo", "-n", "true"], capture_output=True).returncode == 0:
        prefix = ["sudo", "-n"]
    else:
        return None
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    print(f"# nats: installing: {' '.join(prefix + NATS_INSTALL)}", file=sys.stderr, flush=True)
    for step in ([], ["apt-get", "update", "-q"]):  # a stale package list: update once, then retry
        if step:
            subprocess.run(prefix + step, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        if subprocess.run(prefix + NATS_INSTALL, env=env, stdout=subprocess.DEVNULL,
                          stderr=subprocess.DEVNULL).returncode == 0:
            break
    return nats_exe()


def start_nats() -> Target | None:
    exe = install_nats()
    if exe is None:
        return None
    work = Path(tempfile.mkdtemp(prefix="bench-nats-"))
    port = _free_port()
    proc = subprocess.Popen([exe, "-js", "-sd", str(work / "js"), "-a", "127.0.0.1", "-p", str(port)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 20
    while time.time() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), 0.5).close()
            break
        except OSError:
            time.sleep(0.1)
    return Target("nats", "nats", f"127.0.0.1:{port}", proc, work)
