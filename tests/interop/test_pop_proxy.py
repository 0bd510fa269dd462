"""Issue 12, Done when: Apache's own proxy (rocketmq-proxy 5.3.3, cluster mode) in front of
`rmqtool serve`, and in front of Apache's broker as the reference, side by side; the 5.x Java SDK
(rocketmq-client-java 5.2.0, the newest on Maven Central) through it: producer (normal, FIFO with
a message group, delay, transaction with check-back), simple consumer (receive, ack, change
invisible duration, redelivery, DLQ after max attempts), push consumer (tests/interop/sdk5).
The newest proxy on Maven Central (5.5.0) runs the same suite in front of serve (its reference
run against Apache's 5.3.3 broker is left out to keep CI's time)."""

from __future__ import annotations

import asyncio
import json
import subprocess
import time
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

import pytest

from rmqtool.remoting.command import RemotingCommand
from rmqtool.remoting.transport import connect

from .conftest import start_apache_proxy, start_rmqtool_serve, stop_rmqtool_serve

pytestmark = [pytest.mark.interop, pytest.mark.slow, pytest.mark.timeout(600)]
SDK5 = Path(__file__).parent / "sdk5" / "target"
SCENARIOS = ["normal", "fifo", "delay", "transaction", "simple", "redelivery", "dlq", "push"]
_RESULTS: dict[str, Future] = {}  # "<broker kind>-<proxy version>" -> the run's verdicts by scenario
_RUNNER = ThreadPoolExecutor(max_workers=3)


PROXIES = {"5.3.3": "proxy-classpath.txt", "latest": "proxy-latest-classpath.txt"}


def start_proxy(namesrv: str, root: Path, version: str = "5.3.3") -> tuple[subprocess.Popen, str]:
    # the proxy tells the broker its transactional producers every 20 s by default: the broker's
    # check-backs (1 s apart, transactionCheckMax of them) could all come before and find no channel
    return start_apache_proxy(root, namesrv, SDK5 / PROXIES[version], transactionHeartbeatPeriodSecond=1)


MESSAGE_TYPES = {"fifo": "FIFO", "delay": "DELAY", "transaction": "TRANSACTION"}


def topic_plan(run: str) -> list[tuple[str, int, str]]:
    """(topic, queues, message.type) per scenario: FIFO on one queue; the proxy checks the type."""
    return [(f"Sdk5_{s}_{run}", 1 if s == "fifo" else 4, MESSAGE_TYPES.get(s, "NORMAL")) for s in SCENARIOS]


async def _prepare_remote(broker: str, run: str) -> None:
    """Apache's broker: the topics (with their message.type) and a DLQ group with retryMaxTimes 1."""
    conn = await connect(broker)
    try:
        for topic, queues, mtype in topic_plan(run):
            ext = {"topic": topic, "defaultTopic": "TBW102", "readQueueNums": queues, "writeQueueNums": queues,
                   "perm": 6, "topicFilterType": "SINGLE_TAG", "topicSysFlag": 0, "order": "false",
                   "attributes": f"+message.type={mtype}"}
            r = await conn.request(RemotingCommand.request(17, ext), timeout=10)
            assert r.code == 0, r.remark
        for s in SCENARIOS:  # newer proxies look a consumer's group up before serving it
            body = json.dumps({"groupName": f"cg_sdk5_{s}_{run}", "consumeEnable": True,
                               "retryMaxTimes": 1 if s == "dlq" else 16, "retryQueueNums": 1,
                               "consumeBroadcastEnable": True}).encode()
            r = await conn.request(RemotingCommand.request(200, {}, body), timeout=10)
            assert r.code == 0, f"UPDATE_AND_CREATE_SUBSCRIPTIONGROUP: {r.code} {r.remark}"
    finally:
        await conn.close()


def _seed_store(store: Path, run: str) -> None:
    """A fresh serve store holding the same topics and group in its config files, as a broker loads them."""
    from rmqtool.store.local import LocalBroker
    from rmqtool.store.subscriptions import SubscriptionGroupConfig
    from rmqtool.store.topics import TopicConfig

    with LocalBroker.open(store) as local:
        for topic, queues, mtype in topic_plan(run):
            local.topics.update(TopicConfig(topic, queues, queues, 6, attributes={"message.type": mtype}))
        for s in SCENARIOS:
            cfg = SubscriptionGroupConfig(f"cg_sdk5_{s}_{run}")
            cfg.retry_max_times = 1 if s == "dlq" else 16
            local.subscriptions.update(cfg)


def results_for(broker, tmp_path_factory, version: str = "5.3.3") -> dict[str, dict]:
    """The verdicts of the suite through proxy `version` in front of `broker`'s kind, by scenario.

    The first ask starts serve's two runs too, each with its own serve and proxy, beside the run it
    asked for: a run mostly waits (receive long polls, invisible durations, redelivery, the DLQ's
    attempts), so the three together take about the time of one."""
    if not (SDK5 / "classpath.txt").is_file() or not (SDK5 / PROXIES[version]).is_file():
        pytest.skip("the 5.x SDK and Apache's proxy are not built (run .ci/steps/12-sdk5-proxy.sh)")
    wanted = [(broker.kind, version)]
    if not _RESULTS:
        wanted += [("rmqtool", v) for v, cp in PROXIES.items() if (SDK5 / cp).is_file()]
    for kind, ver in wanted:
        key = f"{kind}-{ver}"
        if key not in _RESULTS:
            run = f"{int(time.time())}{len(_RESULTS)}"  # topics and groups of their own
            _RESULTS[key] = _RUNNER.submit(_run_suite, broker if kind == "apache" else None,
                                           tmp_path_factory.mktemp(f"sdk5-{key}"), ver, run)
    return _RESULTS[f"{broker.kind}-{version}"].result()


def _run_suite(apache, root: Path, version: str, run: str) -> dict[str, dict]:
    """Sdk5Suite through Apache's proxy `version` in front of `apache`, else of a serve of its own."""
    serve = None
    if apache is not None:
        broker = apache
        asyncio.run(_prepare_remote(broker.broker, run))
    else:  # serve's own store, seeded with the topics' message types and the DLQ group
        _seed_store(root / "serve" / "store", run)
        serve = broker = start_rmqtool_serve(root / "serve")
    try:
        proc, endpoint = start_proxy(broker.namesrv, root / "proxy", version)
        try:
            time.sleep(3)  # the proxy's first route and settings refresh
            cp = f"{SDK5 / 'classes'}:{(SDK5 / 'classpath.txt').read_text().strip()}"
            p = subprocess.run(["java", "-Xmx256m", "-Djava.net.preferIPv4Stack=true",
                                f"-Duser.home={root / 'home'}", "-cp", cp, "rmqtool.sdk5.Sdk5Suite",
                                "--endpoint", endpoint, "--run", run], capture_output=True, timeout=540)
        finally:
            proc.kill()
            proc.wait()
    finally:
        if serve is not None:
            stop_rmqtool_serve(serve)
    (root / "suite.stderr").write_bytes(p.stderr)
    res = {r["scenario"]: r for r in (json.loads(x) for x in p.stdout.decode().splitlines() if x.startswith("{"))}
    res["_log"] = {"detail": p.stderr.decode(errors="replace")[-1500:]}
    return res


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_java_sdk5_through_apaches_proxy(any_broker, tmp_path_factory, scenario):
    kind = any_broker.kind
    res = results_for(any_broker, tmp_path_factory)
    r = res.get(scenario)
    assert r is not None, f"no result for {scenario}: {res['_log']['detail']}"
    assert r["ok"], f"{scenario} through Apache's proxy in front of {kind}: {r['detail']}"


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_java_sdk5_through_the_newest_proxy_in_front_of_serve(rmqtool_serve, tmp_path_factory, scenario):
    res = results_for(rmqtool_serve, tmp_path_factory, "latest")
    r = res.get(scenario)
    assert r is not None, f"no result for {scenario}: {res['_log']['detail']}"
    assert r["ok"], f"{scenario} through Apache's newest proxy in front of serve: {r['detail']}"
