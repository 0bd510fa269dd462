"""The event loop `rmqtool serve` runs on: uvloop's where it is installed, asyncio's otherwise.

uvloop (libuv underneath) spends less CPU per read, write and wake-up than asyncio's selector
loop, and serve's one thread is what limits it from a few producers on. It is a dependency
on Linux only and never required: without it, or with RMQTOOL_LOOP=asyncio, serve runs on the
standard loop, with the same behaviour.

RMQTOOL_PROFILE=FILE runs the loop under cProfile and writes its stats (pstats format) to FILE
when serve stops: the loop's thread is where a request's CPU goes. The profiler's clock is the
process's CPU time, so waiting (idle loop, a loaded machine's other work) is not counted.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

T = TypeVar("T")


def loop_factory() -> tuple[str, Callable[[], asyncio.AbstractEventLoop]]:
    """(name, factory) of the loop to use: ("uvloop", uvloop.new_event_loop) when usable."""
    if os.environ.get("RMQTOOL_LOOP", "").lower() != "asyncio":
        try:
            import uvloop
        except ImportError:
            pass
        else:
            return "uvloop", uvloop.new_event_loop
    return "asyncio", asyncio.new_event_loop


def run(main: Coroutine[Any, Any, T]) -> T:
    """`asyncio.run(main)` on the loop `loop_factory` picks (profiled with RMQTOOL_PROFILE)."""
    path = os.environ.get("RMQTOOL_PROFILE")
    if not path:
        return _run(main)
    import cProfile
    import time

    prof = cProfile.Profile(time.process_time)
    prof.enable()
    try:
        return _run(main)
    finally:
        prof.disable()
        prof.dump_stats(path)


def _run(main: Coroutine[Any, Any, T]) -> T:
    name, factory = loop_factory()
    if hasattr(asyncio, "Runner"):  # 3.11+
        with asyncio.Runner(loop_factory=factory) as runner:
            return runner.run(main)
    if name == "uvloop":  # 3.10: through the policy (this process runs one loop: serve's)
        import uvloop

        asyncio.set_event_loop_policy(uvloop.EventLoopPolicy())
    return asyncio.run(main)
