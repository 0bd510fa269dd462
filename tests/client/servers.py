"""Servers the client tests run against: `rmqtool serve`, and Apache RocketMQ 5.3.x where it is built.

Both are real processes on loopback ephemeral ports. Apache's name server and broker come from
the jars `.ci/steps` fetches for tests/interop/java (Maven Central); without them the "apache"
parameter skips.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
from pathlib import Path

import pytest

from tests.interop.harness import JARS_NOT_BUILT
from tests.serve_helpers import ROOT, rmqtool_env, start_serve, stop_process

JAVA_DIR = ROOT / "tests" / "interop" / "java"

SERVE_CONF = """\
brokerClusterName=DefaultCluster
brokerName=broker-a
mappedFileSizeCommitLog=67108864
mappedFileSizeConsumeQueue=600000
transactionCheckInterval=500
transactionTimeOut=800
transactionCheckMax=5
enablePropertyFilter=true
"""


env = rmqtool_env


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _is_free(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True


def free_broker_port() -> int:
    """A free port P whose neighbours are free too: a Java broker also binds P - 2 (its "fast"
    remoting port) and P + 1 (HA); a random port alone collided with other tests' servers."""
    for _ in range(50):
        p = free_port()
        if p - 2 > 1024 and _is_free(p - 2) and _is_free(p + 1):
            return p
    return free_port()


class Server:
    kind = "?"
    namesrv = ""
    broker = ""
    broker_name = "broker-a"

    def stop(self) -> None: ...

    def kill(self) -> None: ...

    def restart(self) -> None: ...

    def kill_broker(self) -> None:
        """SIGKILL the broker (for serve: the whole process, it hosts the name server too)."""
        self.kill()

    def restart_broker(self) -> None:
        self.restart()


class ServeServer(Server):
    """`python -m rmqtool serve` with the ready line parsed from stderr."""

    kind = "serve"

    def __init__(self, root: Path, namesrv_port: int = 0, broker_port: int = 0) -> None:
        self.root = root
        self.store = root / "store"
        root.mkdir(parents=True, exist_ok=True)
        self.conf = root / "broker.conf"
        self.conf.write_text(SERVE_CONF)
        self.ports = (namesrv_port, broker_port)
        self.proc: subprocess.Popen | None = None
        self._start()

    def _start(self) -> None:
        self.err_path = self.root / f"serve-{time.monotonic_ns()}.stderr"
        self.proc, m = start_serve(self.store, self.conf, self.err_path, namesrv_port=self.ports[0],
                                   broker_port=self.ports[1])
        if m:
            self.namesrv = f"{m.group(1)}:{m.group(2)}"
            self.broker_name = m.group(3)
            self.broker = f"{m.group(4)}:{m.group(5)}"
            self.ports = (int(m.group(2)), int(m.group(5)))
            return
        self.kill()
        raise RuntimeError(f"serve did not start: {self.err_path.read_text(errors='replace')}")

    def stop(self) -> None:
        if self.proc:
            stop_process(self.proc, timeout=15)

    def kill(self) -> None:
        if self.proc:
            stop_process(self.proc, signal.SIGKILL)

    def restart(self) -> None:
        """Start again on the same ports and store (after `kill` or `stop`)."""
        self._start()


def apache_classpath() -> str | None:
    cp = JAVA_DIR / "target" / "classpath.txt"
    if not cp.is_file() or not any(os.access(Path(d) / "java", os.X_OK) for d in os.environ["PATH"].split(":")):
        return None
    text = cp.read_text().strip()
    return text if "rocketmq-broker" in text and "rocketmq-namesrv" in text else None


JAVA_OPTS = ["-Xms128m", "-Xmx512m", "-Xss512k", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
             "-Djava.net.preferIPv4Stack=true", "--add-opens=java.base/java.nio=ALL-UNNAMED",
             "--add-opens=java.base/sun.nio.ch=ALL-UNNAMED", "--add-opens=java.base/java.lang=ALL-UNNAMED",
             "--add-opens=java.base/java.util=ALL-UNNAMED", "--add-exports=java.base/sun.nio.ch=ALL-UNNAMED"]


class ApacheServer(Server):
    """Apache RocketMQ's NamesrvStartup + BrokerStartup (5.3.x jars) on loopback."""

    kind = "apache"

    def __init__(self, root: Path, classpath: str) -> None:
        self.root = root
        root.mkdir(parents=True, exist_ok=True)
        self.cp = classpath
        self.procs: list[subprocess.Popen] = []
        self.broker_proc: subprocess.Popen | None = None
        for attempt in range(3):  # a port taken between choosing and binding: new ports, once more
            self._configure(root)
            try:
                self._start()
                return
            except RuntimeError:
                self.stop()  # never leave a half-started name server or broker behind
                self.procs = []
                if attempt == 2:
                    raise

    def _configure(self, root: Path) -> None:
        self.ns_port, self.broker_port = free_port(), free_broker_port()
        self.namesrv = f"127.0.0.1:{self.ns_port}"
        self.broker = f"127.0.0.1:{self.broker_port}"
        (root / "namesrv.conf").write_text(f"listenPort={self.ns_port}\n")
        (root / "broker.conf").write_text(
            f"brokerClusterName=DefaultCluster\nbrokerName=broker-a\nbrokerId=0\nbrokerIP1=127.0.0.1\n"
            f"listenPort={self.broker_port}\nnamesrvAddr={self.namesrv}\nstorePathRootDir={root / 'store'}\n"
            f"storePathCommitLog={root / 'store' / 'commitlog'}\nautoCreateTopicEnable=true\n"
            f"autoCreateSubscriptionGroup=true\nenablePropertyFilter=true\nmappedFileSizeCommitLog=67108864\n"
            f"mappedFileSizeConsumeQueue=600000\ntransactionCheckInterval=1000\ntransactionTimeOut=4000\n"
            f"brokerRole=ASYNC_MASTER\nflushDiskType=ASYNC_FLUSH\ndiskMaxUsedSpaceRatio=99\n")

    def _java(self, main: str, *args: str, log: str) -> subprocess.Popen:
        e = env()
        e["ROCKETMQ_HOME"] = str(self.root)
        out = open(self.root / log, "ab")
        p = subprocess.Popen(["java", *JAVA_OPTS, f"-Duser.home={self.root}", "-Drocketmq.home.dir=" + str(self.root),
                              "-cp", self.cp, main, *args], stdout=out, stderr=subprocess.STDOUT, env=e)
        out.close()
        self.procs.append(p)
        return p

    def _wait_port(self, port: int, proc: subprocess.Popen, timeout: float = 60) -> None:
        deadline = time.time() + timeout
        while time.time() < deadline:
            if proc.poll() is not None:
                raise RuntimeError(f"java exited: {(self.root / 'broker.log').read_text(errors='replace')[-2000:]}")
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", port)) == 0:
                    return
            time.sleep(0.2)
        raise RuntimeError(f"port {port} not open after {timeout}s")

    def _start(self) -> None:
        ns = self._java("org.apache.rocketmq.namesrv.NamesrvStartup", "-c", str(self.root / "namesrv.conf"),
                        log="namesrv.log")
        self._wait_port(self.ns_port, ns)
        self._start_broker()

    def _start_broker(self) -> None:
        br = self.broker_proc = self._java("org.apache.rocketmq.broker.BrokerStartup", "-c", str(self.root / "broker.conf"),
                        log="broker.log")
        self._wait_port(self.broker_port, br)
        wait_for_route(self.namesrv, "TBW102")

    def stop(self) -> None:
        for p in reversed(self.procs):
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
                try:
                    p.wait(20)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait()
        self.procs.clear()

    def kill(self) -> None:
        for p in self.procs:
            if p.poll() is None:
                p.kill()
                p.wait()
        self.procs.clear()

    def restart(self) -> None:
        self._start()

    def kill_broker(self) -> None:
        if self.broker_proc is not None and self.broker_proc.poll() is None:
            self.broker_proc.kill()
            self.broker_proc.wait()

    def restart_broker(self) -> None:
        self._start_broker()


def wait_for_route(namesrv: str, topic: str, timeout: float = 60) -> None:
    """Until the name server has a route for `topic` (a broker registers ~1-10 s after it listens)."""
    import asyncio

    from rmqtool.remoting.codes import RequestCode
    from rmqtool.remoting.command import RemotingCommand
    from rmqtool.remoting.transport import connect

    async def ask() -> bool:
        try:
            conn = await connect(namesrv)
        except Exception:
            return False
        try:
            resp = await conn.request(RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": topic}))
            return resp.code == 0
        finally:
            await conn.close()

    deadline = time.time() + timeout
    while time.time() < deadline:
        if asyncio.run(ask()):
            return
        time.sleep(0.3)
    raise RuntimeError(f"no route for {topic} at {namesrv} after {timeout}s")


def start_server(kind: str, root: Path) -> Server:
    if kind == "serve":
        return ServeServer(root)
    cp = apache_classpath()
    if cp is None:
        pytest.skip(JARS_NOT_BUILT)
    return ApacheServer(root, cp)
