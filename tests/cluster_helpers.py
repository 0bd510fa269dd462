"""Clusters of `rmqtool serve` processes for tests: a name server alone, brokers alone (masters, slaves).

Broker ports are picked so that the port - 2 (VIP channel, which a slave asks its master's topic
table on) and port + 1 (HA) are free too: with ephemeral ports another broker's could be there.
"""

from __future__ import annotations

import contextlib
import random
import re
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

from tests.client.servers import free_broker_port  # p, p - 2 (VIP) and p + 1 (HA) free
from tests.serve_helpers import rmqtool_env, stop_process

NAMESRV_READY = re.compile(r"rmqtool serve: name server ([\d.]+):(\d+)$", re.MULTILINE)
BROKER_READY = re.compile(r"rmqtool serve: broker (\S+) ([\d.]+):(\d+)(?: \(brokerId (\d+), (\w+)\))?, "
                          r"(?:gRPC (?:[\d.]+:\d+|off \([^)]*\)), )?store ",
                          re.MULTILINE)

BASE_CONF = """\
brokerClusterName=DefaultCluster
mappedFileSizeCommitLog=67108864
mappedFileSizeConsumeQueue=600000
"""


def _ephemeral_range() -> tuple[int, int]:
    try:
        low, high = (int(x) for x in Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split())
        return low, high
    except (OSError, ValueError):
        return 32768, 60999


def _bindable(port: int) -> bool:
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def restartable_broker_port() -> int:
    """A broker port P (P - 2, P + 1 free too) for a broker restarted on the same ports, outside
    the ephemeral range: there the kernel hands other processes' connections and `bind(0)`
    listeners any free port, which took a killed master's HA port before its restart. Below
    the range, only a test choosing the same fixed port could, and the choice is random."""
    low, high = _ephemeral_range()
    lo, hi = (10000, low - 4) if low > 12000 else (high + 3, 65530)
    rng = random.Random()
    for _ in range(200):
        p = rng.randrange(lo, hi)
        if all(_bindable(x) for x in (p - 2, p, p + 1)):
            return p
    return free_broker_port()


@contextlib.contextmanager
def hold_ports(ports: list[int]) -> Iterator[None]:
    """Bind `ports` (SO_REUSEADDR, as the broker binds them: a TIME_WAIT leftover is no conflict)
    while a killed broker is down, so that nothing takes them until the restart, which starts
    right after the block."""
    socks = []
    try:
        for port in ports:
            s = socket.socket()
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                s.close()
                continue  # taken already: the restart says so
            socks.append(s)
        yield
    finally:
        for s in socks:
            s.close()


def is_port_in_use_failure(e: BaseException) -> bool:
    """A serve start that failed because a port was taken (its stderr is in the error)."""
    text = str(e)
    return "did not become ready" in text and ("in use" in text or "cannot listen" in text)


class Proc:
    """One `python -m rmqtool serve ...` process, ready line parsed."""

    def __init__(self, args: list[str], stderr_path: Path, ready: re.Pattern[str], timeout: float = 30) -> None:
        self.stderr_path = stderr_path
        with open(stderr_path, "wb") as err:
            self.proc = subprocess.Popen([sys.executable, "-m", "rmqtool", "serve", *args],
                                         stdout=subprocess.DEVNULL, stderr=err, env=rmqtool_env())
        deadline = time.time() + timeout
        while time.time() < deadline:
            m = ready.search(self.stderr)
            if m:
                self.match = m
                return
            if self.proc.poll() is not None:
                break
            time.sleep(0.05)
        self.stop()
        raise RuntimeError(f"serve {' '.join(args)} did not become ready:\n{self.stderr}")

    @property
    def stderr(self) -> str:
        return self.stderr_path.read_text(errors="replace")

    def stop(self, sig: int = 15, timeout: float = 20) -> int:
        return stop_process(self.proc, sig, timeout)


def start_namesrv(tmp: Path, name: str = "namesrv") -> tuple[Proc, str]:
    p = Proc(["--namesrv-only", "--namesrv-port", "0"], tmp / f"{name}.stderr", NAMESRV_READY)
    return p, f"{p.match.group(1)}:{p.match.group(2)}"


def start_broker(tmp: Path, name: str, namesrv: str, conf: str, port: int | None = None,
                 store: Path | None = None) -> tuple[Proc, str]:
    """A broker alone (`--broker-only`) registering with `namesrv`; conf adds to BASE_CONF."""
    store = store or tmp / f"{name}-store"
    store.mkdir(parents=True, exist_ok=True)
    conf_path = tmp / f"{name}.conf"
    conf_path.write_text(BASE_CONF + conf)
    port = port or free_broker_port()
    p = Proc(["--broker-only", "--store", str(store), "--broker-port", str(port), "-c", str(conf_path),
              "--namesrv", namesrv, "--grpc-port", "-1"], tmp / f"{name}.stderr", BROKER_READY)
    return p, f"{p.match.group(2)}:{p.match.group(3)}"


def master_conf(broker_name: str, **extra: str) -> str:
    return f"brokerName={broker_name}\nbrokerRole=ASYNC_MASTER\n" + "".join(f"{k}={v}\n" for k, v in extra.items())


def slave_conf(broker_name: str, broker_id: int = 1, **extra: str) -> str:
    extra.setdefault("slaveReadEnable", "true")
    return (f"brokerName={broker_name}\nbrokerRole=SLAVE\nbrokerId={broker_id}\n"
            + "".join(f"{k}={v}\n" for k, v in extra.items()))


def start_master_and_slave(tmp: Path, procs: list[Proc], broker_name: str, topic: str, queues: int,
                           slave_store: Path | None = None) -> tuple[str, Proc, str, Proc, str]:
    """A name server, an ASYNC_MASTER `broker_name` with `topic` of `queues` queues, then its slave
    (brokerId 1, slaveReadEnable); each process joins `procs` as it starts, for the caller to stop.
    Returns (name server, master process, master address, slave process, slave address)."""
    from tests.broker.conftest import create_topic

    ns_proc, ns = start_namesrv(tmp)
    procs.append(ns_proc)
    m_proc, master = start_broker(tmp, "m", ns, master_conf(broker_name))
    procs.append(m_proc)
    create_topic(master, topic, queues)
    s_proc, slave = start_broker(tmp, "s", ns, slave_conf(broker_name), store=slave_store)
    procs.append(s_proc)
    return ns, m_proc, master, s_proc, slave
