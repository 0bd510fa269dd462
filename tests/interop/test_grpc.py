"""Issue 13, side by side: the same gRPC suites (Apache's Python 5.x SDK 5.1.2 and the raw
`apache.rocketmq.v2` stub) against `rmqtool serve --grpc-port` and against the reference,
Apache's own proxy 5.3.3 in cluster mode (ProxyStartup, tests/interop/sdk5/proxy.xml) in front of
Apache's broker 5.3.3. The suites are the ones of tests/proxy, given each target in turn."""

from __future__ import annotations

import json
import re
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.proxy import test_sdk_consumer as consumer_suite
from tests.proxy import test_sdk_dlq as dlq_suite
from tests.proxy import test_sdk_producer as producer_suite
from tests.proxy import test_sdk_recall as recall_suite
from tests.proxy import test_status as status_suite
from tests.proxy.conftest import Stub, wait_for
from tests.proxy.sdk_helpers import handle_fields, pull_all, send_sdk, set_recall

from .conftest import start_apache, start_apache_proxy, start_rmqtool_serve, stop_rmqtool_serve
from .harness import APACHE_SECOND_VERSION, java_classpath
from .side_by_side import with_the_other_kinds

pytestmark = pytest.mark.interop
SDK5 = Path(__file__).parent / "sdk5" / "target"  # built by .ci/steps/12-sdk5-proxy.sh
PROXY_CP = SDK5 / "proxy-classpath.txt"
PROXY_LATEST_CP = SDK5 / "proxy-latest-classpath.txt"


@dataclass
class GrpcTarget:
    kind: str
    grpc: str
    broker: str
    namesrv: str


def start_proxy(root: Path, namesrv: str, classpath: Path) -> tuple[subprocess.Popen, str]:
    """ProxyStartup -pm cluster in front of the brokers of `namesrv`; (process, gRPC address)."""
    # the proxy tells the broker its transactional producers every 20 s by default: the test
    # broker's 15 checks 1 s apart would all find no channel
    return start_apache_proxy(root, namesrv, classpath, timeout=90, transactionHeartbeatPeriodSecond=1)


@pytest.fixture(scope="session")
def apache_grpc(apache_broker, tmp_path_factory):
    """ProxyStartup -pm cluster with the Apache broker's name server."""
    if not PROXY_CP.is_file():
        pytest.skip("Apache's proxy not built (run .ci/steps/12-sdk5-proxy.sh; needs Maven Central)")
    proc, grpc = start_proxy(tmp_path_factory.mktemp("apache-proxy"), apache_broker.namesrv, PROXY_CP)
    yield GrpcTarget("apache", grpc, apache_broker.broker, apache_broker.namesrv)
    proc.kill()
    proc.wait()


@pytest.fixture(scope="module")
def apache55_grpc(tmp_path_factory):
    """The newest Apache served whole (5.5.0): its broker and its proxy, for RecallMessage."""
    if java_classpath(APACHE_SECOND_VERSION) is None or not PROXY_LATEST_CP.is_file():
        pytest.skip(f"Apache {APACHE_SECOND_VERSION} not built (run .ci/steps/10-interop.sh and 12-sdk5-proxy.sh)")
    root = tmp_path_factory.mktemp("apache55")
    b = start_apache(root / "broker", version=APACHE_SECOND_VERSION)
    try:
        proc, grpc = start_proxy(root, b.namesrv, PROXY_LATEST_CP)
    except RuntimeError:
        b.proc.kill()
        raise
    yield GrpcTarget("apache-5.5.0", grpc, b.broker, b.namesrv)
    proc.kill()
    b.proc.kill()
    proc.wait()
    b.proc.wait()


@pytest.fixture(scope="session")
def rmqtool_grpc(tmp_path_factory):
    b = start_rmqtool_serve(tmp_path_factory.mktemp("serve-grpc"), "--grpc-port", "0")
    m = re.search(r"gRPC ([\d.]+:\d+)", (b.home / "serve.stderr").read_text())
    assert m, "the ready line names no gRPC endpoint"
    yield GrpcTarget("rmqtool", m.group(1), b.broker, b.namesrv)
    assert stop_rmqtool_serve(b) == 0
    assert "Traceback" not in (b.home / "serve.stderr").read_text()


TARGETS = {"apache": "apache_grpc", "rmqtool": "rmqtool_grpc"}  # target kind -> its fixture


@pytest.fixture(params=["apache", "rmqtool"])
def target(request) -> GrpcTarget:
    return request.getfixturevalue("apache_grpc" if request.param == "apache" else "rmqtool_grpc")


@pytest.fixture
def stub(target):
    st = Stub(target.grpc)
    yield st
    st.close()


# --- the Python SDK: producer ------------------------------------------------------------------

def test_sdk_normal(target):
    producer_suite.test_normal_message_reads_back_through_remoting(target)


def test_sdk_fifo(target):
    producer_suite.test_fifo_message_group_keeps_one_queue(target)


def test_sdk_delay(target):
    producer_suite.test_delay_message_waits_for_its_delivery_time(target)


def test_sdk_transaction(target):
    producer_suite.test_transaction_commit_rollback_and_check_back(target)


# --- the Python SDK: consumers ---------------------------------------------------------------

def test_sdk_simple_consumer(target):
    consumer_suite.test_simple_consumer_receive_ack_change_invisible_redelivery(target)


def test_sdk_remoting_to_grpc(target):
    consumer_suite.test_remoting_sent_message_received_through_grpc(target)


def test_sdk_tag_filter(target):
    consumer_suite.test_tag_filter_and_bad_invisible_duration(target)


def test_sdk_push_consumer(target):
    consumer_suite.test_push_consumer_gets_every_message(target)


def test_sdk_dlq_push(target):
    dlq_suite.test_push_consumer_forwards_to_dlq_after_max_attempts(target)


def test_sdk_dlq_simple(target):
    dlq_suite.test_simple_consumer_message_past_max_attempts_goes_to_dlq(target)


def test_relay_refuses_an_unknown_client(target):
    status_suite.test_consumer_relay_refuses_an_unknown_client(target)


def test_sdk_recall(target):
    recall_suite.test_recalled_delay_message_is_never_delivered(target)


def test_recall_refusals(target):
    recall_suite.test_recall_refusals(target)


@pytest.mark.slow
def test_recall_on_apache_5_5(apache55_grpc):
    """The same recall suites against Apache 5.5.0's proxy + broker (5.3.3 has RecallMessage too)."""
    recall_suite.test_recalled_delay_message_is_never_delivered(apache55_grpc)
    recall_suite.test_recall_refusals(apache55_grpc)


# --- statuses, raw stub ------------------------------------------------------------------------

def test_route(target, stub):
    status_suite.test_query_route_lists_queues_behind_the_grpc_endpoint(target, stub)


@pytest.mark.parametrize("topic, code, text", [
    ("", 40002, "The specified topic is blank"),
    ("bad topic!", 40002, "contains illegal characters"),
    ("TBW102", 40002, "cannot access system topic"),
    ("NoSuchTopicHere", 40402, "No topic route info in name server for the topic: NoSuchTopicHere"),
])
def test_route_refusals(target, stub, topic, code, text):
    status_suite.test_query_route_refusals(stub, topic, code, text)


def test_client_id_required(target):
    status_suite.test_client_id_is_required(target)


def test_send_refusals(target, stub):
    status_suite.test_send_refusals(target, stub)


def test_send_ok(target, stub):
    status_suite.test_send_ok_entry(target, stub)


def test_no_settings(target, stub):
    status_suite.test_heartbeat_and_termination_without_settings(stub)


def test_end_transaction(target, stub):
    status_suite.test_end_transaction_refusals(target, stub)


def test_telemetry_invalid(target, stub):
    status_suite.test_telemetry_without_pub_sub_is_invalid_argument(stub)


def test_telemetry_settings(target, stub):
    status_suite.test_telemetry_settings_come_back_completed(target, stub)


def test_consumer_refusals(target):
    status_suite.test_consumer_settings_and_receive_refusals(target)


def test_assignment(target, stub):
    status_suite.test_query_assignment(target, stub)


# --- the Java 5.x SDK (rocketmq-client-java 5.2.0; JavaSdkSuite in tests/interop/sdk5) -------------

JAVA_SDK = SDK5


def java_sdk(tmp_path: Path, *args: str, timeout: float = 120) -> list[dict]:
    cp = JAVA_SDK / "classpath.txt"
    if not cp.is_file() or not (JAVA_SDK / "classes").is_dir():
        pytest.skip("the Java 5.x SDK suite is not built (run .ci/steps/12-sdk5-proxy.sh; needs Maven Central)")
    cmd = ["java", "-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Djava.net.preferIPv4Stack=true",
           f"-Duser.home={tmp_path}", "-cp", f"{JAVA_SDK / 'classes'}:{cp.read_text().strip()}",
           "rmqtool.interop.grpc.JavaSdkSuite", *args]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)
    assert r.returncode == 0, r.stderr[-3000:]
    return [json.loads(line) for line in r.stdout.splitlines() if line.startswith("{")]


def test_java_sdk_send_normal_fifo_delay(target, tmp_path, request):
    with_the_other_kinds(request, tmp_path, target, TARGETS, java_sdk_send_normal_fifo_delay)


def java_sdk_send_normal_fifo_delay(target, tmp_path: Path) -> None:
    from tests.proxy.conftest import create_topic, unique

    for kind, mtype, queues in (("normal", None, 2), ("fifo", "FIFO", 4), ("delay", "DELAY", 1)):
        topic = unique("JS" + kind[0].upper())
        create_topic(target, topic, queues, mtype)
        receipts = java_sdk(tmp_path, "send", target.grpc, topic, kind, "4")
        assert len(receipts) == 4
        got = wait_for(lambda t=topic, q=queues: (lambda ms: ms if len(ms) == 4 else None)(
            pull_all(target.broker, t, q)), timeout=30)
        assert got, f"{kind}: the four messages did not arrive"
        by_id = {m.properties["UNIQ_KEY"]: m for m in got}
        assert set(by_id) == {r["id"] for r in receipts}
        for r in receipts:
            m = by_id[r["id"]]
            i = r["i"]
            assert (m.body, m.tags, m.keys, m.properties["seq"]) == (f"java {i}".encode(), "TagJ", f"kj{i}", str(i))
            assert m.properties["PGROUP"] == topic
            if kind == "fifo":
                assert m.properties["__SHARDINGKEY"] == f"g{i % 2}"
            if kind == "delay":
                assert int(m.properties["TIMER_DELIVER_MS"]) <= m.store_timestamp + 1000
        if kind == "fifo":
            for g in ("g0", "g1"):
                assert len({m.queue_id for m in got if m.properties["__SHARDINGKEY"] == g}) == 1


def transaction_check_back(target, tmp_path: Path, sdk, prefix: str) -> None:
    """An SDK's `transaction` scenario (`sdk`: java_sdk or node_sdk): its committed message and the one
    committed when the broker checked back arrive, the rolled back one never."""
    from tests.proxy.conftest import create_topic, unique

    topic = unique(prefix)
    create_topic(target, topic, 1, "TRANSACTION")
    out = sdk(tmp_path, "transaction", target.grpc, topic, timeout=180)
    assert "checked" in out[-1]["checked"]
    want = {b"committed", b"checked"}
    got = wait_for(lambda: (lambda ms: ms if {m.body for m in ms} >= want else None)(
        pull_all(target.broker, topic, 1)), timeout=30)
    # at least once (both brokers): with transactionTimeOut=1000 a check may race the client's
    # own commit and commit a message twice; a rolled back one never arrives
    assert got and {m.body for m in got} == want, [m.body for m in got]


def test_java_sdk_transaction_check_back(target, tmp_path, request):
    with_the_other_kinds(request, tmp_path, target, TARGETS, java_sdk_transaction_check_back)


def java_sdk_transaction_check_back(target, tmp_path: Path) -> None:
    transaction_check_back(target, tmp_path, java_sdk, "JST")


def test_java_sdk_simple_consumer_of_remoting_messages(target, tmp_path, request):
    with_the_other_kinds(request, tmp_path, target, TARGETS, java_sdk_simple_consumer_of_remoting_messages)


def java_sdk_simple_consumer_of_remoting_messages(target, tmp_path: Path) -> None:
    from tests.broker.conftest import Wire, props, send_ext
    from tests.proxy.conftest import create_topic, unique

    topic, group = unique("JSC"), unique("JSCG")
    create_topic(target, topic, 1)
    w = Wire(target.broker)
    try:
        for i in range(3):
            r = w.request(310, send_ext(topic, 0, props(TAGS="TagR", KEYS=f"ka{i} kb", UNIQ_KEY=f"7F00000100012222000000000000000{i}",
                                                          seq=str(i))), f"remoting {i}".encode())
            assert r.code == 0, r.remark
    finally:
        w.close()
    out = java_sdk(tmp_path, "simple", target.grpc, topic, group, "3", timeout=180)
    views = [o for o in out if "body" in o]
    assert sorted(v["body"] for v in views) == ["remoting 0", "remoting 1", "remoting 2"]
    for v in views:
        i = int(v["props"]["seq"])
        assert v["id"] == f"7F00000100012222000000000000000{i}" and v["tag"] == "TagR"
        assert sorted(v["keys"]) == [f"ka{i}", "kb"] and v["attempt"] == 1 and v["topic"] == topic
    (again,) = [o for o in out if "redelivered" in o]
    assert again["redelivered"] == views[-1]["id"] and again["attempt"] == 2
    assert out[-1] == {"after": 0}


def test_java_sdk_push_consumer(target, tmp_path, request):
    with_the_other_kinds(request, tmp_path, target, TARGETS, java_sdk_push_consumer)


def java_sdk_push_consumer(target, tmp_path: Path) -> None:
    from tests.proxy.conftest import create_topic, unique

    topic, group = unique("JSP"), unique("JSPG")
    create_topic(target, topic, 2)
    send_sdk(target, topic, [f"push {i}".encode() for i in range(5)])
    out = java_sdk(tmp_path, "push", target.grpc, topic, group, "5", timeout=180)
    assert sorted(out[-1]["bodies"]) == [f"push {i}" for i in range(5)]


# --- the Node.js 5.x SDK (npm rocketmq-client-nodejs 1.0.8, tests/interop/grpc-node) ----------------

NODE_SDK = Path(__file__).parent / "grpc-node"


def node_sdk(tmp_path: Path, *args: str, timeout: float = 120) -> list[dict]:
    if not (NODE_SDK / "node_modules" / "rocketmq-client-nodejs").is_dir():
        pytest.skip("the Node.js 5.x SDK is not installed (run .ci/steps/11-grpc.sh; needs npm)")
    import os

    env = dict(os.environ, HOME=str(tmp_path))  # its log file goes under ~/logs
    r = subprocess.run(["node", str(NODE_SDK / "suite.js"), *args], capture_output=True, text=True, timeout=timeout,
                       stdin=subprocess.DEVNULL, env=env)
    assert r.returncode == 0, r.stderr[-3000:]
    return [json.loads(line) for line in r.stdout.splitlines() if line.startswith("{")]


def test_node_sdk_send(target, tmp_path, request):
    with_the_other_kinds(request, tmp_path, target, TARGETS, node_sdk_send)


def node_sdk_send(target, tmp_path: Path) -> None:
    from tests.proxy.conftest import create_topic, unique

    topic = unique("NS")
    create_topic(target, topic, 2)
    receipts = node_sdk(tmp_path, "send", target.grpc, topic, "3")
    got = wait_for(lambda: (lambda ms: ms if len(ms) == 3 else None)(
        pull_all(target.broker, topic, 2)), timeout=30)
    assert got and {m.properties["UNIQ_KEY"] for m in got} == {r["id"] for r in receipts}
    for m in got:
        i = int(m.properties["seq"])
        assert (m.body, m.tags, m.keys) == (f"node {i}".encode(), "TagN", f"kn{i}")


def test_node_sdk_simple_consumer(target, tmp_path, request):
    with_the_other_kinds(request, tmp_path, target, TARGETS, node_sdk_simple_consumer)


def node_sdk_simple_consumer(target, tmp_path: Path) -> None:
    from tests.proxy.conftest import create_topic, unique

    topic, group = unique("NC"), unique("NCG")
    create_topic(target, topic, 1)
    ids = send_sdk(target, topic, [b"m0", b"m1", b"m2"])
    out = node_sdk(tmp_path, "simple", target.grpc, topic, group, "3", timeout=180)
    views = [o for o in out if "body" in o]
    assert sorted(v["id"] for v in views) == sorted(ids)
    for v in views:
        i = int(v["props"]["seq"])
        assert (v["body"], v["tag"], v["keys"], v["attempt"]) == (f"m{i}", "TagA", [f"key{i}"], 1)
    (again,) = [o for o in out if "redelivered" in o]
    assert again == {"redelivered": views[-1]["id"], "attempt": 2}


def test_node_sdk_fifo(target, tmp_path, request):
    with_the_other_kinds(request, tmp_path, target, TARGETS, node_sdk_fifo)


def node_sdk_fifo(target, tmp_path: Path) -> None:
    from tests.proxy.conftest import create_topic, unique

    topic = unique("NF")
    create_topic(target, topic, 4, "FIFO")
    receipts = node_sdk(tmp_path, "fifo", target.grpc, topic, "6")
    assert len(receipts) == 6
    for g in (0, 1):
        assert len({r["queue"] for r in receipts if r["i"] % 2 == g}) == 1, receipts
    got = wait_for(lambda: (lambda ms: ms if len(ms) == 6 else None)(
        pull_all(target.broker, topic, 4)), timeout=30)
    assert got and {m.properties["UNIQ_KEY"] for m in got} == {r["id"] for r in receipts}
    queue_of = {r["id"]: r["queue"] for r in receipts}
    for m in got:
        i = int(m.properties["seq"])
        assert (m.body, m.tags, m.keys, m.properties["__SHARDINGKEY"]) == (f"fifo {i}".encode(), "TagF", f"kf{i}", f"g{i % 2}")
        assert m.queue_id == queue_of[m.properties["UNIQ_KEY"]]
    for g in ("g0", "g1"):  # one queue per group, in send order
        seqs = [int(m.properties["seq"]) for m in sorted(got, key=lambda m: m.queue_offset)
                if m.properties["__SHARDINGKEY"] == g]
        assert seqs == sorted(seqs)


def test_node_sdk_transaction_check_back(target, tmp_path, request):
    with_the_other_kinds(request, tmp_path, target, TARGETS, node_sdk_transaction_check_back)


def node_sdk_transaction_check_back(target, tmp_path: Path) -> None:
    transaction_check_back(target, tmp_path, node_sdk, "NT")


def test_node_sdk_push_consumer(target, tmp_path, request):
    with_the_other_kinds(request, tmp_path, target, TARGETS, node_sdk_push_consumer)


def node_sdk_push_consumer(target, tmp_path: Path) -> None:
    """The Node SDK's PushConsumer (1.0.8 has one): every message once acked; the one whose first
    delivery failed comes back as attempt 2."""
    from tests.proxy.conftest import create_topic, unique

    topic, group = unique("NP"), unique("NPG")
    create_topic(target, topic, 2)
    send_sdk(target, topic, [f"push {i}".encode() for i in range(5)])
    (res,) = node_sdk(tmp_path, "push", target.grpc, topic, group, "5", timeout=180)
    assert res["bodies"] == [f"push {i}" for i in range(5)]
    assert sorted(res["attempts"].values()) == [1, 1, 1, 1, 2], res


def test_node_sdk_recall(target, tmp_path, request):
    with_the_other_kinds(request, tmp_path, target, TARGETS, node_sdk_recall)


def node_sdk_recall(target, tmp_path: Path) -> None:
    """The Node SDK's Producer.recallMessage (1.0.8): recalled twice (both times before the
    delivery time, so both are taken), a handle that does not decode refused by the proxy."""
    from tests.proxy.conftest import create_topic, unique

    topic = unique("NR")
    create_topic(target, topic, 1, "DELAY")
    set_recall(target, True)
    out = node_sdk(tmp_path, "recall", target.grpc, topic)
    sent, recalled, again, bad = out
    assert handle_fields(sent["handle"])[1:5:3] == [topic, sent["sent"]]
    assert recalled == {"recalled": {"ok": sent["sent"]}} and again == {"again": {"ok": sent["sent"]}}
    assert "recall handle is invalid" in bad["bad"]["error"] and "50001" in bad["bad"]["error"]
    kept = wait_for(lambda: pull_all(target.broker, topic, 1), timeout=30)
    assert [m.body for m in kept] == [b"keep me"]
    time.sleep(9)  # past the recalled message's delivery time (8 s after its send)
    assert [m.body for m in pull_all(target.broker, topic, 1)] == [b"keep me"]


def test_java_sdk_answers_thread_stack_and_verify_through_serve(rmqtool_grpc, tmp_path):
    """mqadmin's consumerStatus -s and consumeMessage, as remoting requests to serve's broker:
    GET_CONSUMER_RUNNING_INFO (jstack) and CONSUME_MESSAGE_DIRECTLY reach a Java 5.x push consumer
    over its Telemetry stream and come back with its answers.

    Serve only: serve is a broker with the proxy inside (Apache's local mode), where the broker's
    consumer table holds the gRPC clients. Apache's proxy in cluster mode (the reference here)
    tells its broker about transactional producers only (ClusterTransactionService), and its
    remoting port does not serve GET_CONSUMER_RUNNING_INFO: its broker has no consumer to relay to
    (GET_CONSUMER_LIST_BY_GROUP stays empty), which the unknown-client test below shows alike."""
    from tests.broker.conftest import Wire, props, send_ext
    from tests.proxy.conftest import create_topic, unique, wait_for

    target = rmqtool_grpc
    topic, group = unique("JSR"), unique("JSRG")
    create_topic(target, topic, 1)
    cp = JAVA_SDK / "classpath.txt"
    if not cp.is_file():
        pytest.skip("the Java 5.x SDK suite is not built (run .ci/steps/12-sdk5-proxy.sh; needs Maven Central)")
    proc = subprocess.Popen(["java", "-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
                             f"-Duser.home={tmp_path}", "-cp", f"{JAVA_SDK / 'classes'}:{cp.read_text().strip()}",
                             "rmqtool.interop.grpc.JavaSdkSuite", "push", target.grpc, topic, group, "1000"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL)
    w = Wire(target.broker)
    try:
        ids = wait_for(lambda: (lambda r: json.loads(r.body)["consumerIdList"] if r.code == 0 else None)(
            w.request(38, {"consumerGroup": group})), timeout=60)
        assert ids, "the Java push consumer never joined its group"
        r = w.request(307, {"consumerGroup": group, "clientId": ids[0], "jstackEnable": "true"}, timeout=30)
        assert r.code == 0, r.remark
        assert "Thread" in json.loads(r.body)["jstack"] or "thread" in json.loads(r.body)["jstack"]
        sent = w.request(310, send_ext(topic, 0, props(TAGS="V", UNIQ_KEY="7F00000100013333000000000000000A")), b"verify me")
        assert sent.code == 0
        r = w.request(309, {"consumerGroup": group, "clientId": ids[0], "msgId": sent.ext_fields["msgId"],
                            "topic": topic}, timeout=30)
        assert r.code == 0, r.remark
        answer = json.loads(r.body)
        assert answer["consumeResult"] == "CR_SUCCESS" and answer["remark"] == "from gRPC client"
        r = w.request(307, {"consumerGroup": group, "clientId": "nobody", "jstackEnable": "true"})
        assert (r.code, r.remark) == (1, f"The Consumer <{group}> <nobody> not online")
    finally:
        w.close()
        proc.kill()
        proc.wait()
