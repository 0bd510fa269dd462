"""Protocol fuzz against a running `rmqtool serve`: random and mutated frames (seeded from the
recorded real-client requests in fixtures/traces), the hostile cases of issue 10 (deep nesting,
`Infinity`/`1e999`/floats/2^40 where int32 goes, numeric and nested extFields, send flags and
offsets outside their Java types, bad UPDATE_CONSUMER_OFFSET fields, absurd lengths), in batches
with a send and a consume between them; then 200 connections holding long-polled pulls. The
server must stay up, log no traceback (one line per bad request), keep its memory flat and
release every fd. 3,000 frames always; 12,000 in the slow run."""

from __future__ import annotations

import asyncio
import json
import random
import re
import struct
import time
from pathlib import Path

import pytest

from rmqtool.remoting.command import RemotingCommand, encode_binary_header
from tests.broker.conftest import ServeProcess, Wire, decode_records, pull_ext, send_ext

TRACES = Path(__file__).resolve().parents[2] / "fixtures" / "traces"
CODES = [10, 11, 12, 14, 15, 17, 21, 28, 29, 30, 31, 32, 33, 34, 35, 36, 37, 38, 41, 42, 46, 103, 104, 105, 106,
         202, 203, 206, 208, 310, 320, 0, 1, -1, 9999]
# what Java's int fields must never see: non-finite, non-integral, past int32 / int64, not numbers
ODD_NUMBERS = [b"Infinity", b"-Infinity", b"NaN", b"1e999", b"-1e999", b"1.5", b"2147483648", b"-2147483649",
               b"1099511627776", b"99999999999999999999999999", b'"x"', b"true", b"null", b"[]", b"{}", b'"1e3"',
               b"1" * 5000, b"-0", b"1e-999", b"0.0000001"]
ODD_TEXT = ["Infinity", "NaN", "1e999", "1.5", "2147483648", "-2147483649", "9223372036854775808", "-1", "",
            " 7 ", "0x10", "9" * 400, "1_000", "\u0000"]
def _seed_frames() -> list[tuple[dict, bytes]]:
    """(header object, body) of every recorded request, as the client sent it."""
    out = []
    for f in sorted(TRACES.glob("*.jsonl")):
        for line in f.read_text().splitlines():
            rec = json.loads(line)
            head = bytes.fromhex(rec.get("body_head", ""))
            body = (head + b"\0" * rec["body_len"])[: rec["body_len"]]
            hdr = {"code": rec["code"], "flag": rec["flag"], "language": rec["lang"], "opaque": 1,
                   "version": rec["ver"], "extFields": rec["ext"]}
            out.append((hdr, body))
    return out


def _bodies() -> list[bytes]:
    hb = {"clientID": "fz@1", "consumerDataSet": [{"groupName": "fz_cg", "consumeType": "CONSUME_PASSIVELY",
          "messageModel": "CLUSTERING", "consumeFromWhere": "CONSUME_FROM_LAST_OFFSET", "subscriptionDataSet": [
              {"topic": "FZ_T", "subString": "a > 1", "expressionType": "SQL92", "subVersion": 1}]}],
          "producerDataSet": [{"groupName": "fz_pg"}]}
    lock = {"consumerGroup": "fz_cg", "clientId": "fz@1", "mqSet": [{"topic": "FZ_T", "brokerName": "broker-a",
                                                                       "queueId": 0}]}
    check = {"clientId": "fz", "group": "fz_cg", "subscriptionData": {"topic": "FZ_T", "subString": "a = 'x'",
                                                                      "expressionType": "SQL92"}}
    return [json.dumps(hb).encode(), json.dumps(lock).encode(), json.dumps(check).encode(), b"{", b"[]", b"null",
            b"\x00" * 40, b'{"mqSet":[1,2,{}],"consumerDataSet":{"a":1}}', b"[" * 50_000 + b"]" * 50_000,
            b'{"clientID":"x","consumerDataSet":[' + b'{"a":' * 5_000 + b"1" + b"}" * 5_000 + b"]}",
            b'{"clientID":1' + b"0" * 5_000 + b"}", b"{" + b"1:" * 1_000 + b"}"]


def _mutate_value(rng: random.Random, v: object) -> object:
    choice = rng.randrange(12)
    if choice == 0:
        return None
    if choice == 1:
        return rng.choice([-1, 0, 2**31, -(2**63), 2**64, 1.5, "NaN", "", " ", "true"])
    if choice == 2:
        return {"x": v}
    if choice == 3:
        return [v]
    if choice == 4:
        return str(v) + rng.choice(["\u0001", "\u0002", "%", " ", "'", "\\", "\x00", "é"])
    if choice == 5:
        return rng.randrange(-5, 70000)
    if choice == 6:
        return "x" * rng.randrange(0, 400)
    if choice == 7:
        return rng.choice(["a > ", "a BETWEEN 1 AND", "((", "TAGS IN ()", "*", "TagA || ", "a = 'x' OR b IS NULL"])
    return v


def _mutate_header(rng: random.Random, hdr: dict) -> dict:
    h = json.loads(json.dumps(hdr))
    ext = h.get("extFields") or {}
    for _ in range(rng.randrange(1, 4)):
        kind = rng.randrange(8)
        if kind == 0:
            h["code"] = rng.choice(CODES)
        elif kind == 1 and ext:
            k = rng.choice(list(ext))
            ext[k] = _mutate_value(rng, ext[k])
        elif kind == 2 and ext:
            ext.pop(rng.choice(list(ext)))
        elif kind == 3:
            h["flag"] = rng.choice([0, 1, 2, 3, -1, 2**40])
        elif kind == 4:
            h[rng.choice(["language", "version", "opaque", "remark"])] = _mutate_value(rng, 1)
        elif kind == 5:
            h["extFields"] = _mutate_value(rng, ext)
        elif kind == 6:
            ext[rng.choice(["sysFlag", "queueId", "queueOffset", "maxMsgNums", "suspendTimeoutMillis", "offset",
                            "commitLogOffset", "tranStateTableOffset", "commitOrRollback", "timestamp", "maxNum",
                            "delayLevel", "readQueueNums", "perm", "e", "f", "g"])] = rng.randrange(-3, 2**31)
        else:
            h["code"] = rng.choice(CODES)
            h["extFields"] = {k: _mutate_value(rng, v) for k, v in ext.items()}
    if isinstance(h.get("extFields"), dict):
        sysflag = h["extFields"].get("sysFlag")
        if h.get("code") == 11 and isinstance(sysflag, int) and sysflag & 2:
            h["extFields"]["suspendTimeoutMillis"] = rng.randrange(0, 300)  # keep held pulls short
    return h


def _raw_frame(header: bytes, body: bytes = b"") -> bytes:
    return struct.pack(">ii", 4 + len(header) + len(body), len(header)) + header + body


def _hostile(rng: random.Random) -> bytes:
    """One of the frames issue 10 found escaping the decoder or the request checks."""
    kind = rng.randrange(8)
    if kind == 0:  # nesting far past any header's
        depth = rng.choice([17, 100, 1_000, 20_000, 200_000])
        opener, closer = rng.choice([(b"[", b"]"), (b'{"a":', b"}")])
        inner = opener * depth + b"1" * (opener == b'{"a":') + closer * depth
        where = rng.choice([b'{"code":30,"opaque":1,"x":%s}', b'{"code":30,"extFields":%s}', b"%s"])
        return _raw_frame(where.replace(b"%s", inner))
    if kind == 1:  # int32 header fields that are no int32
        field = rng.choice([b"code", b"opaque", b"flag", b"version"])
        hdr = b'{"code":30,"flag":0,"language":"JAVA","opaque":7,"version":409,"extFields":{"topic":"FZ_T"}}'
        return _raw_frame(re.sub(rb'"%s":[^,}]+' % field, b'"%s":%s' % (field, rng.choice(ODD_NUMBERS)), hdr))
    if kind == 2:  # extFields values of every JSON type
        vals = [b"1", b"-0.0", b"1e999", b"123456789012345678901234567890", b"true", b"null", b'{"a":[1,{}]}',
                b"9" * 4301,
                b"[1,2]", b'"\\ud800"', b"1.5"]
        ext = b",".join(b'"%s":%s' % (k, rng.choice(vals)) for k in (b"topic", b"queueId", b"a", b"b", b"e", b"h"))
        return _raw_frame(b'{"code":%d,"opaque":3,"flag":0,"extFields":{%s}}' % (rng.choice([30, 310, 15, 11]), ext))
    if kind == 3:  # a send whose flag / sysFlag / queueId / bornTimestamp / reconsumeTimes is out of its type
        ext = send_ext("FZ_T", 0)
        ext[rng.choice(["h", "f", "e", "g", "j", "d", "l"])] = rng.choice(ODD_TEXT)
        return RemotingCommand(310, ext, b"fuzz", rng.randrange(1, 2**31)).encode()
    if kind == 4:  # UPDATE_CONSUMER_OFFSET as issue 10 tried it
        ext = {"consumerGroup": rng.choice(["fz_cg", "fz/..", "a@b", "g" * 5000, "", "fz cg"]),
               "topic": rng.choice(["FZ_T", "TBW102", "SCHEDULE_TOPIC_XXXX", "FZ_None", "a b"]),
               "queueId": rng.choice(["0", "-1", "99999", "2147483648", "x"]),
               "commitOffset": rng.choice(["0", "1", "-5", str(2**63 - 1), str(2**63), "1e999"])}
        return RemotingCommand(15, ext, b"", rng.randrange(1, 2**31), rng.choice([0, 2])).encode()
    if kind == 5:  # pulls and queries with numbers out of range
        ext = {"consumerGroup": "fz_cg", "topic": "FZ_T", "queueId": rng.choice(ODD_TEXT + ["0"]),
               "queueOffset": rng.choice(ODD_TEXT + ["0"]), "maxMsgNums": rng.choice(ODD_TEXT + ["32"]),
               "sysFlag": rng.choice(["0", "4", "2147483647", "-1"]), "commitOffset": "0",
               "suspendTimeoutMillis": rng.choice(["0", "100", "-1", "9223372036854775807"]), "subVersion": "0",
               "subscription": "*", "timestamp": rng.choice(ODD_TEXT), "offset": rng.choice(ODD_TEXT)}
        return RemotingCommand(rng.choice([11, 14, 29, 30, 31, 33, 37]), ext, b"", 5).encode()
    if kind == 6:  # a binary header with a lying remark / extFields length
        cmd = RemotingCommand(rng.choice([30, 105, 310]), {"topic": "FZ_T"}, b"", 9, 0, "r")
        raw = bytearray(encode_binary_header(cmd))
        pos = rng.choice([8 + 13, 8 + 17 + 1])  # remark length, extFields length
        raw[pos : pos + 4] = struct.pack(">i", rng.choice([-1, 2**31 - 1, 5000, 3]))
        return bytes(raw)
    # an absurd declared length: up to 16 MiB announced, a little sent (the caller then hangs up)
    length = rng.choice([16 * 1024 * 1024, 16 * 1024 * 1024 - 1, 10_000_000, 2**24 + 7, 1 << 30])
    return struct.pack(">ii", length, 20) + rng.randbytes(rng.randrange(0, 512))


def _frame(rng: random.Random, seeds: list[tuple[dict, bytes]], bodies: list[bytes]) -> bytes:
    hdr, body = rng.choice(seeds)
    kind = rng.randrange(13)
    if kind >= 10:
        return _hostile(rng)
    if kind == 0:  # pure noise
        return rng.randbytes(rng.randrange(1, 64))
    if kind == 1:  # a length prefix that lies
        payload = rng.randbytes(rng.randrange(0, 32))
        return struct.pack(">i", rng.choice([-1, 0, 3, 2**24 + 1, 2**31 - 1, len(payload) + 100])) + payload
    h = _mutate_header(rng, hdr) if kind != 2 else dict(hdr)
    h["opaque"] = rng.randrange(1, 2**31)
    if rng.random() < 0.3:
        body = rng.choice(bodies)
    if kind == 3:  # binary header of a mutated command
        ext = h.get("extFields")
        ext = {str(k): str(v) for k, v in ext.items()} if isinstance(ext, dict) else {}
        code = h.get("code") if isinstance(h.get("code"), int) and -32768 <= h.get("code") < 32768 else 105
        cmd = RemotingCommand(code, ext, body, h["opaque"], rng.choice([0, 2]))
        raw = bytearray(encode_binary_header(cmd))
        for _ in range(rng.randrange(0, 3)):
            raw[rng.randrange(8, len(raw))] = rng.randrange(256)
        return bytes(raw)
    header = json.dumps(h).encode()
    if kind == 4:  # flipped bytes inside the JSON header
        header = bytearray(header)
        for _ in range(rng.randrange(1, 4)):
            header[rng.randrange(len(header))] = rng.randrange(256)
        header = bytes(header)
    frame = struct.pack(">ii", 4 + len(header) + len(body), len(header)) + header + body
    if kind == 5:  # header length or serialize type mangled
        frame = frame[:4] + struct.pack(">i", rng.choice([len(header) + 9, 0x02000000 | len(header), -5])) + frame[8:]
    return frame


async def _fuzz(addrs: list[str], n: int, seed: int, alive: callable) -> int:
    rng = random.Random(seed)
    seeds, bodies = _seed_frames(), _bodies()
    sent = 0
    reconnects = 0

    async def drain(reader: asyncio.StreamReader) -> None:
        try:
            while await reader.read(65536):
                pass
        except (ConnectionError, OSError):
            pass

    async def worker(idx: int, quota: int) -> None:
        nonlocal sent, reconnects
        w_rng = random.Random(seed * 100 + idx)
        host, port = addrs[idx % len(addrs)].rsplit(":", 1)
        reader, writer = await asyncio.open_connection(host, int(port))
        task = asyncio.create_task(drain(reader))
        for i in range(quota):
            frame = _frame(w_rng, seeds, bodies)
            try:
                writer.write(frame)
                await writer.drain()
            except (ConnectionError, OSError):
                pass
            sent += 1
            hang_up = len(frame) >= 8 and struct.unpack_from(">i", frame)[0] > len(frame)  # a lying length
            if task.done() or writer.is_closing() or hang_up or w_rng.random() < 0.02:
                writer.close()
                task.cancel()
                reconnects += 1
                reader, writer = await asyncio.open_connection(host, int(port))
                task = asyncio.create_task(drain(reader))
            if i % 200 == 199:
                await asyncio.sleep(0)
        writer.close()
        task.cancel()

    workers = 8
    await asyncio.gather(*(worker(i, n // workers) for i in range(workers)))
    del rng
    return reconnects


def _alive(serve: ServeProcess) -> None:
    """A send and a consume of it through the broker, a route look-up through the name server."""
    w = Wire(serve.broker)
    try:
        body = f"health {time.time()}".encode()
        r = w.request(310, send_ext("FZ_Health", 0), body, timeout=10)
        assert r.code == 0, r.remark
        offset = int(r.ext_fields["queueOffset"])
        deadline = time.time() + 10
        while True:
            got = w.request(11, pull_ext("FZ_Health", "fz_health", 0, offset=offset, max_msgs=1), timeout=10)
            if got.code == 0 or time.time() > deadline:
                break
            time.sleep(0.05)  # dispatch runs behind the put
        assert got.code == 0 and decode_records(got.body)[0].body == body
    finally:
        w.close()
    n = Wire(serve.namesrv)
    try:
        assert n.request(105, {"topic": "FZ_Health"}, timeout=10).code == 0
    finally:
        n.close()


LOG_LINE = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} [A-Z]+ [\w.]+: |^rmqtool serve: ")


def _check_log(serve: ServeProcess) -> None:
    err = serve.stderr
    assert "Traceback" not in err, err[-3000:]
    odd = [line for line in err.splitlines() if not LOG_LINE.match(line)]
    assert not odd, odd[:5]  # every bad request is one log line, never a multi-line dump
    bugs = [line for line in err.splitlines() if " failed: " in line]
    assert not bugs, bugs[:5]  # a handler that raised: bad input must be answered, not crash into it


@pytest.fixture(scope="module")
def fuzz_serve(tmp_path_factory):
    p = ServeProcess(tmp_path_factory.mktemp("fuzz") / "store")
    yield p
    code = p.stop()
    assert code == 0, p.stderr
    assert "Traceback" not in p.stderr, p.stderr


def _fuzz_in_batches(serve: ServeProcess, total: int, batch: int, seed: int) -> None:
    addrs = [serve.broker, serve.broker, serve.broker, serve.namesrv]
    w = Wire(serve.broker)
    assert w.request(310, send_ext("FZ_T", 0), b"seed").code == 0
    w.close()
    asyncio.run(_fuzz(addrs, 1_000, seed, None))  # warm-up: caches, topics, thread pool
    _alive(serve)
    time.sleep(0.5)
    rss0, fds0 = serve.rss_anon_kib(), serve.fds(sockets_only=True)
    t0 = time.time()
    for i in range(total // batch):
        asyncio.run(_fuzz(addrs, batch, seed * 1000 + i, None))
        _alive(serve)
    time.sleep(1.0)  # let short held pulls and closes settle
    _alive(serve)
    rss1, fds1 = serve.rss_anon_kib(), serve.fds(sockets_only=True)
    assert serve.proc.poll() is None
    _check_log(serve)
    assert rss1 - rss0 < 8 * 1024, f"anonymous RSS grew from {rss0} KiB to {rss1} KiB"
    assert fds1 <= fds0 + 2, f"sockets grew from {fds0} to {fds1}"
    assert time.time() - t0 < total / 100, f"{total} frames took {time.time() - t0:.0f} s"


def test_3000_hostile_random_and_mutated_frames_leave_the_server_up_and_flat(fuzz_serve):
    _fuzz_in_batches(fuzz_serve, 3_000, 1_000, 2)


@pytest.mark.slow
def test_12000_hostile_random_and_mutated_frames_leave_the_server_up_and_flat(fuzz_serve):
    _fuzz_in_batches(fuzz_serve, 12_000, 2_000, 3)


def test_200_connections_with_held_pulls_release_fds_and_memory(fuzz_serve):
    serve = fuzz_serve
    w = Wire(serve.broker)
    assert w.request(310, send_ext("FZ_Held", 0), b"x").code == 0
    w.close()
    time.sleep(0.3)
    rss0, fds0 = serve.rss_kib(), serve.fds()

    async def hold_many(rounds: int) -> list[int]:
        host, port = serve.broker.rsplit(":", 1)
        peak = []
        for _ in range(rounds):
            conns = []
            for i in range(200):
                r, wr = await asyncio.open_connection(host, int(port))
                ext = {"consumerGroup": "fz_held", "topic": "FZ_Held", "queueId": "0", "queueOffset": "1",
                       "maxMsgNums": "32", "sysFlag": "6", "commitOffset": "0", "suspendTimeoutMillis": "20000",
                       "subVersion": "0", "subscription": "*"}
                wr.write(RemotingCommand(11, ext, b"", i + 1).encode())
                conns.append((r, wr))
            await asyncio.gather(*(wr.drain() for _, wr in conns))
            await asyncio.sleep(0.5)
            peak.append(serve.fds())
            for _, wr in conns:
                wr.close()
            await asyncio.sleep(0.5)
        return peak

    peak = asyncio.run(hold_many(3))
    assert all(p >= fds0 + 190 for p in peak), (fds0, peak)  # they really were held open
    deadline = time.time() + 10
    while time.time() < deadline and serve.fds() > fds0 + 2:
        time.sleep(0.2)
    rss1, fds1 = serve.rss_kib(), serve.fds()
    assert fds1 <= fds0 + 2, f"fds {fds0} -> {fds1}"
    assert rss1 - rss0 < 8 * 1024, f"RSS {rss0} -> {rss1} KiB"
    _alive(serve)
    # nothing is left held in the server after the clients went away
    w = Wire(serve.broker)
    try:
        assert w.request(310, send_ext("FZ_Held", 0), b"y").code == 0
    finally:
        w.close()
