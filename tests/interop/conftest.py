"""Brokers for the interop tests: Apache RocketMQ's own (the reference) and `rmqtool serve`.

Each is started once per session on free loopback ports and stopped cleanly at the end. Client
suites (Java, ali-ons, C++) run against both: against Apache's broker they prove the harness
checks what a real broker does; against `rmqtool serve` they prove serve is one.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.client.servers import free_broker_port

from .harness import APACHE_VERSION, JARS_NOT_BUILT, JAVA_OPENS, ROOT, has_module, java_classpath, java_cmd


@dataclass
class Broker:
    """A running name server + broker pair."""

    kind: str  # "apache" or "rmqtool"
    namesrv: str
    broker: str
    store: Path
    home: Path  # scratch dir for client logs of this broker's tests
    proc: subprocess.Popen


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_port(addr: str, deadline: float) -> None:
    host, port = addr.rsplit(":", 1)
    while time.time() < deadline:
        try:
            with socket.create_connection((host, int(port)), timeout=1):
                return
        except OSError:
            time.sleep(0.1)
    raise TimeoutError(f"nothing listens on {addr}")


def start_apache(root: Path, *conf: str, heap: str = "512m", version: str = APACHE_VERSION) -> Broker:
    """ApacheBroker (tests/interop/java): RocketMQ 5.3.3's (or `version`'s) NamesrvController + BrokerController.

    Its ports are free ones it picks itself; another process of the suite can take one before
    it binds, so a start that failed with "Address already in use" is tried again (twice)."""
    root.mkdir(parents=True, exist_ok=True)
    for attempt in range(3):
        log = open(root / "apache.stderr", "wb")  # noqa: SIM115 - lives as long as the process
        proc = subprocess.Popen(java_cmd("ApacheBroker", "--store", str(root / "store"), *conf, heap=heap,
                                         home=root / "home", version=version),
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log)
        line = proc.stdout.readline().decode()  # READY ... or EOF when it failed (it exits then)
        if line.startswith("READY"):
            break
        proc.kill()
        proc.wait()
        log.close()
        if attempt < 2 and "Address already in use" in (root / "apache.stderr").read_text(errors="replace"):
            continue
        raise RuntimeError(f"Apache broker did not start: {line!r}, see {root / 'apache.stderr'}")
    fields = dict(f.split("=", 1) for f in line.split()[1:])
    return Broker("apache", fields["namesrv"], fields["broker"], Path(fields["store"]), root, proc)


def stop_apache(b: Broker, timeout: float = 90) -> None:
    """Clean shutdown (flush, checkpoint, abort removed): close stdin and wait."""
    try:
        b.proc.stdin.close()
        b.proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        b.proc.kill()
        b.proc.wait()


def kill_apache(b: Broker) -> None:
    """SIGKILL, for a broker whose store nothing reads afterwards: its clean shutdown (stop_apache)
    takes seconds more (DefaultMessageStore.shutdown alone sleeps 3 s)."""
    b.proc.kill()
    b.proc.wait()


def start_apache_proxy(root: Path, namesrv: str, classpath: Path, timeout: float = 120,
                       **conf: object) -> tuple[subprocess.Popen, str]:
    """Apache's ProxyStartup -pm cluster in front of the brokers of `namesrv`, on the jars listed in
    `classpath` (tests/interop/sdk5/target); `conf`: more rmq-proxy.json keys. (process, gRPC address)."""
    root.mkdir(parents=True, exist_ok=True)
    grpc_port = free_port()
    (root / "rmq-proxy.json").write_text(json.dumps({
        "rocketMQClusterName": "DefaultCluster", "namesrvAddr": namesrv, "grpcServerPort": grpc_port,
        "remotingListenPort": free_port(), "proxyMode": "cluster", **conf}))
    log = open(root / "proxy.log", "wb")  # noqa: SIM115 - lives as long as the process
    proc = subprocess.Popen(["java", "-Xmx256m", "-Xss512k", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
                             "-Djava.net.preferIPv4Stack=true", f"-Duser.home={root / 'home'}", *JAVA_OPENS,
                             "-cp", classpath.read_text().strip(), "org.apache.rocketmq.proxy.ProxyStartup",
                             "-pc", str(root / "rmq-proxy.json"), "-pm", "cluster"],
                            stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT)
    try:
        wait_port(f"127.0.0.1:{grpc_port}", time.time() + timeout)
    except TimeoutError:
        proc.kill()
        raise RuntimeError(f"Apache's proxy did not start: {(root / 'proxy.log').read_text()[-2000:]}") from None
    return proc, f"127.0.0.1:{grpc_port}"


def start_rmqtool_serve(root: Path, *extra: str) -> Broker:
    root.mkdir(parents=True, exist_ok=True)
    # serve listens for slaves on broker port + 1 (haListenPort): that one must be free too
    ns_port, broker_port = free_port(), free_broker_port()
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    log = open(root / "serve.stderr", "wb")  # noqa: SIM115 - lives as long as the process
    # The same transaction check timing as the Apache test broker (defaults would take a minute).
    (root / "broker.conf").write_text("transactionCheckInterval=1000\ntransactionTimeOut=1000\n")
    proc = subprocess.Popen([sys.executable, "-m", "rmqtool", "serve", "--store", str(root / "store"),
                             "--namesrv-port", str(ns_port), "--broker-port", str(broker_port),
                             "-c", str(root / "broker.conf"), *extra,
                             *(() if "--grpc-port" in extra else ("--grpc-port", "-1"))],  # gRPC: only when asked
                            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=log, env=env)
    deadline = time.time() + 30
    ns, br = f"127.0.0.1:{ns_port}", f"127.0.0.1:{broker_port}"
    try:
        wait_port(ns, deadline)
        wait_port(br, deadline)
    except TimeoutError:
        proc.kill()
        raise RuntimeError(f"rmqtool serve did not start: {(root / 'serve.stderr').read_text()[-2000:]}") from None
    ready = ""
    while time.time() < deadline and ns not in ready:  # the ready line names the name server address
        ready = (root / "serve.stderr").read_text(errors="replace")
        time.sleep(0.05)
    assert ns in ready, f"no ready line naming {ns} on stderr: {ready[-500:]!r}"
    return Broker("rmqtool", ns, br, root / "store", root, proc)


def stop_rmqtool_serve(b: Broker, timeout: float = 30) -> int:
    b.proc.send_signal(signal.SIGTERM)
    try:
        return b.proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        b.proc.kill()
        b.proc.wait()
        raise


@pytest.fixture(scope="session")
def apache_broker(tmp_path_factory):
    if java_classpath() is None:
        pytest.skip(JARS_NOT_BUILT)
    b = start_apache(tmp_path_factory.mktemp("apache"))
    yield b
    kill_apache(b)  # nothing reads this store afterwards


@pytest.fixture(scope="session")
def rmqtool_serve(tmp_path_factory):
    if not has_module("rmqtool.cli.serve"):
        pytest.skip("rmqtool.cli.serve is not on this branch yet")
    b = start_rmqtool_serve(tmp_path_factory.mktemp("serve"))
    yield b
    stop_rmqtool_serve(b)


@pytest.fixture(params=["apache", "rmqtool"])
def any_broker(request) -> Broker:
    """Each client test runs against Apache's broker (the reference) and against rmqtool serve."""
    return request.getfixturevalue("apache_broker" if request.param == "apache" else "rmqtool_serve")
