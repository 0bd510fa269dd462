"""Auto-renew of invisible time for `auto_renew` receives (`DefaultReceiptHandleManager`,
`MessageReceiptHandle`, `RenewStrategyPolicy` of Apache's proxy).

A push consumer asks for auto-renew: the message is popped with the proxy's default invisible
time (60 s) and, while the client holds it, pushed out again `renewAheadTimeMillis` before it
would become visible: 1 min, 3, 5, 10, 30, then every hour, up to `renewMaxTimeMillis` (3 h)
after the receive, when it is handed back with the group's retry delay instead. The client
acks or changes the message with the handle it got; the current (renewed) handle is used in
its place. Handles of a client that left its group go back within `invisibleTimeMillisWhenClear`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from dataclasses import dataclass
from typing import Any

from rmqtool.proxy.handle import ReceiptHandle, create_handle
from rmqtool.proxy.settings import DEFAULT_CUSTOMIZED_NEXT_MS

log = logging.getLogger("rmqtool.proxy")
RENEW_NEXT_MS = (60_000, 180_000, 300_000, 600_000, 1_800_000, 3_600_000)  # RenewStrategyPolicy.next


@dataclass
class MessageReceiptHandle:
    group: str
    topic: str
    msg_id: str
    original: str  # the handle the client holds
    current: str  # the handle the broker knows now
    reconsume_times: int
    consume_ms: int
    renew_times: int = 0
    renew_retry_times: int = 0


class ReceiptHandleManager:
    def __init__(self, core: Any) -> None:
        self.core = core
        self.groups: dict[tuple[str, str], dict[tuple[str, str], MessageReceiptHandle]] = {}
        self._task: asyncio.Task | None = None

    def add(self, client_id: str, group: str, topic: str, msg_id: str, handle: str, reconsume_times: int) -> None:
        self.groups.setdefault((client_id, group), {})[(msg_id, handle)] = MessageReceiptHandle(
            group, topic, msg_id, handle, handle, reconsume_times, int(time.time() * 1000))

    def remove(self, client_id: str, group: str, msg_id: str, handle: str) -> str | None:
        """The current handle of a message the client is done with (None: not renewed here)."""
        g = self.groups.get((client_id, group))
        h = g.pop((msg_id, handle), None) if g is not None else None
        if g is not None and not g:
            del self.groups[(client_id, group)]
        return h.current if h is not None else None

    # ------------------------------------------------------------ the renew task
    def start(self) -> None:
        self._task = asyncio.ensure_future(self._loop())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(BaseException):
                await self._task
            self._task = None

    async def _loop(self) -> None:
        period = max(0.05, self.core.config.renew_schedule_period_millis / 1000)
        while True:
            await asyncio.sleep(period)
            try:
                await self.scan()
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("receipt handle renewal failed")

    def _online(self, client_id: str, group: str) -> bool:
        channel = self.core.channels.get(client_id)
        return channel is not None and channel in self.core.controller.clients.consumers.get(group, _NO_GROUP).channels

    async def scan(self, now_ms: int | None = None) -> int:
        """`scheduleRenewTask`: renew what is about to become visible; returns how many were."""
        cfg = self.core.config
        renewed = 0
        for key in list(self.groups):
            client_id, group = key
            if not self._online(client_id, group):
                await self._clear(key)
                continue
            for hkey, h in list(self.groups.get(key, {}).items()):
                now = int(time.time() * 1000) if now_ms is None else now_ms
                rh = ReceiptHandle.decode(h.current)
                if rh.retrieve_time + rh.invisible_time - now > cfg.renew_ahead_time_millis:
                    continue
                if h.renew_retry_times >= cfg.max_renew_retry_times:
                    self.groups[key].pop(hkey, None)
                    continue
                if now - h.consume_ms < cfg.renew_max_time_millis:
                    delay = RENEW_NEXT_MS[min(h.renew_times, len(RENEW_NEXT_MS) - 1)]
                    new = await self._change(h, rh, delay)
                    if new is None:
                        h.renew_retry_times += 1
                    else:
                        h.current, h.renew_retry_times = new, 0
                        h.renew_times += 1
                        renewed += 1
                else:  # held too long: back to the group's retry schedule (STOP_RENEW)
                    self.groups[key].pop(hkey, None)
                    await self._change(h, rh, self._retry_delay_ms(h))
            if not self.groups.get(key):
                self.groups.pop(key, None)
        return renewed

    async def _clear(self, key: tuple[str, str]) -> None:
        """`clearGroup`: the client is gone; its messages come back soon."""
        for h in self.groups.pop(key, {}).values():
            with contextlib.suppress(Exception):
                await self._change(h, ReceiptHandle.decode(h.current), self.core.config.invisible_time_millis_when_clear)

    def _retry_delay_ms(self, h: MessageReceiptHandle) -> int:
        group = self.core.group_config(h.group)
        policy = dict(getattr(group, "group_retry_policy", None) or {})
        nxt = (policy.get("customizedRetryPolicy") or {}).get("next") or DEFAULT_CUSTOMIZED_NEXT_MS
        return int(nxt[min(h.reconsume_times, len(nxt) - 1)])

    async def _change(self, h: MessageReceiptHandle, rh: ReceiptHandle, invisible_ms: int) -> str | None:
        pop = getattr(self.core.controller, "pop", None)
        if pop is None:
            return None
        try:
            c = await pop.change_invisible_time_message(h.group, rh.real_topic(h.topic, h.group), rh.queue_id,
                                                        rh.text, rh.offset, invisible_ms)
        except Exception as e:
            log.info("renewing %s of %s failed: %s", h.msg_id, h.group, e)
            return None
        return create_handle(c.extra_info, rh.commit_log_offset)


class _NoGroup:
    channels: dict[Any, Any] = {}


_NO_GROUP = _NoGroup()
