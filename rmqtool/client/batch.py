"""The body of SEND_BATCH_MESSAGE (`MessageDecoder.encodeMessages`, protocol.md §4.1).

Each element is `rmqtool.layouts.commitlog.BatchElement`: magic and body CRC are 0 as the Java
client writes them; the broker fills them in when it stores the messages.
"""

from __future__ import annotations

from collections.abc import Iterable

from rmqtool.errors import InvalidMessage
from rmqtool.layouts.commitlog import BatchElement
from rmqtool.layouts.constants import MAX_PROPERTIES_LENGTH
from rmqtool.layouts.properties import decode_properties, encode_properties


def encode_message(flag: int, body: bytes, properties: dict[str, str]) -> bytes:
    props = encode_properties(properties).encode("utf-8")
    if len(props) > MAX_PROPERTIES_LENGTH:
        raise InvalidMessage(f"properties of {len(props)} bytes exceed {MAX_PROPERTIES_LENGTH}")
    return BatchElement.build({"magicCode": 0, "bodyCRC": 0, "flag": flag, "body": body, "properties": props})


def encode_messages(messages: Iterable[tuple[int, bytes, dict[str, str]]]) -> bytes:
    return b"".join(encode_message(f, b, p) for f, b, p in messages)


def decode_messages(data: bytes) -> list[tuple[int, bytes, dict[str, str]]]:
    """The inverse, for tests and tools: (flag, body, properties) per element."""
    out = []
    pos = 0
    while pos < len(data):
        el = BatchElement.parse(data[pos:])
        out.append((el.flag, bytes(el.body), decode_properties(bytes(el.properties).decode("utf-8"))))
        pos += el.totalSize
    return out
