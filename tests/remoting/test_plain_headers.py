"""The written-out header readers (plainheaders.py) give exactly what the generic plan reader
gives, and leave everything they do not take (odd, missing, out-of-range values) to it."""

from __future__ import annotations

import random

import pytest

from rmqtool.remoting import headers as H
from rmqtool.remoting.headers import HeaderError, _decode, _plan, _reader

_VALUES = ["0", "1", "4", "-1", "7", "", " 3", "+2", "1_0", "x", "2147483647", "2147483648", "-2147483648",
           "-2147483649", "1700000000000", "9223372036854775807", "9223372036854775808", "true", "false",
           "TRUE", "1.0", "٣", "99999999999999999999999", "12345678901", "123456789012345678901"]

_SEND_V2 = {"a": "pg", "b": "T", "c": "TBW102", "d": "4", "e": "1", "f": "0", "g": "1700000000000", "h": "0",
            "i": "TAGS\x01t", "j": "0", "k": "false", "m": "false", "n": "broker-a"}
_PULL = {"consumerGroup": "g", "topic": "T", "queueId": "1", "queueOffset": "64", "maxMsgNums": "32",
         "sysFlag": "6", "commitOffset": "0", "suspendTimeoutMillis": "20000", "subscription": "*",
         "subVersion": "0", "expressionType": "TAG"}
_CASES = [
    (H.SendMessageRequestHeader, H._V2_KEYS, _SEND_V2),
    (H.SendMessageRequestHeader, None, {H.V2_LETTERS[k]: v for k, v in _SEND_V2.items()}),
    (H.PullMessageRequestHeader, None, _PULL),
    (H.SendMessageResponseHeader, None, {"msgId": "AB", "queueId": "1", "queueOffset": "9"}),
]


def _generic(cls, keys, ext):
    try:
        return _decode(cls, ext, _plan(cls, keys))
    except HeaderError as e:
        return ("error", str(e))


@pytest.mark.parametrize(("cls", "keys", "base"), _CASES, ids=["send-v2", "send-v1", "pull", "send-response"])
def test_random_headers_read_the_same_as_with_the_generic_reader(cls, keys, base):
    rng = random.Random(15)
    read = _reader(cls, keys)
    taken = 0
    for _ in range(8000):
        ext = dict(base)
        for _ in range(rng.randint(0, 3)):
            key = rng.choice(list(base) + ["l", "maxMsgBytes", "transactionId", "MSG_REGION"])
            if rng.random() < 0.15:
                ext.pop(key, None)
            else:
                ext[key] = rng.choice(_VALUES)
        fast = read(ext)
        if fast is not None:
            taken += 1
            assert fast == _generic(cls, keys, ext), ext
    assert taken > 2000  # the usual header does take the written-out reader


@pytest.mark.parametrize("bad", [{"d": "x"}, {"g": ""}, {"e": "2147483648"}])
def test_what_the_written_out_reader_refuses_is_refused_with_the_generic_words(bad):
    ext = {**_SEND_V2, **bad}
    assert _reader(H.SendMessageRequestHeader, H._V2_KEYS)(ext) is None
    with pytest.raises(HeaderError):
        H.send_header_from_ext(310, ext)


def test_every_header_class_gets_a_reader_that_reads_its_own_to_ext():
    for cls in [c for c in vars(H).values() if isinstance(c, type) and issubclass(c, H.Header) and c is not H.Header]:
        read = _reader(cls)
        assert callable(read)
