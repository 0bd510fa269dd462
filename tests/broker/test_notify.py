"""ConsumerIdsChangeNotifier: the first change of a quiet group notifies at once, the changes of
one window make one round at its end, sent to the members of that moment."""

from __future__ import annotations

import asyncio

from rmqtool.broker.notify import ConsumerIdsChangeNotifier


class _Chan:
    def __init__(self, name: str) -> None:
        self.name = name
        self.closed = asyncio.Event()
        self.got: list[dict[str, str]] = []

    async def oneway(self, cmd) -> None:  # type: ignore[no-untyped-def]
        assert cmd.code == 40  # Connection.oneway marks it oneway
        self.got.append(cmd.ext_fields)


def test_changes_inside_a_window_make_one_round_for_the_members_then():
    async def main() -> None:
        members: dict[str, list[_Chan]] = {"g": []}
        tasks: list[asyncio.Future] = []
        n = ConsumerIdsChangeNotifier(lambda g: list(members.get(g, [])),
                                      lambda c: tasks.append(asyncio.ensure_future(c)), window_s=1.0)
        chans = [_Chan(f"c{i}") for i in range(50)]
        members["g"].append(chans[0])
        n.changed("g")  # quiet group: at once
        await asyncio.sleep(0)
        assert chans[0].got == [{"consumerGroup": "g"}]
        for c in chans[1:]:  # 49 joins inside the window: one round at its end
            members["g"].append(c)
            n.changed("g")
        chans[3].closed.set()  # closed before the round: skipped
        await asyncio.sleep(0)
        assert sum(len(c.got) for c in chans) == 1
        await asyncio.sleep(1.2)
        await asyncio.gather(*tasks)
        assert [len(c.got) for c in chans] == [2] + [1] * 2 + [0] + [1] * 46
        assert n.sent == 50
        n.changed("other")  # another group has its own window (no members: nothing sent)
        await asyncio.sleep(1.1)
        n.changed("g")  # the window passed: at once again
        await asyncio.sleep(0)
        await asyncio.gather(*tasks)
        assert len(chans[0].got) == 3
        n.changed("g")
        n.close()  # a round still due is dropped with the broker
        await asyncio.sleep(1.1)
        assert len(chans[0].got) == 3

    asyncio.run(main())
