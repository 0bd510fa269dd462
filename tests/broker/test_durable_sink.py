"""The dispatch's collection of config writes (broker/durable.py): free on the hot path, still
exact where a request creates a topic or group, and nothing left unawaited when a request's task
is cancelled before it ran."""

from __future__ import annotations

import asyncio
import gc
import warnings

import pytest

from rmqtool.broker import eventloop
from rmqtool.broker.controller import BrokerController
from rmqtool.broker.durable import REQUEST_SINK, install_sink
from rmqtool.layouts.net import Host
from rmqtool.remoting.command import RemotingCommand
from rmqtool.remoting.transport import Connection, RemotingServer, connect
from rmqtool.store.config import StoreConfig
from rmqtool.store.jsonconfig import durable_waits, read_file
from rmqtool.store.local import LocalBroker
from tests.broker.conftest import heartbeat_body, props, pull_ext, send_ext, sub_data


async def _sink_seen_by_handler() -> str:
    install_sink()  # as Serve.start does, before its listeners start

    def handler(cmd, conn):
        return cmd.response(0, {"sink": str(durable_waits.get() is REQUEST_SINK)})

    server = RemotingServer(handler)
    await server.start()
    conn = await connect(f"127.0.0.1:{server.port}")
    try:
        return (await conn.request(RemotingCommand.request(310, {}))).ext_fields["sink"]
    finally:
        await conn.close()
        await server.close()


@pytest.mark.parametrize("loop", ["asyncio", "uvloop"])
def test_connections_of_a_listener_started_after_install_sink_see_the_sink(monkeypatch, loop):
    if loop == "uvloop":
        pytest.importorskip("uvloop")
        monkeypatch.delenv("RMQTOOL_LOOP", raising=False)
    else:
        monkeypatch.setenv("RMQTOOL_LOOP", "asyncio")
    assert eventloop.loop_factory()[0] == loop
    assert eventloop.run(_sink_seen_by_handler()) == "True"


def test_the_sink_keeps_only_the_writes_of_the_request_being_dispatched():
    from concurrent.futures import Future

    from rmqtool.broker.durable import call_collecting

    token = durable_waits.set(REQUEST_SINK)
    try:
        REQUEST_SINK.append(Future())  # a periodic job's write: nobody waits for it
        assert not REQUEST_SINK
        mine = Future()
        r, waits = call_collecting(lambda: durable_waits.get().append(mine) or "answer")
        assert (r, list(waits), list(REQUEST_SINK)) == ("answer", [mine], [])
        r, waits = call_collecting(lambda: "plain")
        assert (r, list(waits)) == ("plain", [])
        with pytest.raises(ZeroDivisionError):
            call_collecting(lambda: durable_waits.get().append(Future()) or 1 / 0)
        assert not REQUEST_SINK and not REQUEST_SINK.open
    finally:
        durable_waits.reset(token)


def _topics(serve) -> dict:
    return read_file(serve.store / "config" / "topics.json")["topicConfigTable"]


def _groups(serve) -> dict:
    return read_file(serve.store / "config" / "subscriptionGroup.json")["subscriptionGroupTable"]


def test_a_send_that_creates_its_topic_answers_after_topics_json_has_it(serve, broker):
    for i in range(3):
        topic = f"SinkAutoTopic{i}"
        r = broker.request(310, send_ext(topic, 0, props(TAGS="t")), b"x")
        assert r.code == 0, r.remark
        assert topic in _topics(serve)  # read at once: the answer came after the write


def test_a_pull_that_creates_its_group_answers_after_subscription_group_json_has_it(serve, broker):
    assert broker.request(310, send_ext("SinkPullTopic", 0, props(TAGS="t")), b"x").code == 0
    for i in range(3):
        group = f"SinkAutoGroup{i}"
        r = broker.request(11, pull_ext("SinkPullTopic", group))
        assert r.code == 0, r.remark
        assert group in _groups(serve)


class _Transport:
    def __init__(self) -> None:
        self.out: list[bytes] = []

    def write(self, data: bytes) -> None:
        self.out.append(data)

    def writelines(self, data) -> None:
        self.out.append(b"".join(data))

    def is_closing(self) -> bool:
        return False

    def get_extra_info(self, name, default=None):
        return ("127.0.0.1", 40001) if name in ("peername", "sockname") else default

    def close(self) -> None:
        pass


def test_a_request_task_cancelled_before_it_ran_leaves_no_coroutine_unawaited(tmp_path):
    """A heartbeat (an `async def` processor) and a pull that would be held (a `Later`) arrive,
    and the connection closes before the loop ran their tasks."""
    async def go() -> None:
        local = LocalBroker.open(tmp_path / "store", StoreConfig(flush_disk_type="ASYNC_FLUSH"))
        ctl = BrokerController(local, Host("127.0.0.1", 10911))
        try:
            local.topics.create_in_send("SinkHeld", 1, 0)
            conn = Connection(ctl.handle)
            conn.connection_made(_Transport())
            hb = RemotingCommand.request(34, None, heartbeat_body("127.0.0.1@sink", "SinkHb", [sub_data("SinkHeld")]))
            pull = RemotingCommand.request(11, pull_ext("SinkHeld", "SinkHeldGroup", suspend_ms=15000))
            conn.data_received(hb.encode() + pull.encode())
            assert len(conn._tasks) == 2  # both wait: each in a task that has not run yet
            conn._shutdown()  # the connection is lost: the tasks are cancelled before their first step
            await asyncio.sleep(0)
            await asyncio.sleep(0)
            assert not conn._tasks
        finally:
            ctl.executor.shutdown(wait=False)
            local.close()

    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        asyncio.run(go())
        gc.collect()
    never = [str(w.message) for w in seen if "never awaited" in str(w.message)]
    assert not never, never
