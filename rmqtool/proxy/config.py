"""The proxy settings that shape answers (`ProxyConfig` defaults), readable from broker.conf.

The names are ProxyConfig's; serve reads them from the same properties file as the broker's
(`-c broker.conf`), so `maxMessageSize=1024` there limits gRPC bodies as it would in a proxy.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, fields

from rmqtool.store.config import java_property_name, property_value


@dataclass
class ProxyConfig:
    grpc_server_port: int = 8081
    max_message_size: int = 4 * 1024 * 1024
    enable_message_body_empty_check: bool = True
    max_user_property_size: int = 16 * 1024
    user_property_max_num: int = 128
    max_message_group_size: int = 64
    default_invisible_time_mills: int = 60_000
    min_invisible_time_mills_for_recv: int = 10_000
    max_invisible_time_mills: int = 12 * 3600 * 1000
    max_delay_time_mills: int = 24 * 3600 * 1000
    max_transaction_recovery_second: int = 3600
    enable_topic_message_type_check: bool = True
    grpc_client_producer_max_attempts: int = 3
    grpc_client_producer_backoff_initial_millis: int = 10
    grpc_client_producer_backoff_max_millis: int = 1000
    grpc_client_producer_backoff_multiplier: int = 2
    grpc_client_consumer_min_long_polling_timeout_millis: int = 5_000
    grpc_client_consumer_max_long_polling_timeout_millis: int = 20_000
    grpc_client_consumer_long_polling_batch_size: int = 32
    enable_proxy_auto_renew: bool = True
    max_renew_retry_times: int = 3
    renew_ahead_time_millis: int = 10_000
    renew_max_time_millis: int = 3 * 3600 * 1000
    renew_schedule_period_millis: int = 5_000
    invisible_time_millis_when_clear: int = 1_000
    transaction_data_expire_millis: int = 30_000
    transaction_data_max_num: int = 15

    @classmethod
    def from_properties(cls, props: dict[str, str]) -> ProxyConfig:
        """Fields from camelCase property names (`maxMessageSize`) as the store config reads them;
        a number that does not parse keeps the default (the proxy does not refuse to start)."""
        cfg = cls()
        for f in fields(cls):
            raw = props.get(java_property_name(f.name))
            if raw is None:
                continue
            with contextlib.suppress(ValueError):
                setattr(cfg, f.name, property_value(f.type, raw))
        return cfg
