"""Issue 12: Apache's classic push consumer (DefaultMQPushConsumer, Java client 5.3.3) in POP mode,
against Apache's broker (the reference) and `rmqtool serve`, side by side.

`java/.../PopPushSuite.java` switches its group to POP with SET_MESSAGE_REQUEST_MODE (401, what
`mqadmin setConsumeMode -m POP` sends) and starts a consumer with `setClientRebalance(false)`: its
rebalance asks the broker with QUERY_ASSIGNMENT (400), pops (queueId -1, initMode, expType, exp),
acks, and changes the invisible time of a message it answers RECONSUME_LATER for.
"""

from __future__ import annotations

import json
import subprocess
import time

import pytest

from .harness import java_cmd

pytestmark = [pytest.mark.interop, pytest.mark.timeout(300)]

SCENARIOS = ["consume-all", "reconsume-later"]
_RUNS: dict[str, dict[str, dict]] = {}


def suite_results(broker, tmp_path_factory) -> dict[str, dict]:
    if broker.kind not in _RUNS:
        home = tmp_path_factory.mktemp(f"poppush-{broker.kind}")
        p = subprocess.run(java_cmd("PopPushSuite", "--namesrv", broker.namesrv, "--broker", broker.broker,
                                    "--run", str(int(time.time())), home=home),
                           capture_output=True, timeout=240)
        (home / "stderr.txt").write_bytes(p.stderr)
        lines = [json.loads(x) for x in p.stdout.decode().splitlines() if x.startswith("{")]
        _RUNS[broker.kind] = {r["scenario"]: r for r in lines}
        _RUNS[broker.kind]["_stderr"] = {"detail": p.stderr.decode(errors="replace")[-2000:]}
    return _RUNS[broker.kind]


@pytest.mark.slow
@pytest.mark.parametrize("scenario", SCENARIOS)
def test_java_push_consumer_in_pop_mode(any_broker, tmp_path_factory, scenario):
    results = suite_results(any_broker, tmp_path_factory)
    r = results.get(scenario)
    assert r is not None, f"no result for {scenario}: {results['_stderr']['detail']}"
    assert r["ok"], f"{scenario} against {any_broker.kind}: {r['detail']}"
