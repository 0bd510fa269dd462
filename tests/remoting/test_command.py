"""Frame codec: JSON and binary headers, ali-ons' numeric extFields, size cap, garbage."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from rmqtool.remoting.command import (
    FrameError,
    FrameReader,
    RemotingCommand,
    decode_frame,
    encode_binary_header,
)
from rmqtool.remoting.transport import RemotingServer, connect

TRACES = Path(__file__).resolve().parents[2] / "fixtures" / "traces"


def test_json_example_of_protocol_md():
    cmd = RemotingCommand(105, {"topic": "TopicTest"}, opaque=1, version=409)
    frame = cmd.encode()
    assert frame[:8] == bytes.fromhex("0000008700000083")
    assert frame[8:] == (b'{"code":105,"extFields":{"topic":"TopicTest"},"flag":0,"language":"JAVA",'
                         b'"opaque":1,"serializeTypeCurrentRPC":"JSON","version":409}')
    back = decode_frame(frame[4:])
    assert (back.code, back.ext_fields, back.opaque, back.version) == (105, {"topic": "TopicTest"}, 1, 409)


def test_binary_example_of_protocol_md():
    cmd = RemotingCommand(105, {"topic": "TopicTest"}, opaque=1, version=409)
    frame = encode_binary_header(cmd)
    assert frame[:8] == bytes.fromhex("0000002d01000029")
    assert frame[8:].hex() == "006900019900000001000000000000000000000014000574" \
        "6f7069630000000954 6f70696354657374".replace(" ", "")
    back = decode_frame(frame[4:])
    assert (back.code, back.language, back.ext_fields) == (105, "JAVA", {"topic": "TopicTest"})


def test_numeric_and_boolean_ext_fields_become_strings():
    header = json.dumps({"code": 310, "extFields": {"e": 0, "j": False, "h": 1700000000000},
                         "flag": 0, "language": "JAVA", "opaque": 7, "version": 121}).encode()
    import struct
    cmd = decode_frame(struct.pack(">i", len(header)) + header + b"body")
    assert cmd.ext_fields == {"e": "0", "j": "false", "h": "1700000000000"}
    assert cmd.body == b"body"


@pytest.mark.parametrize("value, text", [
    (123456789012345678901234567890, "123456789012345678901234567890"),  # past 64 bits: no float rounding
    (-(2**63), str(-(2**63))),
    (2**64, str(2**64)),
    (1.5, "1.5"),
])
def test_ext_field_numbers_are_exact_whatever_their_size(value, text):
    """orjson reads integers past 64 bits as floats: such headers must take the exact path."""
    import struct

    header = json.dumps({"code": 11, "extFields": {"queueOffset": value, "topic": "T"}, "flag": 0,
                         "language": "JAVA", "opaque": 9, "version": 409}).encode()
    cmd = decode_frame(struct.pack(">i", len(header)) + header)
    assert cmd.ext_fields == {"queueOffset": text, "topic": "T"}
    assert (cmd.code, cmd.opaque) == (11, 9)


def test_control_chars_in_properties_survive():
    props = "TAGS\x01a\x02KEYS\x01k\x02"
    cmd = RemotingCommand(310, {"i": props}, opaque=3)
    raw = cmd.encode()
    assert b"\\u0001" in raw
    assert decode_frame(raw[4:]).ext_fields["i"] == props


@pytest.mark.parametrize("garbage", [b"\x00\x00\x00\x02ab", b"\x7f\xff\xff\xff", b"\x00\x00\x00\x08\x00\x00\x00\xffxxxx",
                                     b"\x00\x00\x00\x06\x05\x00\x00\x00xy"])
def test_garbage_raises_frame_error(garbage):
    with pytest.raises(FrameError):
        FrameReader().feed(garbage)


def test_frames_split_across_reads():
    frames = b"".join(RemotingCommand(34, {"a": str(i)}, opaque=i).encode() for i in range(5))
    r = FrameReader()
    out = []
    for i in range(0, len(frames), 7):
        out += r.feed(frames[i : i + 7])
    assert [c.opaque for c in out] == list(range(5))


def test_recorded_client_headers_decode():
    count = 0
    for f in TRACES.glob("*.jsonl"):
        for line in f.read_text().splitlines():
            rec = json.loads(line)
            header = {"code": rec["code"], "flag": rec["flag"], "language": rec["lang"], "opaque": 1,
                      "version": rec["ver"], "extFields": rec["ext"]}
            raw = json.dumps(header).encode()
            import struct
            cmd = decode_frame(struct.pack(">i", len(raw)) + raw)
            assert cmd.code == rec["code"]
            assert all(isinstance(v, str) for v in cmd.ext_fields.values())
            count += 1
    assert count > 50


def test_out_of_order_responses_and_oneway():
    async def main():
        async def handler(cmd, conn):
            if cmd.code == 11:
                await asyncio.sleep(0.3)  # a held pull
            if cmd.is_oneway:
                conn.attrs["oneway"] = cmd.ext_fields
            return cmd.response(0, {"echo": cmd.ext_fields.get("x", "")})

        server = RemotingServer(handler)
        await server.start()
        conn = await connect(f"127.0.0.1:{server.port}")
        slow = asyncio.create_task(conn.request(RemotingCommand.request(11, {"x": "pull"}), timeout=5))
        fast = await conn.request(RemotingCommand.request(310, {"x": "send"}))
        assert fast.ext_fields["echo"] == "send" and not slow.done()
        assert (await slow).ext_fields["echo"] == "pull"
        await conn.oneway(RemotingCommand.request(15, {"x": "commit"}))
        # garbage closes only that connection
        r, w = await asyncio.open_connection("127.0.0.1", server.port)
        w.write(b"\x7f\xff\xff\xffjunk")
        await w.drain()
        assert await asyncio.wait_for(r.read(), 2) == b""
        again = await conn.request(RemotingCommand.request(34, {"x": "still up"}))
        assert again.ext_fields["echo"] == "still up"
        await conn.close()
        await server.close()

    asyncio.run(main())
