"""Busy polling after a request (broker/busypoll.py, serve's --busy-poll): the loop polls for its
budget after the work, then sleeps; an idle broker costs no CPU."""

from __future__ import annotations

import asyncio
import time

from rmqtool.broker.busypoll import DEFAULT_BUDGET_US, WINDOW_S, BusyPoll
from tests.broker.conftest import InProcessServe, Wire, props, send_ext

CONF = "brokerClusterName=DefaultCluster\nbrokerName=broker-a\nmappedFileSizeCommitLog=1048576\n"


def _run(coro):
    loop = asyncio.new_event_loop()  # asyncio's own: its ready queue can be inspected
    try:
        return loop.run_until_complete(coro)
    finally:
        loop.close()


def test_polls_for_the_budget_after_the_work_then_sleeps():
    async def main():
        loop = asyncio.get_running_loop()
        bp = BusyPoll(loop, 0.2)  # budgets far above a loaded machine's scheduling delays
        assert not bp.spinning
        bp.touch()
        bp.touch()  # touches while polling add no second callback
        assert bp.spinning and len(loop._ready) == 1
        await asyncio.sleep(0.02)
        assert bp.spinning and bp.passes > 10  # the loop went round without waiting
        await asyncio.sleep(0.4)
        assert not bp.spinning
        stopped_at = bp.passes
        t0 = time.process_time()
        await asyncio.sleep(0.2)  # idle: the loop sleeps in its selector
        assert bp.passes == stopped_at
        assert time.process_time() - t0 < 0.05
    _run(main())


def test_the_budget_counts_from_the_end_of_a_long_request():
    async def main():
        loop = asyncio.get_running_loop()
        bp = BusyPoll(loop, 0.3)
        bp.touch()
        time.sleep(0.4)  # the request's own work, longer than the budget
        await asyncio.sleep(0.05)
        assert bp.spinning  # still polling for its successor
        await asyncio.sleep(0.6)
        assert not bp.spinning
    _run(main())


def test_each_request_restarts_the_budget():
    async def main():
        loop = asyncio.get_running_loop()
        bp = BusyPoll(loop, 0.3)
        for _ in range(5):  # requests 0.1 s apart: never idle for the whole budget
            bp.touch()
            await asyncio.sleep(0.1)
            assert bp.spinning
        await asyncio.sleep(0.6)
        assert not bp.spinning
    _run(main())


def test_many_connections_stop_the_polling_and_few_resume_it():
    async def main():
        loop = asyncio.get_running_loop()
        bp = BusyPoll(loop, 0.3, max_connections=2)
        a, b, c = object(), object(), object()
        bp.touch(a)
        bp.touch(b)
        assert bp.spinning
        bp.touch(c)  # a third connection in the same window
        await asyncio.sleep(0.02)
        assert not bp.spinning
        bp.touch(a)  # the window after one with three: still many
        assert not bp.spinning
        await asyncio.sleep(WINDOW_S * 2)
        bp.touch(a)  # that window saw one: polling again
        assert bp.spinning
        await asyncio.sleep(0.02)
        assert bp.spinning
    _run(main())


def test_polling_in_vain_pauses_it_and_a_fast_client_keeps_it(monkeypatch):
    from rmqtool.broker import busypoll

    monkeypatch.setattr(busypoll, "PAUSE_S", 1.0)

    async def main():
        loop = asyncio.get_running_loop()
        slow = BusyPoll(loop, 0.05)
        slow.touch()
        await asyncio.sleep(0.2)  # a client slower than the budget
        assert not slow.spinning and slow.misses == 1
        slow.touch()  # within the pause: no polling
        assert not slow.spinning
        await asyncio.sleep(0.01)
        assert not slow.spinning
        fast = BusyPoll(loop, 0.2)
        fast.touch()
        for _ in range(4):  # requests that come while it polls bank their score
            await asyncio.sleep(0.02)
            fast.touch()
        assert fast.hits == 4
        await asyncio.sleep(0.4)  # one budget in vain: 4 - 2 still banked
        assert not fast.spinning and fast.misses == 1
        fast.touch()
        assert fast.spinning  # not paused
        await asyncio.sleep(0.4)
        fast.touch()  # the second in vain left 0: still not below
        assert fast.spinning
        await asyncio.sleep(0.4)
        fast.touch()  # the third would go below zero: paused
        assert not fast.spinning and fast.misses == 3
    _run(main())


def test_serve_polls_after_requests_and_the_option_turns_it_off(tmp_path):
    (tmp_path / "on").mkdir()
    (tmp_path / "off").mkdir()
    serve = InProcessServe(tmp_path / "on", CONF)
    w = Wire(serve.broker)
    try:
        bp = serve.srv.busy_poll
        assert bp is not None and serve.srv.opts.busy_poll_us == DEFAULT_BUDGET_US
        before = bp.passes
        assert w.request(310, send_ext("BusyPoll", 0, props(UNIQ_KEY="0" * 32)), b"x").code == 0
        deadline = time.monotonic() + 5
        while bp.spinning and time.monotonic() < deadline:
            time.sleep(0.01)
        assert bp.passes > before and not bp.spinning
    finally:
        w.close()
        serve.close()
    serve = InProcessServe(tmp_path / "off", CONF, busy_poll_us=0)
    w = Wire(serve.broker)
    try:
        assert serve.srv.busy_poll is None
        assert w.request(310, send_ext("BusyPoll", 0, props(UNIQ_KEY="1" * 32)), b"x").code == 0
    finally:
        w.close()
        serve.close()

