"""Bad requests answered as Apache's broker 5.3.3 answers them (issue 10): the same code and
remark for UPDATE_CONSUMER_OFFSET with unknown groups, illegal names, unknown topics and
unparsable numbers, for topics refused at creation and for unknown request codes; the same closed
connection for frames the decoder cannot read. Where rmqtool refuses more than Java (a queue the
topic does not have, an offset outside the queue), the test says so per broker."""

from __future__ import annotations

import socket
import struct

import pytest

from rmqtool.remoting.command import RemotingCommand, decode_frame

pytestmark = pytest.mark.interop

TOPIC, GROUP = "BQ_Topic", "bq_group"


def _exchange(addr: str, frame: bytes, timeout: float = 10) -> RemotingCommand | None:
    """Send one frame on a new connection; its response, or None when the peer closed instead."""
    host, port = addr.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=timeout) as s:
        s.sendall(frame)
        buf = b""
        try:
            while True:
                if len(buf) >= 4 and len(buf) >= 4 + struct.unpack(">i", buf[:4])[0]:
                    return decode_frame(buf[4 : 4 + struct.unpack(">i", buf[:4])[0]])
                chunk = s.recv(65536)
                if not chunk:
                    return None
                buf += chunk
        except ConnectionResetError:
            return None


def _ask(addr: str, code: int, ext: dict[str, str], body: bytes = b"") -> tuple[int, str | None]:
    resp = _exchange(addr, RemotingCommand.request(code, ext, body).encode())
    assert resp is not None, f"code {code}: connection closed instead of an answer"
    return resp.code, resp.remark


@pytest.fixture
def prepared(any_broker):
    """A 4-queue topic with one message in queue 0, and a group that pulled once (so it exists)."""
    addr = any_broker.broker
    ext = {"topic": TOPIC, "defaultTopic": "TBW102", "readQueueNums": "4", "writeQueueNums": "4", "perm": "6",
           "topicFilterType": "SINGLE_TAG", "topicSysFlag": "0", "order": "false"}
    assert _ask(addr, 17, ext)[0] == 0
    send = {"a": "bq_pg", "b": TOPIC, "c": "TBW102", "d": "4", "e": "0", "f": "0", "g": "1700000000000", "h": "0",
            "i": "", "j": "0", "k": "false", "m": "false"}
    assert _ask(addr, 310, send, b"x")[0] == 0
    pull = {"consumerGroup": GROUP, "topic": TOPIC, "queueId": "0", "queueOffset": "0", "maxMsgNums": "1",
            "sysFlag": "4", "commitOffset": "0", "suspendTimeoutMillis": "0", "subVersion": "0", "subscription": "*",
            "expressionType": "TAG"}
    assert _ask(addr, 11, pull)[0] in (0, 19, 20)  # FOUND, or not yet dispatched: the group exists either way
    return any_broker


def _commit(group: str = GROUP, topic: str = TOPIC, queue: str = "0", offset: str = "1") -> dict[str, str]:
    return {"consumerGroup": group, "topic": topic, "queueId": queue, "commitOffset": offset}


LONG_GROUP = "g" * 5000


@pytest.mark.parametrize("ext, answer", [
    (_commit(), (0, None)),
    (_commit(group="bq_nobody"), (26, "Group bq_nobody not exist!")),
    (_commit(group="bq/.."), (26, "Group bq/.. not exist!")),
    (_commit(group="bq@x"), (26, "Group bq@x not exist!")),
    (_commit(group=LONG_GROUP), (26, f"Group {LONG_GROUP} not exist!")),
    (_commit(topic="BQ_NoSuchTopic"), (17, "Topic BQ_NoSuchTopic not exist!")),
    (_commit(queue="abc"), (29, f"QueueId is null, topic is {TOPIC}")),
    (_commit(queue="2147483648"), (29, f"QueueId is null, topic is {TOPIC}")),
    (_commit(offset="x"), (29, f"Offset is null, topic is {TOPIC}")),
    (_commit(offset="9223372036854775808"), (29, f"Offset is null, topic is {TOPIC}")),
    (_commit(topic="TBW102", offset="0"), (0, None)),  # Java does not refuse system topics here
], ids=["ok", "unknown-group", "slash-dots", "at-sign", "5000-chars", "unknown-topic", "queue-nan",
        "queue-past-int32", "offset-nan", "offset-past-int64", "system-topic"])
def test_update_consumer_offset_answers_as_java(prepared, ext, answer):
    assert _ask(prepared.broker, 15, ext) == answer


@pytest.mark.parametrize("ext, remark", [
    (_commit(queue="99999"), f"QueueId 99999 is illegal, topic {TOPIC} has 4 queues"),
    (_commit(queue="-1"), f"QueueId -1 is illegal, topic {TOPIC} has 4 queues"),
    (_commit(offset="-5"), f"Offset -5 is illegal, queue 0 of topic {TOPIC} ends at "),
    (_commit(offset=str(2**63 - 1)), f"Offset {2**63 - 1} is illegal, queue 0 of topic {TOPIC} ends at "),
])
def test_offsets_java_would_store_are_refused_by_rmqtool_only(prepared, ext, remark):
    """Java stores these (it checks neither range); rmqtool answers INVALID_PARAMETER instead of
    persisting an offset no consumer can have, which `verify` would then report."""
    code, got = _ask(prepared.broker, 15, ext)
    if prepared.kind == "apache":
        assert (code, got) == (0, None)
    else:  # the queue's max offset ends the remark: one message more per test of this module
        assert code == 29 and (got == remark or got.startswith(remark) and got[len(remark):].isdigit()), got


@pytest.mark.parametrize("topic, remark", [
    ("TBW102", "The topic[TBW102] is conflict with system topic."),
    ("SCHEDULE_TOPIC_XXXX", "The topic[SCHEDULE_TOPIC_XXXX] is conflict with system topic."),
    ("rmq_sys_anything", "The topic[rmq_sys_anything] is conflict with system topic."),
    ("bad topic", "The specified topic contains illegal characters, allowing only ^[%|a-zA-Z0-9_-]+$"),
    ("T" * 200, "The specified topic is longer than topic max length."),
])
def test_topics_refused_at_creation_as_java_refuses_them(any_broker, topic, remark):
    ext = {"topic": topic, "defaultTopic": "TBW102", "readQueueNums": "4", "writeQueueNums": "4", "perm": "6",
           "topicFilterType": "SINGLE_TAG", "topicSysFlag": "0", "order": "false"}
    assert _ask(any_broker.broker, 17, ext) == (29, remark)


def test_unknown_request_code_is_request_code_not_supported(any_broker):
    assert _ask(any_broker.broker, 9999, {}) == (3, " request type 9999 not supported")


def _raw(header: bytes) -> bytes:
    return struct.pack(">ii", 4 + len(header), len(header)) + header


@pytest.mark.parametrize("frame", [
    _raw(b'{"code":Infinity,"flag":0,"language":"JAVA","opaque":1,"version":409}'),
    _raw(b'{"code":30,"flag":0,"language":"JAVA","opaque":1e999,"version":409}'),
    _raw(b'{"code":30,"flag":0,"language":"JAVA","opaque":1,' + b'"x":' + b'[' * 5000 + b']' * 5000 + b'}'),
    _raw(b'{"code":30,"flag":0,"language":"JAVA","opaque":1,"version":409'),
    struct.pack(">ii", 8, 0x7FFFFFFF) + b"abcd",  # header length past the frame
    struct.pack(">i", 16 * 1024 * 1024 + 1) + b"x" * 64,  # past frameMaxLength
    struct.pack(">i", -7) + b"x" * 64,
], ids=["code-infinity", "opaque-1e999", "deep-nesting", "truncated-json", "header-past-frame",
        "frame-too-long", "negative-length"])
def test_undecodable_frames_close_the_connection(any_broker, frame):
    assert _exchange(any_broker.broker, frame) is None
    assert _ask(any_broker.broker, 30, {"topic": TOPIC, "queueId": "0"})[0] == 0  # and only that one


@pytest.mark.parametrize("topic, answer", [
    ("bad topic", (29, "The specified topic contains illegal characters, allowing only ^[%|a-zA-Z0-9_-]+$")),
    ("T" * 200, (29, "The specified topic is longer than topic max length.")),
    ("SCHEDULE_TOPIC_XXXX", (16, "Sending message to topic[SCHEDULE_TOPIC_XXXX] is forbidden.")),
    ("RMQ_SYS_TRANS_HALF_TOPIC", (16, "Sending message to topic[RMQ_SYS_TRANS_HALF_TOPIC] is forbidden.")),
])
def test_sends_to_invalid_or_forbidden_topics_answer_as_java(any_broker, topic, answer):
    send = {"a": "bq_pg", "b": topic, "c": "TBW102", "d": "4", "e": "0", "f": "0", "g": "1700000000000", "h": "0",
            "i": "", "j": "0", "k": "false", "m": "false"}
    assert _ask(any_broker.broker, 310, send, b"x") == answer


def test_a_body_over_max_message_size_is_message_illegal(prepared):
    send = {"a": "bq_pg", "b": TOPIC, "c": "TBW102", "d": "4", "e": "0", "f": "0", "g": "1700000000000", "h": "0",
            "i": "", "j": "0", "k": "false", "m": "false"}
    assert _ask(prepared.broker, 310, send, b"x" * (4 * 1024 * 1024 + 1)) == (13, (
        "the message is illegal, maybe msg body or properties length not matched. msg body length limit "
        "4194304B, msg properties length limit 32KB."))  # maxMessageSize is 4 MiB on both


@pytest.mark.parametrize("code, ext", [
    (310, {"a": "bq_pg", "b": TOPIC, "c": "TBW102", "d": "4", "f": "0", "g": "1700000000000", "h": "0"}),  # no e
    (310, {"a": "bq_pg", "b": TOPIC, "c": "TBW102", "d": "4", "e": "x", "f": "0", "g": "1700000000000", "h": "0"}),
    (11, {"consumerGroup": GROUP, "topic": TOPIC, "queueOffset": "0", "maxMsgNums": "1", "sysFlag": "4",
          "commitOffset": "0", "suspendTimeoutMillis": "0", "subVersion": "0", "subscription": "*"}),  # no queueId
], ids=["send-no-queue", "send-queue-nan", "pull-no-queue"])
def test_a_header_missing_a_required_field_is_system_error(prepared, code, ext):
    """Java answers SYSTEM_ERROR with the exception it ran into (`NullPointerException: Cannot invoke
    "java.lang.Integer.intValue()" ...`, `NumberFormatException: For input string: "x"`); rmqtool
    answers the same code and names the field instead."""
    got, remark = _ask(prepared.broker, code, ext, b"x")
    assert got == 1, remark
    if prepared.kind == "rmqtool":
        assert remark.startswith("the custom field <queueId> is "), remark
    else:
        assert remark.startswith(("java.lang.NullPointerException", "java.lang.NumberFormatException")), remark
