"""Clusters of `rmqtool serve` processes for tests: a name server alone, brokers alone (masters, slaves).

Broker ports are picked so that the port - 2 (VIP channel, which a slave asks its master's topic
table on) and port + 1 (HA) are free too: with ephemeral ports another broker's could be there.
"""

from __future__ import annotations

import re
import subprocess
import sys
import time
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
