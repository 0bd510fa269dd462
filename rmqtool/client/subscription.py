"""Subscriptions: `rmqtool.remoting.bodies.SubscriptionData` (`FilterAPI.build`), shared with the broker,
plus the client's exact tag re-check (protocol.md §7.6)."""

from __future__ import annotations

import time

from rmqtool.remoting.bodies import SubscriptionData

TAG = "TAG"
SQL92 = "SQL92"

__all__ = ["SQL92", "TAG", "SubscriptionData", "build", "matches_tags"]


def build(topic: str, expression: str | None, expression_type: str | None = TAG) -> SubscriptionData:
    """A subscription stamped with the current time as its subVersion, as the Java client does."""
    return SubscriptionData.build(topic, expression, expression_type, int(time.time() * 1000))


def matches_tags(sub: SubscriptionData, tags: str | None) -> bool:
    """`PullAPIWrapper.processPullResult`: exact tag strings, since hash codes can collide."""
    if sub.expressionType != TAG or not sub.tagsSet:
        return True
    return tags is not None and tags in sub.tagsSet
