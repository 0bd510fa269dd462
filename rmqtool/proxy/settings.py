"""Client settings from the Telemetry stream, merged with the server's (`GrpcClientSettingsManager`).

A client sends its Settings first thing on the Telemetry stream and gets them back completed:
producers with the proxy's retry policy and body limit, consumers with the group's retry policy
(`retryMaxTimes` + 1 attempts, its customized or exponential backoff), FIFO flag, batch size and
long-polling timeout. Heartbeat and NotifyClientTermination look the client up here.
"""

from __future__ import annotations

from typing import Any

from rmqtool.proxy.pb import definition as d

# CustomizedRetryPolicy's default `next` (ms), as SubscriptionGroupConfig's default policy
DEFAULT_CUSTOMIZED_NEXT_MS = (1000, 5000, 10000, 30000, 60000, 120000, 180000, 240000, 300000, 360000, 420000,
                              480000, 540000, 600000, 1200000, 1800000, 3600000, 7200000)


def _duration(ms: int) -> Any:
    from google.protobuf.duration_pb2 import Duration

    return Duration(seconds=ms // 1000, nanos=(ms % 1000) * 1_000_000)


class ClientSettingsManager:
    def __init__(self, core: Any) -> None:
        self.core = core
        self.table: dict[str, Any] = {}

    def update(self, client_id: str, settings: Any) -> None:
        """`updateClientSettings`: consumer settings start from the defaults of a new group."""
        if settings.HasField("subscription"):
            merged = d.Settings()
            merged.CopyFrom(self._merge_subscription(d.Settings(), None))
            merged.MergeFrom(settings)
            settings = merged
        self.table[client_id] = settings

    def raw(self, client_id: str) -> Any:
        return self.table.get(client_id)

    def get(self, client_id: str) -> Any:
        """`getClientSettings`: the stored settings with the server's part filled in."""
        settings = self.table.get(client_id)
        return None if settings is None else self._complete(settings)

    def remove(self, client_id: str) -> Any:
        settings = self.table.pop(client_id, None)
        return None if settings is None else self._complete(settings)

    def _complete(self, settings: Any) -> Any:
        if settings.HasField("publishing"):
            out = self._merge_producer(settings)
        elif settings.HasField("subscription"):
            group = self.core.group_config(settings.subscription.group.name)
            out = settings if group is None else self._merge_subscription(settings, group)
        else:
            out = settings
        result = d.Settings()
        result.CopyFrom(out)
        result.metric.CopyFrom(d.Metric(on=False))  # metricCollectorMode OFF
        return result

    def _merge_producer(self, settings: Any) -> Any:
        cfg = self.core.config
        out = d.Settings()
        out.CopyFrom(settings)
        bp = out.backoff_policy
        bp.max_attempts = cfg.grpc_client_producer_max_attempts
        bp.exponential_backoff.initial.CopyFrom(_duration(cfg.grpc_client_producer_backoff_initial_millis))
        bp.exponential_backoff.max.CopyFrom(_duration(cfg.grpc_client_producer_backoff_max_millis))
        bp.exponential_backoff.multiplier = float(cfg.grpc_client_producer_backoff_multiplier)
        out.publishing.validate_message_type = cfg.enable_topic_message_type_check
        out.publishing.max_body_size = cfg.max_message_size
        return out

    def _merge_subscription(self, settings: Any, group: Any) -> Any:
        """`mergeSubscriptionData` with a SubscriptionGroupConfig (None: a new group's defaults)."""
        cfg = self.core.config
        out = d.Settings()
        out.CopyFrom(settings)
        sub = out.subscription
        sub.receive_batch_size = cfg.grpc_client_consumer_long_polling_batch_size
        sub.long_polling_timeout.CopyFrom(_duration(cfg.grpc_client_consumer_max_long_polling_timeout_millis))
        sub.fifo = bool(getattr(group, "consume_message_orderly", False))
        out.backoff_policy.max_attempts = int(getattr(group, "retry_max_times", 16)) + 1
        policy = dict(getattr(group, "group_retry_policy", None) or {"type": "CUSTOMIZED"})
        if str(policy.get("type", "CUSTOMIZED")).upper() == "EXPONENTIAL":
            exp = dict(policy.get("exponentialRetryPolicy") or {})
            eb = out.backoff_policy.exponential_backoff
            eb.initial.CopyFrom(_duration(int(exp.get("initial", 5000))))
            eb.max.CopyFrom(_duration(int(exp.get("max", 7_200_000))))
            eb.multiplier = float(exp.get("multiplier", 2))
        else:
            custom = dict(policy.get("customizedRetryPolicy") or {})
            nxt = custom.get("next") or DEFAULT_CUSTOMIZED_NEXT_MS
            cb = out.backoff_policy.customized_backoff
            del cb.next[:]
            cb.next.extend([_duration(int(ms)) for ms in nxt])
        return out
