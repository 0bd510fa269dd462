"""The receipt handle in its own module (rmqtool.proxy.handle), against Java's format: what
`ConsumerProcessor.createHandle` and `ReceiptHandle.encode` write, what `ReceiptHandle.decode`
reads (its `String.split(" ")`, `Long.parseLong` / `Integer.parseInt`, the size check), expiry
at retrieveTime + invisibleTime, and the real topic by topic type. The vectors follow Apache's
ReceiptHandleTest, ExtraInfoUtil.buildExtraInfo and BaseProcessorTest.create."""

from __future__ import annotations

import time

import pytest

pytest.importorskip("rocketmq.grpc_protocol")

from rmqtool.layouts.pop import build_extra_info  # noqa: E402
from rmqtool.proxy.handle import ReceiptHandle, create_handle  # noqa: E402
from rmqtool.proxy.status import Code, ProxyError  # noqa: E402

SIZE_ERROR = ("Parse failed, dataList size {}. IllegalArgumentException. "
              "org.apache.rocketmq.common.consumer.ReceiptHandle.decode(ReceiptHandle.java:56)")


def fields(h: ReceiptHandle) -> tuple:
    return (h.start_offset, h.retrieve_time, h.invisible_time, h.revive_queue_id, h.topic_type, h.broker_name,
            h.queue_id, h.offset, h.commit_log_offset)


def test_encode_and_decode_as_java_receipt_handle_test():
    # ReceiptHandleTest.testEncodeAndDecode's fields; encode() is their KEY_SEPARATOR join in this order
    text = "1000 1700000000123 1000 1 NORMAL BrokerA 2 2000 3000"
    h = ReceiptHandle.decode(text)
    assert fields(h) == (1000, 1700000000123, 1000, 1, "NORMAL", "BrokerA", 2, 2000, 3000)
    assert h.encode() == text and h.text == text
    assert fields(ReceiptHandle.decode(h.encode())) == fields(h)


def test_create_handle_is_the_brokers_extra_info_and_the_commitlog_offset():
    # BaseProcessorTest.create: decode(POP_CK + KEY_SEPARATOR + commitLogOffset)
    extra = build_extra_info(10, 1700000000000, 30000, 2, "%RETRY%G_T", "broker-a", 3, 11)
    assert extra == "10 1700000000000 30000 2 1 broker-a 3 11"
    handle = create_handle(extra, 4096)
    assert handle == "10 1700000000000 30000 2 1 broker-a 3 11 4096"
    h = ReceiptHandle.decode(handle)
    assert fields(h) == (10, 1700000000000, 30000, 2, "1", "broker-a", 3, 11, 4096)
    assert h.encode() == handle


def test_eight_fields_have_no_commitlog_offset():
    h = ReceiptHandle.decode("10 1 2 3 0 b 4 5")
    assert h.commit_log_offset == -1 and h.encode() == "10 1 2 3 0 b 4 5 -1"
    # String.split drops trailing empty strings: a handle ending in a blank is eight fields too
    assert ReceiptHandle.decode("10 1 2 3 0 b 4 5 ").commit_log_offset == -1
    assert ReceiptHandle.decode("10 1 2 3 0 b 4 5 7  ").commit_log_offset == 7


@pytest.mark.parametrize("text, size", [("invalid_data", 1), ("", 1), ("1 2 3", 3), (" ", 0), ("1 2 3 4 5 6 7   ", 7)])
def test_fewer_than_eight_fields_is_javas_illegal_argument(text, size):
    with pytest.raises(ProxyError) as e:
        ReceiptHandle.decode(text)
    assert (e.value.code, e.value.message) == (Code.INTERNAL_SERVER_ERROR, SIZE_ERROR.format(size))


@pytest.mark.parametrize("text", [
    "a 1 2 3 0 b 4 5",  # not a number
    "1_0 1 2 3 0 b 4 5",  # Python's int() takes underscores, parseLong does not
    "1\t 1 2 3 0 b 4 5",  # nor blanks around the digits
    "1 1 2 2147483648 0 b 4 5",  # reviveQueueId is an int
    "1 1 2 3 0 b -2147483649 5",  # so is queueId
    "9223372036854775808 1 2 3 0 b 4 5",  # a long overflows
    "1 1 2 3 0 b 4 5 x",
])
def test_a_field_java_does_not_parse_is_a_number_format_exception(text):
    with pytest.raises(ProxyError) as e:
        ReceiptHandle.decode(text)
    assert e.value.code == Code.INTERNAL_SERVER_ERROR
    assert e.value.message.startswith('NumberFormatException: For input string: "'), e.value.message


def test_signs_and_bounds_parse_as_java():
    h = ReceiptHandle.decode("-1 +2 9223372036854775807 2147483647 0 b -2147483648 -9223372036854775808")
    assert fields(h)[:4] == (-1, 2, 9223372036854775807, 2147483647)
    assert (h.queue_id, h.offset) == (-2147483648, -9223372036854775808)


def test_expired_at_retrieve_time_plus_invisible_time():
    now = int(time.time() * 1000)
    assert ReceiptHandle.decode(f"0 {now - 1000} 1000 0 0 b 0 0").expired  # nextVisibleTime <= now
    assert not ReceiptHandle.decode(f"0 {now} 60000 0 0 b 0 0").expired


def test_real_topic_by_topic_type():
    assert ReceiptHandle.decode("0 0 0 0 0 b 0 0").real_topic("T", "G") == "T"
    assert ReceiptHandle.decode("0 0 0 0 1 b 0 0").real_topic("T", "G") == "%RETRY%G_T"
    assert ReceiptHandle.decode("0 0 0 0 2 b 0 0").real_topic("T", "G") == "%RETRY%G+T"
    with pytest.raises(ProxyError):
        ReceiptHandle.decode("0 0 0 0 NORMAL b 0 0").real_topic("T", "G")
