"""Child process for the SIGKILL tests: sends and delivers delayed messages until it is killed.

usage: timer_crash_child.py ROOT enqueue|dequeue [KILL_FRACTION]
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

from timer_support import T0, Clock, open_env

N_DEQUEUE = 4000


def main() -> None:
    root, phase = Path(sys.argv[1]), sys.argv[2]
    clock = Clock(T0)
    env = open_env(root, clock, mapped_file_size_timer_log=52 * 500 + 16)
    if phase == "enqueue":
        for i in range(10**6):
            if i == 200:
                print("ready", flush=True)  # the kill comes after at least this many sends
            if i % 10 == 0:
                env.send("T", b"d%d" % i, DELAY=str(1 + i % 3), UNIQ_KEY=f"D{i}")
            else:
                env.send("T", b"t%d" % i, TIMER_DELIVER_MS=str(T0 + 2000 + (i * 7919) % 60_000), UNIQ_KEY=f"U{i}")
            if i % 25 == 0:
                env.run()
    else:
        for i in range(N_DEQUEUE):
            if i % 10 == 0:
                env.send("T", b"d%d" % i, DELAY=str(1 + i % 3), UNIQ_KEY=f"D{i}")
            else:
                env.send("T", b"t%d" % i, TIMER_DELIVER_MS=str(T0 + 2000 + (i * 7919) % 30_000), UNIQ_KEY=f"U{i}")
        env.run()
        print("enqueued", flush=True)
        # the parent kills on "kill-me": said once this share of the delivery window has passed
        kill_at = T0 + 2000 + int(float(sys.argv[3]) * 30_000) if len(sys.argv) > 3 else None
        while clock.now < T0 + 40_000:
            clock.advance(20)
            env.run()
            if kill_at is not None and clock.now >= kill_at:
                print("kill-me", flush=True)
                kill_at = None
        print("done", flush=True)
        time.sleep(60)


if __name__ == "__main__":
    main()
