"""Apache's Java client (rocketmq-client 5.3.3, tests/interop/java ClientSuite) run as a command:
the producer and the consumers the interop tests drive against a name server (test_apache_store,
test_slave_reads); not collected as tests."""

from __future__ import annotations

import subprocess
from pathlib import Path

from .harness import java_cmd, json_lines


def client(namesrv: str, home: Path, *args: str, timeout: float = 120) -> list[dict]:
    """ClientSuite ARGS against `namesrv`, its JSON lines (one per message sent or consumed)."""
    p = subprocess.run(java_cmd("ClientSuite", *args, "--namesrv", namesrv, home=home,
                                props={"rocketmq.client.rebalance.waitInterval": "1000"}),
                       capture_output=True, timeout=timeout)
    assert p.returncode == 0, p.stderr.decode(errors="replace")[-3000:] + p.stdout.decode(errors="replace")[-2000:]
    return json_lines(p.stdout.decode("utf-8"))
