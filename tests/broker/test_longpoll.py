"""`PullHoldService.topics`: the topics pulls are held on, with how many queues each, kept
with `waiters` (the store asks it before calling the arrival listener at all)."""

from __future__ import annotations

import asyncio

from rmqtool.broker.longpoll import PullHoldService


def test_held_topics_follow_the_waiters():
    async def main() -> None:
        hold = PullHoldService(asyncio.get_running_loop())
        a0 = asyncio.ensure_future(hold.wait("A", 0, 5))
        a0b = asyncio.ensure_future(hold.wait("A", 0, 5))
        a1 = asyncio.ensure_future(hold.wait("A", 1, 0.05))
        b0 = asyncio.ensure_future(hold.wait("B", 0, 5))
        await asyncio.sleep(0)
        assert hold.topics == {"A": 2, "B": 1} and hold.held == 4
        assert await a1 is False  # timed out: its queue's key gone, the topic still held on queue 0
        assert hold.topics == {"A": 1, "B": 1}
        hold.notify("A", 0)
        assert await a0 is True and await a0b is True
        assert hold.topics == {"B": 1}
        hold.notify("B", 0)
        assert await b0 is True
        assert hold.topics == {} and hold.waiters == {}

    asyncio.run(main())
