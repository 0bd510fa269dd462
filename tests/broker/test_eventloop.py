"""serve's event loop: uvloop when installed (unless RMQTOOL_LOOP=asyncio), and remoting works on it."""

from __future__ import annotations

import asyncio

import pytest

from rmqtool.broker import eventloop
from rmqtool.remoting.command import RemotingCommand
from rmqtool.remoting.transport import RemotingServer, connect


async def _round_trip() -> tuple[str, str, str]:
    async def handler(cmd, conn):
        return cmd.response(0, {"echo": cmd.ext_fields["x"], "peer": conn.peer.ip})

    server = RemotingServer(handler)
    await server.start()
    conn = await connect(f"127.0.0.1:{server.port}")
    try:
        resp = await conn.request(RemotingCommand.request(310, {"x": "hello"}))
        return type(asyncio.get_running_loop()).__module__, resp.ext_fields["echo"], resp.ext_fields["peer"]
    finally:
        await conn.close()
        await server.close()


def test_asyncio_when_asked(monkeypatch):
    monkeypatch.setenv("RMQTOOL_LOOP", "asyncio")
    assert eventloop.loop_factory()[0] == "asyncio"
    module, echo, peer = eventloop.run(_round_trip())
    assert module.startswith("asyncio") and (echo, peer) == ("hello", "127.0.0.1")


def test_uvloop_by_default_and_remoting_on_it(monkeypatch):
    pytest.importorskip("uvloop")
    monkeypatch.delenv("RMQTOOL_LOOP", raising=False)
    assert eventloop.loop_factory()[0] == "uvloop"
    module, echo, peer = eventloop.run(_round_trip())  # uvloop's transports are no asyncio.Transport
    assert module.startswith("uvloop") and (echo, peer) == ("hello", "127.0.0.1")
