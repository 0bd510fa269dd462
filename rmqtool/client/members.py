"""What `ClientInstance` needs of the producers and consumers registered with it.

Java's `MQClientInstance` holds its members as `MQProducerInner` / `MQConsumerInner` interfaces
and never sees `DefaultMQProducerImpl` or `DefaultMQPushConsumerImpl`; these protocols play that
part, so the instance sits below producer.py and consumer*.py in the import graph.
"""

from __future__ import annotations

import concurrent.futures
from typing import Any, Protocol

from rmqtool.client.route import TopicRouteData
from rmqtool.remoting.bodies import ConsumerData


class MQProducerInner(Protocol):
    """`MQProducerInner`: routes in use and updates, and the transaction check's listener."""

    group: str
    transaction_listener: Any
    check_executor: concurrent.futures.Executor | None

    def topics_in_use(self) -> set[str]: ...

    def on_route(self, topic: str, route: TopicRouteData) -> None: ...


class MQConsumerInner(Protocol):
    """`MQConsumerInner`: subscriptions for the heartbeat, rebalance and offset persistence."""

    group: str

    def topics_in_use(self) -> set[str]: ...

    def on_route(self, topic: str, route: TopicRouteData) -> None: ...

    def consumer_data(self) -> ConsumerData: ...

    def rebalance_soon(self) -> None: ...

    async def do_rebalance(self) -> None: ...

    async def persist_consumer_offset(self) -> None: ...
