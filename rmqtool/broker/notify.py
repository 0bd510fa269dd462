"""NOTIFY_CONSUMER_IDS_CHANGED (40), coalesced per group (`DefaultConsumerIdsChangeListener`).

Every join, leave or subscription change of a consumer group tells each member to rebalance
now rather than at its next 20 s rebalance. Sent at once per change, N consumers joining one
after the other cost N*(N+1)/2 notifications (125,250 for 500), all saying the same thing.
Java's listener has two modes: `realTimeNotifyConsumerChange=true` (its default) notifies per
change and interrupts a notification round still going when the next change comes; with false it
keeps only the latest member list per group and sends every 15 s. Here a change notifies at once
when the group was quiet for a window, and changes inside a window are gathered into one round
at its end, sent to the members of that moment: each member hears at most one notification per
`window` seconds per group, and always one after the last change. The window is short (0.3 s)
in the real-time mode and 15 s with `realTimeNotifyConsumerChange=false`.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Coroutine
from typing import Any

from rmqtool.remoting.codes import RequestCode
from rmqtool.remoting.command import RemotingCommand
from rmqtool.remoting.headers import NotifyConsumerIdsChangedRequestHeader
from rmqtool.remoting.transport import Connection

log = logging.getLogger("rmqtool.broker")

REAL_TIME_WINDOW_S = 0.3
CACHED_WINDOW_S = 15.0  # DefaultConsumerIdsChangeListener's schedule (every 15 s)


class ConsumerIdsChangeNotifier:
    def __init__(self, channels: Callable[[str], list[Connection]],
                 spawn: Callable[[Coroutine[Any, Any, Any]], None], window_s: float = REAL_TIME_WINDOW_S) -> None:
        self.channels = channels  # the group's member channels now
        self.spawn = spawn
        self.window_s = window_s
        self._last: dict[str, float] = {}  # group -> loop time of its last round
        self._timers: dict[str, asyncio.TimerHandle] = {}  # group -> its pending round
        self.sent = 0  # notifications sent (for tests and stats)

    def changed(self, group: str) -> None:
        """The group's membership or subscriptions changed: notify now, or at the window's end."""
        if group in self._timers:
            return  # a round is already due: it will see this change too
        loop = asyncio.get_running_loop()
        now = loop.time()
        last = self._last.get(group)
        if last is None or now - last >= self.window_s:
            self._round(group)
        else:
            self._timers[group] = loop.call_at(last + self.window_s, self._due, group)

    def _due(self, group: str) -> None:
        self._timers.pop(group, None)
        self._round(group)

    def _round(self, group: str) -> None:
        self._last[group] = asyncio.get_running_loop().time()
        if len(self._last) > 4096:  # forget quiet groups (their next change notifies at once anyway)
            cut = self._last[group] - self.window_s
            for g in [g for g, t in self._last.items() if t < cut]:
                del self._last[g]
        ext = NotifyConsumerIdsChangedRequestHeader(group).to_ext()
        for conn in self.channels(group):
            if not conn.closed.is_set():
                self.sent += 1
                self.spawn(conn.oneway(RemotingCommand.request(RequestCode.NOTIFY_CONSUMER_IDS_CHANGED, ext)))

    def close(self) -> None:
        for t in self._timers.values():
            t.cancel()
        self._timers.clear()
