"""`NamespaceUtil`: resources of a namespace are sent as `ns%topic` (`%RETRY%ns%group` for retry topics)."""

from __future__ import annotations

from rmqtool.layouts.constants import DLQ_GROUP_TOPIC_PREFIX, RETRY_GROUP_TOPIC_PREFIX

SEPARATOR = "%"
SYSTEM_TOPICS = {
    "TBW102", "SELF_TEST_TOPIC", "BenchmarkTest", "OFFSET_MOVED_EVENT", "SCHEDULE_TOPIC_XXXX",
    "RMQ_SYS_TRANS_HALF_TOPIC", "RMQ_SYS_TRANS_OP_HALF_TOPIC", "TRANS_CHECK_MAX_TIME_TOPIC",
    "RMQ_SYS_TRACE_TOPIC", "rmq_sys_wheel_timer",
}
SYSTEM_GROUPS = {"CLIENT_INNER_PRODUCER", "TOOLS_CONSUMER", "FILTERSRV_CONSUMER", "__MONITOR_CONSUMER",
                 "SELF_TEST_P_GROUP", "SELF_TEST_C_GROUP", "CID_ONS-HTTP-PROXY", "CID_ONSAPI_PERMISSION",
                 "CID_ONSAPI_OWNER", "CID_ONSAPI_PULL", "CID_RMQ_SYS_TRANS", "DEFAULT_PRODUCER",
                 "DEFAULT_CONSUMER"}


def _split_prefix(resource: str) -> tuple[str, str]:
    for prefix in (RETRY_GROUP_TOPIC_PREFIX, DLQ_GROUP_TOPIC_PREFIX):
        if resource.startswith(prefix):
            return prefix, resource[len(prefix):]
    return "", resource


def wrap(namespace: str | None, resource: str) -> str:
    if not namespace or not resource or resource in SYSTEM_TOPICS or resource in SYSTEM_GROUPS:
        return resource
    prefix, rest = _split_prefix(resource)
    if rest.startswith(namespace + SEPARATOR):
        return resource
    return f"{prefix}{namespace}{SEPARATOR}{rest}"


def unwrap(namespace: str | None, resource: str) -> str:
    if not namespace or not resource:
        return resource
    prefix, rest = _split_prefix(resource)
    if rest.startswith(namespace + SEPARATOR):
        return prefix + rest[len(namespace) + 1:]
    return resource
