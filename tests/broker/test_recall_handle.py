"""The recall handle of RECALL_MESSAGE 370 (`RecallMessageHandle.HandleV1`): the text Java's
URL-safe Base64 encoder writes (padding kept), decoded with or without padding, and Java's
DecoderException message for everything else."""

from __future__ import annotations

import pytest

from rmqtool.broker.recall import build_recall_handle, decode_recall_handle, recall_handle_of
from rmqtool.layouts.message import MessageExt

# Base64.getUrlEncoder().encodeToString("v1 TopicA broker-a 1796000000001 7F00000100012222000000000000000A")
JAVA_HANDLE = "djEgVG9waWNBIGJyb2tlci1hIDE3OTYwMDAwMDAwMDEgN0YwMDAwMDEwMDAxMjIyMjAwMDAwMDAwMDAwMDAwMEE="


def test_handle_is_java_url_base64_of_five_fields():
    h = build_recall_handle("TopicA", "broker-a", "1796000000001", "7F00000100012222000000000000000A")
    assert h == JAVA_HANDLE
    assert decode_recall_handle(h) == ("TopicA", "broker-a", "1796000000001", "7F00000100012222000000000000000A")
    assert decode_recall_handle(h.rstrip("=")) == decode_recall_handle(h)


@pytest.mark.parametrize("handle", ["", "not a handle!", "djIgYSBiIGMgZA==", "djEgYSBi", "%%%%"],
                         ids=["empty", "not-base64", "version-2", "three-fields", "percent"])
def test_bad_handles_are_refused_with_javas_words(handle):
    with pytest.raises(ValueError, match="^recall handle is invalid$"):
        decode_recall_handle(handle)


def test_only_messages_parked_on_the_timer_wheel_get_a_handle():
    parked = MessageExt("rmq_sys_wheel_timer", b"x", 0, properties={
        "TIMER_OUT_MS": "1796000000000", "REAL_TOPIC": "TopicA", "UNIQ_KEY": "ID1"})
    assert decode_recall_handle(recall_handle_of(parked, "broker-a")) == ("TopicA", "broker-a", "1796000000001", "ID1")
    assert recall_handle_of(MessageExt("TopicA", b"x", 0, properties={"UNIQ_KEY": "ID2"}), "broker-a") is None
    retry = MessageExt("rmq_sys_wheel_timer", b"x", 0, properties={
        "TIMER_OUT_MS": "1796000000000", "REAL_TOPIC": "%RETRY%g", "UNIQ_KEY": "ID3"})
    assert recall_handle_of(retry, "broker-a") is None
