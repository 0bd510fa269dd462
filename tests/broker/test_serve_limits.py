"""Memory and fan-out bounds of a running `rmqtool serve` (issue 10, item 4), measured from /proc:
500 connections holding long-polled pulls give their memory back when they close; 20
connections that each declare a 16 MiB frame and send most of it hold no more than the budget
for partial frames; 500 consumers joining one group cost coalesced notifications, not 125,250."""

from __future__ import annotations

import asyncio
import struct
import time

import pytest

from rmqtool.broker.notify import REAL_TIME_WINDOW_S
from rmqtool.remoting.budget import DEFAULT_TOTAL_LIMIT
from rmqtool.remoting.command import MAX_FRAME_LENGTH, RemotingCommand, decode_frame
from tests.broker.conftest import ServeProcess, Wire, heartbeat_body, pull_ext, send_ext, sub_data


@pytest.fixture(scope="module")
def limits_serve(tmp_path_factory):
    p = ServeProcess(tmp_path_factory.mktemp("limits") / "store")
    yield p
    code = p.stop()
    assert code == 0, p.stderr[-3000:]
    assert "Traceback" not in p.stderr, p.stderr[-3000:]


def _alive(serve: ServeProcess, topic: str) -> None:
    w = Wire(serve.broker)
    try:
        r = w.request(310, send_ext(topic, 0), b"alive", timeout=10)
        assert r.code == 0, r.remark
    finally:
        w.close()


def _settle(serve: ServeProcess, fds0: int, timeout: float = 15) -> None:
    deadline = time.time() + timeout
    while time.time() < deadline and serve.fds() > fds0 + 2:
        time.sleep(0.2)


def test_500_connections_with_held_pulls_give_their_memory_back(limits_serve):
    serve = limits_serve
    _alive(serve, "LM_Held")
    host, port = serve.broker.rsplit(":", 1)

    async def hold(n: int) -> int:
        conns = []
        for i in range(n):
            r, w = await asyncio.open_connection(host, int(port))
            ext = pull_ext("LM_Held", "lm_held", 0, offset=1, suspend_ms=20_000)
            w.write(RemotingCommand(11, {k: str(v) for k, v in ext.items()}, b"", i + 1).encode())
            conns.append((r, w))
        await asyncio.gather(*(w.drain() for _, w in conns))
        await asyncio.sleep(1.0)
        peak = serve.fds()
        for _, w in conns:
            w.close()
        return peak

    fds0 = serve.fds()
    asyncio.run(hold(500))  # warm-up: the allocator's pools grow once to what 500 connections need
    _settle(serve, fds0)
    time.sleep(0.5)
    rss0 = serve.rss_kib()
    peaks = [asyncio.run(hold(500)) for _ in range(2)]
    assert all(p >= fds0 + 490 for p in peaks), (fds0, peaks)  # they really were held open
    _settle(serve, fds0)
    time.sleep(0.5)
    rss1 = serve.rss_kib()
    assert serve.fds() <= fds0 + 2
    assert rss1 <= rss0 * 1.10, f"RSS {rss0} KiB before, {rss1} KiB after 1,000 held pulls came and went"
    _alive(serve, "LM_Held")


def test_20_connections_declaring_16_mib_frames_hold_only_the_budget(limits_serve):
    serve = limits_serve
    _alive(serve, "LM_Big")
    host, port = serve.broker.rsplit(":", 1)
    time.sleep(0.3)
    anon0 = serve.rss_anon_kib()
    chunk = b"\0" * (1024 * 1024)

    async def declare(n: int) -> list[int]:
        head = struct.pack(">ii", MAX_FRAME_LENGTH, 4)  # a JSON header of 4 bytes, the rest body
        conns = []
        for _ in range(n):
            r, w = await asyncio.open_connection(host, int(port))
            w.write(head)
            conns.append((r, w))

        async def push(w: asyncio.StreamWriter) -> None:
            try:
                for _ in range(15):  # 15 of its 16 MiB: never complete
                    w.write(chunk)
                    await asyncio.wait_for(w.drain(), 5)
            except (asyncio.TimeoutError, ConnectionError):
                pass  # paused by the server: its bytes wait in the socket buffers

        await asyncio.gather(*(push(w) for _, w in conns))
        samples = [serve.rss_anon_kib()]
        await asyncio.sleep(1.0)
        samples.append(serve.rss_anon_kib())
        for _, w in conns:
            w.close()
        return samples

    samples = asyncio.run(declare(20))
    budget_kib = DEFAULT_TOTAL_LIMIT // 1024
    # the budget, one read chunk (256 KiB) per paused connection, and the allocator's slack
    bound = budget_kib + 20 * 256 + 24 * 1024
    assert max(samples) - anon0 < bound, f"anonymous RSS {anon0} KiB -> {samples} KiB (bound +{bound} KiB)"
    assert max(samples) - anon0 < 320 * 1024 // 2  # far below what 20 x 16 MiB would take
    time.sleep(1.0)
    _alive(serve, "LM_Big")  # the budget came back: a send still goes through
    assert "pausing reads from" in serve.stderr


def test_500_consumers_joining_a_group_get_coalesced_notifications(limits_serve):
    serve = limits_serve
    _alive(serve, "LM_Group")
    host, port = serve.broker.rsplit(":", 1)
    members = 500

    async def join() -> tuple[list[int], float]:
        counts = [0] * members
        readers = []

        async def read(i: int, r: asyncio.StreamReader) -> None:
            try:
                while True:
                    hdr = await r.readexactly(4)
                    (length,) = struct.unpack(">i", hdr)
                    cmd = decode_frame(await r.readexactly(length))
                    if cmd.code == 40 and not cmd.is_response:
                        counts[i] += 1
            except (asyncio.IncompleteReadError, ConnectionError, asyncio.CancelledError):
                pass

        conns = []
        t0 = time.monotonic()
        for i in range(members):
            r, w = await asyncio.open_connection(host, int(port))
            body = heartbeat_body(f"10.0.0.{i % 250}@lm{i}", "lm_group", [sub_data("LM_Group")])
            w.write(RemotingCommand(34, {}, body, i + 1).encode())
            conns.append(w)
            readers.append(asyncio.create_task(read(i, r)))
            if i % 50 == 49:
                await w.drain()
        joined = time.monotonic() - t0
        await asyncio.sleep(2.0)  # the last round comes at most one window after the last join
        for w in conns:
            w.close()
        for t in readers:
            t.cancel()
        await asyncio.gather(*readers, return_exceptions=True)
        return counts, joined

    counts, joined = asyncio.run(join())
    total = sum(counts)
    rounds = joined / REAL_TIME_WINDOW_S + 2  # one round per window, plus the first and the last
    assert total <= members * rounds, f"{total} notifications for {members} joins in {joined:.1f} s"
    assert total < members * (members + 1) // 20  # not the N^2 of one notification per join
    late = counts[-50:]
    assert all(c >= 1 for c in late), late  # and the last members were told too
