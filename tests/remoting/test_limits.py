"""Decoder limits (frame, header, nesting, int32/int64 ranges) and the budget for partial frames."""

from __future__ import annotations

import asyncio
import json
import struct

import pytest

from rmqtool.remoting.budget import SMALL_FRAME, FrameBudget
from rmqtool.remoting.command import (
    INT32_MAX,
    MAX_FRAME_LENGTH,
    MAX_HEADER_DEPTH,
    FrameError,
    FrameReader,
    RemotingCommand,
    decode_frame,
)
from rmqtool.remoting.headers import HeaderError, PullMessageRequestHeader, send_header_from_ext
from rmqtool.remoting.transport import RemotingServer, connect


def _json_frame(header: bytes, body: bytes = b"") -> bytes:
    """A frame without its length field, as decode_frame takes it."""
    return struct.pack(">i", len(header)) + header + body


@pytest.mark.parametrize("header, why", [
    (b'{"code":Infinity}', "int32"),
    (b'{"code":-Infinity}', "int32"),
    (b'{"code":NaN}', "int32"),
    (b'{"code":1e999}', "int32"),
    (b'{"code":1.5}', "int32"),
    (b'{"code":true}', "int32"),
    (b'{"code":[10]}', "int32"),
    (b'{"code":10,"opaque":1e999}', "int32"),
    (b'{"code":10,"opaque":2147483648}', "outside int32"),
    (b'{"code":10,"opaque":-2147483649}', "outside int32"),
    (b'{"code":10,"opaque":99999999999999999999999999}', "outside int32"),
    (b'{"code":10,"flag":4294967296}', "outside int32"),
    (b'{"code":10,"version":"x"}', "int32"),
    (b'{"code":10,"language":{"a":1}}', "language"),
    (b'{"code":10,"extFields":[1]}', "extFields"),
    (b'[' * 100_000 + b']' * 100_000, "nests deeper"),
    (b'{"extFields":' + b'{"a":' * 5000 + b'1' + b'}' * 5001, "nests deeper"),
    (b'{"code":10,"x":' + b'[' * (MAX_HEADER_DEPTH + 1) + b']' * (MAX_HEADER_DEPTH + 1) + b'}', "nests deeper"),
    (b'{"code":10,"extFields":{"a":1' + b'1' * 5000 + b'}}', "not JSON"),  # past Python's 4,300 digits
    (b'{"code":1' + b'0' * 5000 + b'}', "not JSON"),
    (b'{"code":10,"x":' + b'[],' * 1100 + b'1}', "not JSON"),
    (b'{"code":10,"x":[' + b'[],' * 1100 + b'1]}', "holds over"),
])
def test_headers_outside_the_limits_are_frame_errors(header, why):
    with pytest.raises(FrameError, match=why):
        decode_frame(_json_frame(header))


def test_header_numbers_at_the_int32_edges_and_fastjson_coercions_decode():
    cmd = decode_frame(_json_frame(b'{"code":"310","opaque":2147483647,"flag":-2147483648,"version":409.0}'))
    assert (cmd.code, cmd.opaque, cmd.flag, cmd.version) == (310, INT32_MAX, -(2**31), 409)
    nested = b'{"code":10,"x":' + b'[' * (MAX_HEADER_DEPTH - 1) + b']' * (MAX_HEADER_DEPTH - 1) + b'}'
    assert decode_frame(_json_frame(nested)).code == 10


@pytest.mark.parametrize("value, text", [(1e999, "inf"), (float("nan"), "nan"), ({"a": [1]}, '{"a":[1]}'),
                                         (-0.0, "0"), (True, "true")])
def test_odd_ext_field_values_become_strings(value, text):
    header = json.dumps({"code": 11, "extFields": {"v": value}}).encode()
    assert decode_frame(_json_frame(header)).ext_fields == {"v": text}


def test_binary_header_with_negative_or_overlong_key_is_a_frame_error():
    head = struct.pack(">hbhiii", 10, 0, 409, 1, 0, 0)
    for ext in (struct.pack(">h", -3) + b"abc" + struct.pack(">i", 0), struct.pack(">h", 400) + b"ab"):
        h = head + struct.pack(">i", len(ext)) + ext
        with pytest.raises(FrameError):
            decode_frame(struct.pack(">i", (1 << 24) | len(h)) + h)


@pytest.mark.parametrize("length", [-1, 0, 3, MAX_FRAME_LENGTH + 1, 2**31 - 1])
def test_frame_lengths_outside_4_to_16_mib_are_refused_before_any_buffering(length):
    r = FrameReader()
    with pytest.raises(FrameError, match="frame length"):
        r.feed(struct.pack(">i", length) + b"x" * 10)
    assert r.buffered() == 0


def test_a_declared_16_mib_frame_is_not_allocated_up_front():
    r = FrameReader()
    assert r.feed(struct.pack(">ii", MAX_FRAME_LENGTH, 20) + b"{") == []
    assert r.pending() == MAX_FRAME_LENGTH + 4
    assert r.buffered() == 9
    r.clear()
    assert (r.pending(), r.buffered()) == (0, 0)


def test_int_fields_are_checked_against_their_java_types():
    base = {"a": "pg", "b": "T", "c": "TBW102", "d": "4", "e": "0", "f": "0", "g": "1700000000000", "h": "0",
            "j": "0"}
    assert send_header_from_ext(310, {**base, "h": str(INT32_MAX)}).flag == INT32_MAX
    for field, value in (("h", str(2**31)), ("e", "-2147483649"), ("f", "1e999"), ("h", "Infinity"),
                         ("g", str(2**63)), ("e", "4.5"), ("h", "9" * 5000)):
        with pytest.raises(HeaderError):
            send_header_from_ext(310, {**base, field: value})
    ext = {"consumerGroup": "g", "topic": "T", "queueId": "0", "queueOffset": str(2**63 - 1), "maxMsgNums": "32",
           "sysFlag": "0", "commitOffset": "0", "suspendTimeoutMillis": "0", "subVersion": "0"}
    assert PullMessageRequestHeader.from_ext(ext).queueOffset == 2**63 - 1
    with pytest.raises(HeaderError, match="long"):
        PullMessageRequestHeader.from_ext({**ext, "queueOffset": str(2**63)})
    with pytest.raises(HeaderError, match="int"):
        PullMessageRequestHeader.from_ext({**ext, "maxMsgNums": str(2**31)})


class _Conn:
    def __init__(self) -> None:
        self.reserved = 0
        self.paused = False

    def pause_reading(self) -> None:
        self.paused = True

    def resume_reading(self) -> None:
        self.paused = False


def test_budget_pauses_large_frames_past_the_limit_and_admits_them_in_order():
    b = FrameBudget(limit=40 * 1024 * 1024)
    conns = [_Conn() for _ in range(4)]
    for c in conns:
        b.hold(c, MAX_FRAME_LENGTH + 4)
    assert [c.paused for c in conns] == [False, False, True, True]
    assert b.used == 2 * (MAX_FRAME_LENGTH + 4)
    small = _Conn()
    b.hold(small, SMALL_FRAME)  # small frames never wait behind large ones
    assert not small.paused
    b.hold(small, 0)
    b.hold(conns[0], 0)  # its frame completed
    assert [c.paused for c in conns] == [False, False, False, True]
    b.drop(conns[1])  # closed
    b.drop(conns[2])
    assert not conns[3].paused and b.used == MAX_FRAME_LENGTH + 4
    b.drop(conns[3])
    assert b.used == 0 and not b.waiting


def test_budget_admits_one_frame_larger_than_itself_when_nothing_else_is_held():
    b = FrameBudget(limit=1024 * 1024)
    c = _Conn()
    b.hold(c, MAX_FRAME_LENGTH)
    assert not c.paused


def test_server_pauses_a_connection_over_the_budget_and_serves_it_later():
    async def main():
        async def handler(cmd, conn):
            return cmd.response(0, {"n": str(len(cmd.body))})

        server = RemotingServer(handler, budget=FrameBudget(limit=3 * 1024 * 1024))
        await server.start()
        big = 2 * 1024 * 1024
        holders = []
        for _ in range(2):  # each declares a 2 MiB frame and sends only its first half
            r, w = await asyncio.open_connection("127.0.0.1", server.port)
            frame = RemotingCommand(310, {}, b"x" * big, opaque=5).encode()
            w.write(frame[: big // 2])
            await w.drain()
            holders.append((r, w, frame))
        for _ in range(50):
            if server.budget.waiting:
                break
            await asyncio.sleep(0.02)
        assert len(server.budget.waiting) == 1  # the second one waits; its bytes stay in the kernel
        conn = await connect(f"127.0.0.1:{server.port}")  # small requests still go through
        assert (await conn.request(RemotingCommand.request(34, {}, b"hb"))).ext_fields["n"] == "2"
        for _r, w, frame in holders:
            w.write(frame[big // 2 :])
            await w.drain()
        for r, w, _ in holders:
            hdr = await asyncio.wait_for(r.readexactly(8), 5)
            length, hlen = struct.unpack(">ii", hdr)
            resp = decode_frame(hdr[4:] + await r.readexactly(length - 4))
            assert resp.ext_fields["n"] == str(big)
            w.close()
        await conn.close()
        for _ in range(50):
            if server.budget.used == 0:
                break
            await asyncio.sleep(0.02)
        assert server.budget.used == 0 and not server.budget.waiting
        await server.close()

    asyncio.run(main())


def test_a_partial_frame_that_stalls_is_closed_and_its_budget_given_back(caplog):
    async def main():
        async def handler(cmd, conn):
            return cmd.response()

        server = RemotingServer(handler, budget=FrameBudget(limit=1024 * 1024), stalled_frame_s=0.3)
        await server.start()
        r, w = await asyncio.open_connection("127.0.0.1", server.port)
        w.write(struct.pack(">ii", 512 * 1024, 10) + b"x" * 1000)  # declares 512 KiB, sends 1 KB
        await w.drain()
        slow_r, slow_w = await asyncio.open_connection("127.0.0.1", server.port)
        frame = RemotingCommand(34, {}, b"y" * 200_000, opaque=3).encode()
        for i in range(0, len(frame), 20_000):  # a slow but steady sender is not stalled
            slow_w.write(frame[i : i + 20_000])
            await slow_w.drain()
            await asyncio.sleep(0.1)
        assert await asyncio.wait_for(r.read(), 3) == b""  # the stalled one was closed
        hdr = await asyncio.wait_for(slow_r.readexactly(8), 3)
        assert struct.unpack(">i", hdr[:4])[0] > 4
        slow_w.close()
        w.close()
        await asyncio.sleep(0.1)
        assert server.budget.used == 0
        await server.close()

    with caplog.at_level("WARNING", logger="rmqtool.remoting"):
        asyncio.run(main())
    assert any("got no data for 0.3 s" in r.getMessage() for r in caplog.records)


@pytest.mark.parametrize("body", [b"[" * 50_000 + b"]" * 50_000, b'{"a":' * 50_000 + b"1" + b"}" * 50_000,
                                  b"{" + b"1:{" * 5_000 + b"}" * 5_001])
def test_bodies_nested_past_the_recursion_limit_are_value_errors(body):
    from rmqtool.remoting import fastjson

    with pytest.raises(ValueError, match="nested too deep"):
        fastjson.loads(body)


def test_a_language_java_does_not_know_reads_as_other():
    cmd = decode_frame(_json_frame(b'{"code":10,"language":"JAVA\\n2026-12-01 ERROR forged line"}'))
    assert cmd.language == "OTHER"
    assert decode_frame(_json_frame(b'{"code":10,"language":"NODE_JS"}')).language == "NODE_JS"
    assert decode_frame(_json_frame(b'{"code":10,"language":3}')).language == "PYTHON"
