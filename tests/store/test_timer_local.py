"""LocalBroker wires both delayed-delivery services in (rmqtool.store.timer.attach)."""

from __future__ import annotations

from timer_support import T0, Clock

from rmqtool.layouts.message import MessageExt
from rmqtool.store.config import StoreConfig
from rmqtool.store.local import LocalBroker
from rmqtool.store.schedule import ScheduleMessageService
from rmqtool.store.timer import TimerMessageStore


def test_local_broker_delivers_delay_level_and_timer_messages_via_run_due(tmp_path):
    clock = Clock(T0)
    cfg = StoreConfig(mapped_file_size_commit_log=1 << 20)
    with LocalBroker.open(tmp_path, cfg, clock=clock) as broker:
        kinds = {type(s) for s in broker.services}
        assert {ScheduleMessageService, TimerMessageStore} <= kinds
        assert sum(getattr(h, "rmqtool_schedule_hook", False) for h in broker.store.put_hooks) == 1
        broker.send(MessageExt(topic="T", body=b"lvl", queue_id=1, properties={"DELAY": "2"}))
        broker.send(MessageExt(topic="T", body=b"tmr", queue_id=1, properties={"TIMER_DELAY_MS": "3000"}))
        assert broker.run_due(T0 + 2999) == 0
        assert broker.run_due(T0 + 3000) == 1
        assert broker.run_due(T0 + 5000) == 1
        got = broker.pull("T", 1, 0, 10).messages
        assert [m.body for m in got] == [b"tmr", b"lvl"]
    # a reopened broker does not deliver them again
    with LocalBroker.open(tmp_path, cfg, clock=clock) as broker:
        assert broker.run_due(T0 + 10_000) == 0
