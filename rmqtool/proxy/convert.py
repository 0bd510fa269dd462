"""Messages between `apache.rocketmq.v2.Message` and the broker's properties / MessageExt.

gRPC -> broker follows `SendMessageActivity.buildMessageProperty` / `buildSysFlag` (and the
checks it makes on the way, with its codes and messages); broker -> gRPC follows
`GrpcConverter.buildMessage` (check-back and receive).
"""

from __future__ import annotations

import hashlib
import time
from typing import Any

from rmqtool.layouts import properties as P
from rmqtool.layouts.message import MessageExt
from rmqtool.proxy.config import ProxyConfig
from rmqtool.proxy.pb import definition as d
from rmqtool.proxy.status import Code, ProxyError, proxy_exception
from rmqtool.proxy.validate import contains_control_character, is_blank, validate_tag

COMPRESSED_FLAG = 0x1
TRANSACTION_PREPARED_TYPE = 0x1 << 2
TRACE_CONTEXT = "TRACE_CONTEXT"
BORN_HOST = "__BORNHOST"
BORN_TIMESTAMP = "BORN_TIMESTAMP"
POP_CK = "POP_CK"

# MessageConst.STRING_HASH_SET: the property names a user property may not take
SYSTEM_PROPERTY_NAMES = frozenset({
    "TRACE_ON", "MSG_REGION", "KEYS", "TAGS", "WAIT", "DELAY", "RETRY_TOPIC", "REAL_TOPIC", "REAL_QID",
    "TRAN_MSG", "PGROUP", "MIN_OFFSET", "MAX_OFFSET", "BUYER_ID", "ORIGIN_MESSAGE_ID", "TRANSFER_FLAG",
    "CORRECTION_FLAG", "MQ2_FLAG", "RECONSUME_TIME", "UNIQ_KEY", "MAX_RECONSUME_TIMES", "CONSUME_START_TIME",
    "POP_CK", "POP_CK_OFFSET", "1ST_POP_TIME", "TRAN_PREPARED_QUEUE_OFFSET", "DUP_INFO", "EXTEND_UNIQ_INFO",
    "INSTANCE_ID", "CORRELATION_ID", "REPLY_TO_CLIENT", "TTL", "ARRIVE_TIME", "PUSH_REPLY_TIME", "CLUSTER",
    "MSG_TYPE", "INNER_MULTI_QUEUE_OFFSET", "TIMER_DELAY_MS", "TIMER_DELAY_SEC", "TIMER_DELIVER_MS",
    "TIMER_ENQUEUE_MS", "TIMER_DEQUEUE_MS", "TIMER_ROLL_TIMES", "TIMER_OUT_MS", "TIMER_DEL_UNIQKEY",
    "TIMER_DELAY_LEVEL", "__BORNHOST", "BORN_TIMESTAMP", "DLQ_ORIGIN_TOPIC", "DLQ_ORIGIN_MESSAGE_ID", "__CRC32#",
})

_TS_MIN, _TS_MAX = -62135596800, 253402300799


def timestamp_valid(ts: Any) -> bool:
    """`Timestamps.isValid`."""
    return _TS_MIN <= ts.seconds <= _TS_MAX and 0 <= ts.nanos <= 999_999_999


def timestamp_ms(ts: Any) -> int:
    return ts.seconds * 1000 + ts.nanos // 1_000_000


def duration_ms(du: Any) -> int:
    return du.seconds * 1000 + du.nanos // 1_000_000


def timestamp_of(ms: int) -> Any:
    from google.protobuf.timestamp_pb2 import Timestamp

    return Timestamp(seconds=ms // 1000, nanos=(ms % 1000) * 1_000_000)


def build_sys_flag(msg: Any) -> int:
    """`buildSysFlag`: GZIP bodies are marked compressed, transactional ones prepared."""
    flag = 0
    sp = msg.system_properties
    if sp.body_encoding == d.GZIP:
        flag |= COMPRESSED_FLAG
    if sp.message_type == d.TRANSACTION:
        flag |= TRANSACTION_PREPARED_TYPE
    return flag


def validate_body(body: bytes, cfg: ProxyConfig) -> None:
    if cfg.enable_message_body_empty_check and not body:
        raise ProxyError(Code.MESSAGE_BODY_EMPTY, "message body cannot be empty")
    if cfg.max_message_size > 0 and len(body) > cfg.max_message_size:
        raise ProxyError(Code.MESSAGE_BODY_TOO_LARGE, f"message body cannot exceed the max {cfg.max_message_size}")


def _validate_key(key: str) -> None:
    if key:
        if is_blank(key):
            raise ProxyError(Code.ILLEGAL_MESSAGE_KEY, "key cannot be the char sequence of whitespace")
        if contains_control_character(key):
            raise ProxyError(Code.ILLEGAL_MESSAGE_KEY, "key cannot contain control character")


def _validate_group(group: str, cfg: ProxyConfig) -> None:
    if is_blank(group):
        raise ProxyError(Code.ILLEGAL_MESSAGE_GROUP, "message group cannot be the char sequence of whitespace")
    if cfg.max_message_group_size > 0:
        if len(group.encode("utf-8")) >= cfg.max_message_group_size:
            raise ProxyError(Code.ILLEGAL_MESSAGE_GROUP,
                             f"message group exceed the max size {cfg.max_message_group_size}")
        if contains_control_character(group):
            raise ProxyError(Code.ILLEGAL_MESSAGE_GROUP, "message group cannot contain control character")


def build_properties(msg: Any, producer_group: str, remote_addr: str, cfg: ProxyConfig,
                     now_ms: int | None = None) -> dict[str, str]:
    """`buildMessageProperty`: user properties, then the system properties the proxy sets."""
    sp = msg.system_properties
    user = dict(msg.user_properties)
    if len(user) > cfg.user_property_max_num:
        raise ProxyError(Code.MESSAGE_PROPERTIES_TOO_LARGE, f"too many user properties, max is {cfg.user_property_max_num}")
    size = 0
    for k, v in user.items():
        if k in SYSTEM_PROPERTY_NAMES:
            raise ProxyError(Code.ILLEGAL_MESSAGE_PROPERTY_KEY, f"property is used by system: {k}")
        if contains_control_character(k):
            raise ProxyError(Code.ILLEGAL_MESSAGE_PROPERTY_KEY, "the key of property cannot contain control character")
        if contains_control_character(v):
            raise ProxyError(Code.ILLEGAL_MESSAGE_PROPERTY_KEY,
                             "the value of property cannot contain control character")
        size += len(k.encode("utf-8")) + len(v.encode("utf-8"))
    props = dict(user)
    validate_tag(sp.tag)
    props[P.TAGS] = sp.tag
    size += len(sp.tag.encode("utf-8"))
    for key in sp.keys:
        _validate_key(key)
        size += len(key.encode("utf-8"))
    if len(sp.keys):
        props[P.KEYS] = " ".join(sp.keys)
    if size > cfg.max_user_property_size:
        raise ProxyError(Code.MESSAGE_PROPERTIES_TOO_LARGE,
                         f"the total size of user property is too large, max is {cfg.max_user_property_size}")
    if is_blank(sp.message_id):
        raise ProxyError(Code.ILLEGAL_MESSAGE_ID, "message id cannot be empty")
    props[P.UNIQ_KEY] = sp.message_id
    if sp.message_type == d.TRANSACTION:
        props[P.TRAN_MSG] = "true"
        if sp.HasField("orphaned_transaction_recovery_duration"):
            seconds = sp.orphaned_transaction_recovery_duration.seconds
            if 0 < cfg.max_transaction_recovery_second < seconds:
                raise ProxyError(Code.BAD_REQUEST, "the max transaction recovery time of message is too large, max is "
                                 f"{cfg.max_transaction_recovery_second}")
            props[P.CHECK_IMMUNITY_TIME_IN_SECONDS] = str(seconds)
    if sp.HasField("delivery_timestamp"):
        deliver_ms = timestamp_ms(sp.delivery_timestamp)
        now = int(time.time() * 1000) if now_ms is None else now_ms
        if cfg.max_delay_time_mills > 0 and deliver_ms - now > cfg.max_delay_time_mills:
            raise ProxyError(Code.ILLEGAL_DELIVERY_TIME,
                             f"the max delay time of message is too large, max is {cfg.max_delay_time_mills}")
        props[P.TIMER_DELIVER_MS] = str(deliver_ms)
    props[P.RECONSUME_TIME] = str(sp.delivery_attempt)
    props[P.PGROUP] = producer_group
    if sp.message_group:
        _validate_group(sp.message_group, cfg)
        props[P.SHARDING_KEY] = sp.message_group
    if sp.trace_context:
        props[TRACE_CONTEXT] = sp.trace_context
    born_host = sp.born_host if not is_blank(sp.born_host) else remote_addr
    if born_host and not is_blank(born_host):
        props[BORN_HOST] = born_host
    if timestamp_valid(sp.born_timestamp):
        props[BORN_TIMESTAMP] = str(timestamp_ms(sp.born_timestamp))
    return props


def message_type_of(props: dict[str, str]) -> str:
    """`TopicMessageType.parseFromMessageProperty`."""
    if props.get(P.TRAN_MSG) == "true":
        return "TRANSACTION"
    if any(props.get(k) is not None for k in (P.DELAY, P.TIMER_DELIVER_MS, P.TIMER_DELAY_SEC, P.TIMER_DELAY_MS)):
        return "DELAY"
    if props.get(P.SHARDING_KEY) is not None:
        return "FIFO"
    return "NORMAL"


def check_message_type(topic_type: str, actual: str) -> None:
    """`DefaultTopicMessageTypeValidator.validate`."""
    if actual == "UNSPECIFIED" or (actual != topic_type and topic_type != "MIXED"):
        raise proxy_exception(Code.MESSAGE_PROPERTY_CONFLICT_WITH_TYPE,
                              f"TopicMessageType validate failed, the expected type is {topic_type}, "
                              f"but actual type is {actual}")


def resource(name: str) -> Any:
    """`buildResource`: namespaces are not used by serve, the name is whole."""
    return d.Resource(name=name)


def _host_port(h: Any) -> str:
    return f"{h.ip}:{h.port}"


def build_message(m: MessageExt, now_ms: int | None = None) -> Any:
    """`GrpcConverter.buildMessage`: user properties, system properties, the body as stored."""
    props = m.properties
    user = {k: v for k, v in props.items() if k not in SYSTEM_PROPERTY_NAMES}
    sp = d.SystemProperties()
    if props.get(P.TAGS) is not None:
        sp.tag = props[P.TAGS]
    if props.get(P.KEYS) is not None:
        sp.keys.extend(props[P.KEYS].split(" "))
    sp.message_id = props.get(P.UNIQ_KEY) or m.offset_msg_id
    sp.body_digest.type = d.MD5
    sp.body_digest.checksum = hashlib.md5(m.body).hexdigest().upper()
    sp.body_encoding = d.GZIP if m.sys_flag & COMPRESSED_FLAG else d.IDENTITY
    sp.message_type = {"TRANSACTION": d.TRANSACTION, "DELAY": d.DELAY, "FIFO": d.FIFO}.get(
        _stored_type(props), d.NORMAL)
    sp.born_timestamp.CopyFrom(timestamp_of(m.born_timestamp))
    born = props.get(BORN_HOST)
    sp.born_host = born if born and not is_blank(born) else m.born_host.ip
    sp.store_timestamp.CopyFrom(timestamp_of(m.store_timestamp))
    sp.store_host = _host_port(m.store_host)
    if props.get(P.TIMER_DELAY_SEC) is not None:
        now = int(time.time() * 1000) if now_ms is None else now_ms
        sp.delivery_timestamp.CopyFrom(timestamp_of(now + int(props[P.TIMER_DELAY_SEC]) * 1000))
    elif props.get(P.TIMER_DELIVER_MS) is not None:
        sp.delivery_timestamp.CopyFrom(timestamp_of(int(props[P.TIMER_DELIVER_MS])))
    if props.get(P.SHARDING_KEY) is not None:
        sp.message_group = props[P.SHARDING_KEY]
    if props.get(POP_CK) is not None:
        sp.receipt_handle = props[POP_CK]
    sp.queue_id = m.queue_id
    sp.queue_offset = m.queue_offset
    sp.delivery_attempt = m.reconsume_times + 1
    if props.get(TRACE_CONTEXT) is not None:
        sp.trace_context = props[TRACE_CONTEXT]
    origin_topic, origin_id = props.get(P.DLQ_ORIGIN_TOPIC), props.get(P.DLQ_ORIGIN_MESSAGE_ID)
    if origin_topic is not None and origin_id is not None:
        sp.dead_letter_queue.topic = origin_topic
        sp.dead_letter_queue.message_id = origin_id
    return d.Message(topic=resource(m.topic), user_properties=user, system_properties=sp, body=m.body)


def _stored_type(props: dict[str, str]) -> str:
    """GrpcConverter's own order (it does not look at TIMER_DELAY_MS)."""
    if props.get(P.TRAN_MSG) == "true":
        return "TRANSACTION"
    if any(props.get(k) is not None for k in (P.DELAY, P.TIMER_DELIVER_MS, P.TIMER_DELAY_SEC)):
        return "DELAY"
    if props.get(P.SHARDING_KEY) is not None:
        return "FIFO"
    return "NORMAL"
