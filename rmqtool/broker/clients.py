"""Who is connected: consumer groups, producer groups and their channels (protocol.md §4.2-§4.4).

`ConsumerManager` / `ProducerManager` of the Java broker. A channel is a remoting `Connection`;
it leaves its groups when it closes, unregisters, or sends no heartbeat for 120 s. Consumer
membership changes are reported back so the broker can send NOTIFY_CONSUMER_IDS_CHANGED.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

from rmqtool.remoting.bodies import SubscriptionData
from rmqtool.remoting.transport import Connection

CHANNEL_EXPIRED_TIMEOUT_MS = 120_000


@dataclass
class ClientChannelInfo:
    conn: Connection
    client_id: str
    language: str
    version: int
    last_update_ms: int


@dataclass
class ConsumerGroupInfo:
    group: str
    consume_type: str = "CONSUME_PASSIVELY"
    message_model: str = "CLUSTERING"
    consume_from_where: str = "CONSUME_FROM_LAST_OFFSET"
    channels: dict[Connection, ClientChannelInfo] = field(default_factory=dict)
    subscriptions: dict[str, SubscriptionData] = field(default_factory=dict)
    last_update_ms: int = 0

    def client_ids(self) -> list[str]:
        return [c.client_id for c in self.channels.values()]

    def update_channel(self, info: ClientChannelInfo) -> bool:
        """True when the channel is new to the group."""
        old = self.channels.get(info.conn)
        self.channels[info.conn] = info
        return old is None or old.client_id != info.client_id

    def update_subscriptions(self, subs: list[SubscriptionData], now_ms: int) -> bool:
        """Replace the group's subscriptions; True when anything changed (`updateSubscription`)."""
        changed = False
        new = {s.topic: s for s in subs}
        for topic, sd in new.items():
            old = self.subscriptions.get(topic)
            if old is None or (old.subVersion < sd.subVersion and
                               (old.subString, old.expressionType) != (sd.subString, sd.expressionType)):
                changed = True
            if old is None or old.subVersion <= sd.subVersion:
                self.subscriptions[topic] = sd
        for topic in [t for t in self.subscriptions if t not in new]:
            del self.subscriptions[topic]
            changed = True
        self.last_update_ms = now_ms
        return changed


class ClientManager:
    """Both managers of the Java broker in one: groups by name, channels by connection."""

    def __init__(self, clock: Callable[[], int] | None = None) -> None:
        self.clock = clock or (lambda: int(time.time() * 1000))
        self.consumers: dict[str, ConsumerGroupInfo] = {}
        self.producers: dict[str, dict[Connection, ClientChannelInfo]] = {}

    # ------------------------------------------------------------ consumers
    def register_consumer(self, group: str, info: ClientChannelInfo, consume_type: str, message_model: str,
                          consume_from_where: str, subs: list[SubscriptionData]) -> bool:
        """`registerConsumer`: True when the group's members or subscriptions changed."""
        g = self.consumers.get(group)
        if g is None:
            g = self.consumers[group] = ConsumerGroupInfo(group)
        g.consume_type, g.message_model, g.consume_from_where = consume_type, message_model, consume_from_where
        joined = g.update_channel(info)
        changed = g.update_subscriptions(subs, self.clock())
        return joined or changed

    def unregister_consumer(self, group: str, conn: Connection) -> bool:
        g = self.consumers.get(group)
        if g is None or conn not in g.channels:
            return False
        del g.channels[conn]
        if not g.channels:
            del self.consumers[group]
        return True

    def find_subscription(self, group: str, topic: str) -> SubscriptionData | None:
        g = self.consumers.get(group)
        return g.subscriptions.get(topic) if g else None

    def consumer_ids(self, group: str) -> list[str]:
        g = self.consumers.get(group)
        return g.client_ids() if g else []

    def consumer_channels(self, group: str) -> list[Connection]:
        g = self.consumers.get(group)
        return list(g.channels) if g else []

    # ------------------------------------------------------------ producers
    def register_producer(self, group: str, info: ClientChannelInfo) -> None:
        self.producers.setdefault(group, {})[info.conn] = info

    def unregister_producer(self, group: str, conn: Connection) -> None:
        chans = self.producers.get(group)
        if chans is not None:
            chans.pop(conn, None)
            if not chans:
                del self.producers[group]

    def producer_channel(self, group: str) -> Connection | None:
        """A live channel of `group` for CHECK_TRANSACTION_STATE (`getAvailableChannel`)."""
        for conn in (self.producers.get(group) or {}):
            if not conn.closed.is_set():
                return conn
        return None

    # ------------------------------------------------------------ liveness
    def channel_closed(self, conn: Connection) -> list[str]:
        """Remove `conn` everywhere; returns the consumer groups whose membership changed."""
        changed = [g for g in list(self.consumers) if self.unregister_consumer(g, conn)]
        for g in list(self.producers):
            self.unregister_producer(g, conn)
        return changed

    def scan_not_active(self, now_ms: int | None = None) -> tuple[list[Connection], list[str]]:
        """Channels without a heartbeat for 120 s: dropped (to be closed); changed groups."""
        now = self.clock() if now_ms is None else now_ms
        stale: set[Connection] = set()
        for g in self.consumers.values():
            stale.update(c for c, i in g.channels.items() if now - i.last_update_ms > CHANNEL_EXPIRED_TIMEOUT_MS)
        for chans in self.producers.values():
            stale.update(c for c, i in chans.items() if now - i.last_update_ms > CHANNEL_EXPIRED_TIMEOUT_MS)
        groups: list[str] = []
        for conn in stale:
            groups.extend(self.channel_closed(conn))
        return list(stale), sorted(set(groups))
