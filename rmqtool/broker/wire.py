"""The store's TopicConfig as the remoting body class, for registrations and admin answers."""

from __future__ import annotations

from typing import Any

from rmqtool.remoting.bodies import TopicConfig


def to_wire_topic_config(tc: Any) -> TopicConfig:
    """The store's TopicConfig (snake_case) as the remoting body class."""
    return TopicConfig(tc.topic_name, tc.read_queue_nums, tc.write_queue_nums, tc.perm, tc.topic_filter_type,
                       tc.topic_sys_flag, bool(tc.order), dict(getattr(tc, "attributes", {}) or {}))
