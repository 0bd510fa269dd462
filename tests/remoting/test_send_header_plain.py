"""The plain V2 send-header reader (`_send_v2_plain`) gives exactly what the generic plan reader
gives, and leaves everything it does not take (odd, missing, out-of-range values) to it."""

from __future__ import annotations

import random

import pytest

from rmqtool.remoting.headers import (
    _V2_KEYS,
    HeaderError,
    SendMessageRequestHeader,
    _decode,
    _plan,
    _send_v2_plain,
    send_header_from_ext,
)

_VALUES = ["0", "1", "4", "-1", "7", "", " 3", "+2", "1_0", "x", "2147483647", "2147483648", "-2147483648",
           "-2147483649", "1700000000000", "9223372036854775807", "9223372036854775808", "true", "false",
           "TRUE", "1.0", "٣", "99999999999999999999999", "12345678901"]


def _generic(ext: dict[str, str]):
    try:
        return _decode(SendMessageRequestHeader, ext, _plan(SendMessageRequestHeader, _V2_KEYS))
    except HeaderError as e:
        return ("error", str(e))


def test_random_v2_headers_read_the_same_as_the_generic_reader():
    rng = random.Random(15)
    base = {"a": "pg", "b": "T", "c": "TBW102", "d": "4", "e": "1", "f": "0", "g": "1700000000000", "h": "0",
            "i": "TAGS\x01t", "j": "0", "k": "false", "m": "false", "n": "broker-a"}
    taken = 0
    for _ in range(20000):
        ext = dict(base)
        for _ in range(rng.randint(0, 3)):
            key = rng.choice("abcdefghijklmn")
            if rng.random() < 0.15:
                ext.pop(key, None)
            else:
                ext[key] = rng.choice(_VALUES)
        fast = _send_v2_plain(ext)
        want = _generic(ext)
        if fast is not None:
            taken += 1
            assert fast == want, ext
        assert send_header_from_ext(310, ext) == want if not isinstance(want, tuple) else True
    assert taken > 5000  # the usual header does take the plain path


@pytest.mark.parametrize("bad", [{"d": "x"}, {"g": ""}, {"e": "2147483648"}])
def test_what_the_plain_reader_refuses_is_refused_with_the_generic_words(bad):
    ext = {"a": "pg", "b": "T", "c": "TBW102", "d": "4", "e": "1", "f": "0", "g": "1", "h": "0", **bad}
    assert _send_v2_plain(ext) is None
    with pytest.raises(HeaderError):
        send_header_from_ext(310, ext)
