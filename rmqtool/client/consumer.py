"""`PushConsumer` and `PullConsumer` (protocol.md §4.4-§4.11, §7.3-§7.8), one import for both.

The consumer is split by job, as the Java client is: consumer_types.py (message models, the
listener's context), consumer_impl.py (`DefaultMQPushConsumerImpl`: state, start, pull loops),
rebalance.py (`RebalanceImpl`), consume_service.py (`ConsumeMessageConcurrentlyService` /
`ConsumeMessageOrderlyService`), process_queue.py, and the synchronous faces push_consumer.py
and pull_consumer.py. This module gathers their public names.
"""

from rmqtool.client.consumer_impl import ConsumerImpl
from rmqtool.client.consumer_types import (
    BROADCASTING,
    CLUSTERING,
    CONSUME_FROM_FIRST_OFFSET,
    CONSUME_FROM_LAST_OFFSET,
    CONSUME_FROM_TIMESTAMP,
    ConsumeContext,
    Listener,
    StopConsuming,
)
from rmqtool.client.pull_consumer import PullConsumer
from rmqtool.client.push_consumer import PushConsumer

__all__ = [
    "BROADCASTING", "CLUSTERING", "CONSUME_FROM_FIRST_OFFSET", "CONSUME_FROM_LAST_OFFSET", "CONSUME_FROM_TIMESTAMP",
    "ConsumeContext", "ConsumerImpl", "Listener", "PullConsumer", "PushConsumer", "StopConsuming",
]
