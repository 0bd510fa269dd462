"""`rmqtool serve` with its gRPC endpoint on an ephemeral port, and clients for it: Apache's
Python SDK (PyPI rocketmq-python-client, pinned in pyproject.toml) and the raw stub."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.broker.conftest import TEST_CONF, ServeProcess, Wire
from tests.serve_helpers import READY

grpc = pytest.importorskip("grpc")
pytest.importorskip("rocketmq.grpc_protocol")

from rocketmq.grpc_protocol import definition_pb2 as d  # noqa: E402
from rocketmq.grpc_protocol import service_pb2 as s  # noqa: E402
from rocketmq.grpc_protocol import service_pb2_grpc  # noqa: E402


class GrpcServe(ServeProcess):
    def __init__(self, store: Path, conf: str = TEST_CONF) -> None:
        super().__init__(store, conf, extra_args=("--grpc-port", "0"))
        m = READY.search(self.stderr)
        assert m and m.group(6), f"no gRPC port in the ready line: {self.stderr!r}"
        self.grpc = f"{m.group(4)}:{m.group(6)}"


@pytest.fixture(scope="module")
def serve(tmp_path_factory) -> Iterator[GrpcServe]:
    p = GrpcServe(tmp_path_factory.mktemp("grpc") / "store")
    yield p
    code = p.stop()
    assert "Traceback" not in p.stderr, p.stderr
    assert code == 0, p.stderr


def create_topic(target, topic: str, queues: int = 2, message_type: str | None = None) -> None:
    """UPDATE_AND_CREATE_TOPIC to `target.broker` as `mqadmin updateTopic [-a +message.type=TYPE]`
    sends it, then wait until `target.namesrv` routes it (a proxy caches a topic it could not route)."""
    ext = {"topic": topic, "defaultTopic": "TBW102", "readQueueNums": str(queues), "writeQueueNums": str(queues),
           "perm": "6", "topicFilterType": "SINGLE_TAG", "topicSysFlag": "0", "order": "false"}
    if message_type:
        ext["attributes"] = f"+message.type={message_type}"
    w = Wire(target.broker)
    try:
        r = w.request(17, ext)
        assert r.code == 0, r.remark
    finally:
        w.close()
    ns = Wire(target.namesrv)
    try:
        assert wait_for(lambda: ns.request(105, {"topic": topic}).code == 0, timeout=30), f"{topic} not routed"
    finally:
        ns.close()


def unique(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex[:8]}"


class Stub:
    """The raw MessagingService stub with the metadata every SDK call carries."""

    def __init__(self, addr: str, client_id: str | None = "rmqtool-test-client") -> None:
        self.channel = grpc.insecure_channel(addr)
        self.stub = service_pb2_grpc.MessagingServiceStub(self.channel)
        self.metadata = [("x-mq-language", "PYTHON"), ("x-mq-client-version", "5.1.2")]
        if client_id is not None:
            self.metadata.append(("x-mq-client-id", client_id))
        self.host, self.port = addr.rsplit(":", 1)

    def endpoints(self) -> d.Endpoints:
        return d.Endpoints(scheme=d.IPv4, addresses=[d.Address(host=self.host, port=int(self.port))])

    def call(self, name: str, request, timeout: float = 10):
        return getattr(self.stub, name)(request, metadata=self.metadata, timeout=timeout)

    def telemetry(self, *commands, timeout: float = 30) -> Telemetry:
        return Telemetry(self, list(commands), timeout)

    def close(self) -> None:
        self.channel.close()


class Telemetry:
    """A Telemetry call whose request side stays open (as an SDK keeps it) until `close()`."""

    def __init__(self, stub: Stub, commands: list, timeout: float) -> None:
        import threading

        self.done = threading.Event()

        def requests():
            yield from commands
            self.done.wait(timeout)

        self.call = stub.stub.Telemetry(requests(), metadata=stub.metadata, timeout=timeout)
        self.responses = iter(self.call)

    def next(self):
        return next(self.responses)

    def close(self) -> None:
        self.done.set()
        self.call.cancel()


def message(topic: str, body: bytes = b"body", **sp) -> d.Message:
    sp.setdefault("message_id", uuid.uuid4().hex.upper())
    return d.Message(topic=d.Resource(name=topic), body=body, system_properties=d.SystemProperties(**sp))


def wait_for(pred, timeout: float = 20.0, step: float = 0.1):
    deadline = time.time() + timeout
    while time.time() < deadline:
        v = pred()
        if v:
            return v
        time.sleep(step)
    return pred()


__all__ = ["GrpcServe", "Stub", "Telemetry", "create_topic", "d", "message", "s", "unique", "wait_for"]
