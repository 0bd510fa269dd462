"""`send_header_from_ext` reads the headers Java clients send (SEND_MESSAGE_V2's letters, the
V1 names of code 10) with the written-out plain readers, never the per-field plan, and gives
what the plan gives."""

from __future__ import annotations

import pytest

from rmqtool.remoting import headers as H

V1 = {"producerGroup": "pg", "topic": "T", "defaultTopic": "TBW102", "defaultTopicQueueNums": "4", "queueId": "1",
      "sysFlag": "0", "bornTimestamp": "1700000000000", "flag": "0", "properties": "UNIQ_KEY\x01U\x02WAIT\x01true",
      "reconsumeTimes": "0", "unitMode": "false", "batch": "false", "brokerName": "broker-a"}
V2 = {letter: V1[name] for letter, name in H.V2_LETTERS.items() if name in V1} | {"bname": "broker-a"}


@pytest.mark.parametrize(("code", "ext", "keys"), [(310, V2, H._V2_KEYS), (320, V2, H._V2_KEYS), (10, V1, None)])
def test_java_send_headers_take_the_plain_reader(monkeypatch, code, ext, keys):
    expected = H._decode(H.SendMessageRequestHeader, ext, H._plan(H.SendMessageRequestHeader, keys))

    def no_plan(*a: object) -> None:
        raise AssertionError("the per-field plan read a plain Java header")

    monkeypatch.setattr(H, "_decode", no_plan)
    assert H.send_header_from_ext(code, ext) == expected
