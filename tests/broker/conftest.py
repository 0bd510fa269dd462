"""A real `rmqtool serve` subprocess on ephemeral loopback ports, and a wire-level client for it."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from rmqtool.remoting.command import RemotingCommand
from rmqtool.remoting.transport import Connection, connect
from tests.serve_helpers import READY, rmqtool_env, start_serve, stop_process  # noqa: F401 (READY, rmqtool_env: re-exported)

# fast transaction checks and 1 s delay levels for the tests (RocketMQ property names)
TEST_CONF = """\
brokerClusterName=DefaultCluster
brokerName=broker-a
mappedFileSizeCommitLog=67108864
mappedFileSizeConsumeQueue=600000
transactionCheckInterval=500
transactionTimeOut=800
transactionCheckMax=3
messageDelayLevel=1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s
"""


class ServeProcess:
    """`python -m rmqtool serve` with the ready line parsed; stderr is captured to a file."""

    def __init__(self, store: Path, conf: str = TEST_CONF, extra_args: tuple[str, ...] = (),
                 broker_port: int | None = 0) -> None:
        self.store = store
        store.mkdir(parents=True, exist_ok=True)
        self.conf_path = store.parent / f"{store.name}.conf"
        self.conf_path.write_text(conf)
        self.stderr_path = store.parent / f"{store.name}.stderr"
        self.proc, m = start_serve(store, self.conf_path, self.stderr_path, broker_port=broker_port,
                                   extra_args=extra_args, stdout=subprocess.PIPE)
        if m:
            self.namesrv = f"{m.group(1)}:{m.group(2)}"
            self.broker_name = m.group(3)
            self.broker = f"{m.group(4)}:{m.group(5)}"
            return
        self.stop()
        raise RuntimeError(f"serve did not become ready:\n{self.stderr_path.read_text(errors='replace')}")

    @property
    def stderr(self) -> str:
        return self.stderr_path.read_text(errors="replace")

    def rss_kib(self) -> int:
        for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
        return 0

    def rss_anon_kib(self) -> int:
        """Anonymous RSS: the heap, without the pages of mapped store files (each stored message
        touches an IndexFile hash slot page, so VmRSS also grows with what was written)."""
        for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
            if line.startswith("RssAnon:"):
                return int(line.split()[1])
        return 0

    def fds(self, sockets_only: bool = False) -> int:
        """Open file descriptors (sockets only: store files opened for new queues are not leaks)."""
        base = f"/proc/{self.proc.pid}/fd"
        names = os.listdir(base)
        if not sockets_only:
            return len(names)
        count = 0
        for n in names:
            try:
                count += os.readlink(f"{base}/{n}").startswith("socket:")
            except OSError:
                pass
        return count

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 20) -> int:
        return stop_process(self.proc, sig, timeout)


class InProcessServe:
    """`rmqtool serve` in this process (store and broker.conf under `root`), its event loop on a
    thread of its own: for tests that patch what serve calls (os.fsync, the disk usage probe) or
    ask which thread made a call (`thread.ident`). `broker` is its remoting address."""

    def __init__(self, root: Path, conf: str, **options: Any) -> None:
        from rmqtool.broker.server import Serve, ServeOptions

        (root / "broker.conf").write_text(conf)
        self.srv = Serve(ServeOptions(store=root / "store", namesrv_port=0, broker_port=0,
                                      config_file=root / "broker.conf", **options))
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self.broker = str(asyncio.run_coroutine_threadsafe(self.srv.start(), self.loop).result(60).broker)

    def close(self) -> None:
        asyncio.run_coroutine_threadsafe(self.srv.close(), self.loop).result(60)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)
        self.loop.close()


class Wire:
    """A remoting connection driven from synchronous test code (its loop runs on a thread).

    Requests the server sends to us (NOTIFY_CONSUMER_IDS_CHANGED, CHECK_TRANSACTION_STATE) are
    collected in `.incoming` and answered with code 0.
    """

    def __init__(self, addr: str) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self.incoming: list[RemotingCommand] = []
        self.conn: Connection = self.call(connect(addr, self._on_request))
        self._responses = 0
        feed = self.conn._frames.feed

        def counting_feed(data: bytes) -> list[RemotingCommand]:
            cmds = feed(data)
            self._responses += sum(1 for c in cmds if c.is_response)
            return cmds

        self.conn._frames.feed = counting_feed  # type: ignore[method-assign]

    def responses_seen(self) -> int:
        return self._responses

    def call_soon_response(self, opaque: int, frame: bytes):  # type: ignore[no-untyped-def]
        """Write a hand-made frame and return a Future of the response with `opaque`."""
        async def go() -> RemotingCommand:
            fut = self.loop.create_future()
            self.conn._pending[opaque] = fut
            self.conn.writer.write(frame)
            await self.conn.writer.drain()
            return await asyncio.wait_for(fut, 10)
        return asyncio.run_coroutine_threadsafe(go(), self.loop)

    async def _on_request(self, cmd: RemotingCommand, conn: Connection) -> RemotingCommand:
        self.incoming.append(cmd)
        return cmd.response()

    def call(self, coro, timeout: float = 40):  # type: ignore[no-untyped-def]
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    def request(self, code: int, ext: dict | None = None, body: bytes = b"", timeout: float = 10,
                version: int | None = None, language: str | None = None) -> RemotingCommand:
        cmd = RemotingCommand.request(code, ext, body)
        if version is not None:
            cmd.version = version
        if language is not None:
            cmd.language = language
        return self.call(self.conn.request(cmd, timeout), timeout + 5)

    def request_async(self, code: int, ext: dict | None = None, body: bytes = b"", timeout: float = 30):
        """Start a request; returns a concurrent Future of the response."""
        cmd = RemotingCommand.request(code, ext, body)
        return asyncio.run_coroutine_threadsafe(self.conn.request(cmd, timeout), self.loop)

    def oneway(self, code: int, ext: dict | None = None, body: bytes = b"") -> None:
        self.call(self.conn.oneway(RemotingCommand.request(code, ext, body, oneway=True)))

    def send_raw(self, data: bytes) -> None:
        async def w() -> None:
            self.conn.writer.write(data)
            await self.conn.writer.drain()
        self.call(w())

    def wait_incoming(self, code: int, timeout: float = 10) -> RemotingCommand:
        deadline = time.time() + timeout
        while time.time() < deadline:
            for c in self.incoming:
                if c.code == code:
                    self.incoming.remove(c)
                    return c
            time.sleep(0.02)
        raise AssertionError(f"no request {code} from the server within {timeout}s")

    def close(self) -> None:
        try:
            self.call(self.conn.close(), 5)
        finally:
            self.loop.call_soon_threadsafe(self.loop.stop)
            self.thread.join(5)
            self.loop.close()


@pytest.fixture(scope="module")
def serve(tmp_path_factory) -> Iterator[ServeProcess]:
    p = ServeProcess(tmp_path_factory.mktemp("serve") / "store")
    yield p
    code = p.stop()
    err = p.stderr
    assert "Traceback" not in err, err
    assert code == 0, err


@pytest.fixture
def broker(serve) -> Iterator[Wire]:
    w = Wire(serve.broker)
    yield w
    w.close()


@pytest.fixture
def namesrv(serve) -> Iterator[Wire]:
    w = Wire(serve.namesrv)
    yield w
    w.close()


# ------------------------------------------------------------------ request builders

def decode_records(body: bytes) -> list:
    """The stored records of a pull / view / query body, as a client decodes them."""
    from rmqtool.layouts.message import decode_record

    out, pos = [], 0
    while pos < len(body):
        m = decode_record(body, pos)
        out.append(m)
        pos += m.total_size
    return out


def create_topic(addr: str, topic: str, queues: int = 2) -> None:
    """UPDATE_AND_CREATE_TOPIC (17) as mqadmin's updateTopic sends it, on a connection of its own."""
    w = Wire(addr)
    try:
        r = w.request(17, {"topic": topic, "defaultTopic": "TBW102", "readQueueNums": str(queues),
                           "writeQueueNums": str(queues), "perm": "6", "topicFilterType": "SINGLE_TAG",
                           "topicSysFlag": "0", "order": "false"})
        assert r.code == 0, r.remark
    finally:
        w.close()


def send_ext(topic: str, queue_id: int = 0, props: str = "", group: str = "pg", **over) -> dict:
    """SEND_MESSAGE_V2 extFields as the Java client writes them (letters, string values)."""
    ext = {"a": group, "b": topic, "c": "TBW102", "d": "4", "e": str(queue_id), "f": "0",
           "g": str(int(time.time() * 1000)), "h": "0", "i": props, "j": "0", "k": "false", "m": "false"}
    ext.update({k: str(v) for k, v in over.items()})
    return ext


def props(**kv: str) -> str:
    return "".join(f"{k}\x01{v}\x02" for k, v in kv.items()).rstrip("\x02")


def pull_ext(topic: str, group: str, queue_id: int = 0, offset: int = 0, sub: str | None = "*",
             suspend_ms: int = 0, sys_flag: int | None = None, expr_type: str | None = None,
             max_msgs: int = 32) -> dict:
    flag = sys_flag if sys_flag is not None else ((2 if suspend_ms else 0) | (4 if sub is not None else 0))
    ext = {"consumerGroup": group, "topic": topic, "queueId": queue_id, "queueOffset": offset,
           "maxMsgNums": max_msgs, "sysFlag": flag, "commitOffset": 0, "suspendTimeoutMillis": suspend_ms,
           "subVersion": 0}
    if sub is not None:
        ext["subscription"] = sub
    if expr_type:
        ext["expressionType"] = expr_type
    return ext


def heartbeat_body(client_id: str, group: str | None = None, subs: list[dict] | None = None,
                   producer: str | None = None, consume_type: str = "CONSUME_PASSIVELY") -> bytes:
    import json

    cds = []
    if group:
        cds.append({"groupName": group, "consumeType": consume_type, "messageModel": "CLUSTERING",
                    "consumeFromWhere": "CONSUME_FROM_LAST_OFFSET", "unitMode": False,
                    "subscriptionDataSet": subs or []})
    return json.dumps({"clientID": client_id, "consumerDataSet": cds,
                       "producerDataSet": [{"groupName": producer}] if producer else []}).encode()


def sub_data(topic: str, expr: str = "*", etype: str = "TAG", version: int = 1) -> dict:
    from rmqtool.remoting.bodies import SubscriptionData

    return SubscriptionData.build(topic, expr, etype, version).to_json_obj()
