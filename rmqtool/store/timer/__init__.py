"""Timer messages (TimerLog + wheel) and the wiring of both delayed-delivery mechanisms into a store.

`attach_to_store(store)` registers the put-time rewrite (`handleScheduleMessage`) on
`store.put_hooks`, opens the `ScheduleMessageService` and `TimerMessageStore` of the store's root
and returns them; `attach_delivery(local_broker)` does the same for a `LocalBroker` and appends both
to its `services`, whose `run_due(now)` an embedded `consume` calls and whose `start()`/`stop()`
`serve` calls.
"""

from __future__ import annotations

from typing import Any

from rmqtool.layouts.constants import SCHEDULE_TOPIC, TIMER_TOPIC
from rmqtool.store.schedule import ScheduleMessageService
from rmqtool.store.timer.hooks import make_schedule_hook
from rmqtool.store.timer.timerstore import TimerMessageStore

__all__ = ["attach", "attach_delivery", "attach_to_store", "ScheduleMessageService", "TimerMessageStore"]


def attach_to_store(store: Any, *, read_only: bool = False) -> tuple[ScheduleMessageService, TimerMessageStore | None]:
    """Open both services on `store` and hook the rewrite into its put path (once).

    With `timerWheelEnable=false` there is no TimerMessageStore (None), as BrokerController
    creates none: no `timerlog/`, `timerwheel` or `config/timercheck` appears, timer messages
    are refused (WHEEL_TIMER_NOT_ENABLE) and delay levels still work.
    """
    clock = getattr(store, "clock", None)
    schedule = ScheduleMessageService(store, clock=clock, read_only=read_only)
    wheel = bool(getattr(store.config, "timer_wheel_enable", True))
    timer = TimerMessageStore(store, clock=clock, read_only=read_only) if wheel else None
    if not read_only:
        if not any(getattr(h, "rmqtool_schedule_hook", False) for h in store.put_hooks):
            hook_clock = timer.clock if timer is not None else schedule.clock
            store.put_hooks.append(make_schedule_hook(store.config, hook_clock, schedule.max_delay_level))
        store.add_arrival_listener(schedule.wakeup, frozenset({SCHEDULE_TOPIC}))
        if timer is not None:
            store.add_arrival_listener(timer.wakeup, frozenset({TIMER_TOPIC}))
    return schedule, timer


def attach_delivery(local_broker: Any) -> tuple[ScheduleMessageService, TimerMessageStore | None]:
    """Wire delay-level and timer delivery into a `LocalBroker` (call from `LocalBroker.open`)."""
    read_only = bool(getattr(local_broker, "read_only", False) or getattr(local_broker.store, "read_only", False))
    schedule, timer = attach_to_store(local_broker.store, read_only=read_only)
    local_broker.services.extend(s for s in (schedule, timer) if s is not None)
    return schedule, timer


def attach(local_broker: Any) -> list[Any]:
    """`LocalBroker` service plugin (local.SERVICE_PLUGINS): hooks in, returns its services."""
    read_only = bool(getattr(local_broker, "read_only", False) or getattr(local_broker.store, "read_only", False))
    return [s for s in attach_to_store(local_broker.store, read_only=read_only) if s is not None]
