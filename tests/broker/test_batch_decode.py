"""SEND_BATCH_MESSAGE: `_send_batch` hands the store `decode_batch_body`'s messages, batch properties filled in, errors included."""

from __future__ import annotations

import random

from rmqtool.broker.send import SendProcessor, decode_batch_body, encode_batch_body
from rmqtool.errors import InvalidMessage
from rmqtool.layouts.net import Host
from rmqtool.layouts.properties import decode_properties
from rmqtool.remoting.command import RemotingCommand
from rmqtool.remoting.headers import send_header_from_ext


class _Local:
    send_batch = None


class _Processor(SendProcessor):
    """The messages `_send_batch` would hand to the store, instead of storing them."""

    stats = {"put": 0}
    local = _Local()

    def call_store(self, fn, args, done):
        return args[0]


class _Conn:
    peer = Host("10.1.2.3", 40000)


EXT = {"a": "pg", "b": "T", "c": "TBW102", "d": "4", "e": "0", "f": "0", "g": "5", "h": "0", "i": "WAIT\x01true",
       "j": "0", "k": "false", "m": "true"}


def _outcome(fn, *args):
    try:
        return fn(*args), None
    except InvalidMessage as e:
        return None, str(e)


def test_send_batch_walk_matches_decode_batch_body_on_good_and_broken_bodies():
    proc, header, rnd = _Processor(), send_header_from_ext(320, EXT), random.Random(3)
    texts = ["", "a\x01b", "WAIT\x01false\x02x\x01y", "é\x01ü", "k\x01\x02bad"]
    for _ in range(3000):
        items = [(rnd.randrange(5), bytes(rnd.randrange(4)), rnd.choice(texts)) for _ in range(rnd.randrange(4))]
        data = bytearray(encode_batch_body(items))
        if data and rnd.random() < 0.7:
            if rnd.random() < 0.5:
                data = data[: rnd.randrange(len(data))]
            else:
                data[rnd.randrange(len(data))] = rnd.randrange(256)
        data = bytes(data)
        want, want_err = _outcome(decode_batch_body, data)
        got, got_err = _outcome(proc._send_batch, RemotingCommand(320, EXT, data, 1, 0), header, "T", 0,
                                {"WAIT": "true"}, _Conn())
        assert got_err == want_err
        if want is not None:
            expected = []
            for flag, body, text in want:
                props = decode_properties(text)
                props.setdefault("WAIT", "true")
                expected.append((flag, body, props, list(props)))
            assert [(m.flag, m.body, m.properties, list(m.properties)) for m in got] == expected
            assert all(m.topic == "T" and m.born_host == _Conn.peer for m in got)
