"""Opening a store with both delayed-delivery services, on an injectable clock."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from timer_ministore import MiniConfig, MiniStore

from rmqtool.layouts.message import MessageExt
from rmqtool.store.timer import attach_to_store

T0 = 1_700_000_000_000  # a precision boundary


class Clock:
    def __init__(self, now: int = T0) -> None:
        self.now = now

    def __call__(self) -> int:
        return self.now

    def advance(self, ms: int) -> int:
        self.now += ms
        return self.now


@dataclass
class Env:
    store: MiniStore
    schedule: object
    timer: object
    clock: Clock

    def run(self, now: int | None = None) -> int:
        now = self.clock.now if now is None else now
        return self.schedule.run_due(now) + self.timer.run_due(now)

    def send(self, topic: str, body: bytes = b"x", **props: str):
        msg = MessageExt(topic=topic, body=body, properties=dict(props), born_timestamp=self.clock.now)
        return self.store.put_message(msg)

    def delivered(self, topic: str, queue_id: int = 0) -> list[MessageExt]:
        return self.store.get_message(topic, queue_id, 0, 100000).messages

    def close(self) -> None:
        self.schedule.stop()
        self.timer.close()
        self.store.close()


def open_env(root: Path, clock: Clock, **config: object) -> Env:
    cfg = MiniConfig(Path(root), **config)
    store = MiniStore(Path(root), cfg, clock=clock)
    schedule, timer = attach_to_store(store)
    return Env(store, schedule, timer, clock)
