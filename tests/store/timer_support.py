"""Opening a real MessageStore with both delayed-delivery services attached, on an injectable clock."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from rmqtool.layouts.message import MessageExt
from rmqtool.store.config import StoreConfig
from rmqtool.store.messagestore import MessageStore
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
    store: MessageStore
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
        out, offset = [], 0
        while True:
            res = self.store.get_message(topic, queue_id, offset, 1000, max_bytes=1 << 30)
            if not res.messages:
                return out
            out += res.messages
            offset = res.next_begin_offset

    def close(self) -> None:
        self.schedule.stop()
        self.timer.close()
        self.store.close()


def open_env(root: Path, clock: Clock, **config: object) -> Env:
    cfg = StoreConfig(store_path_root_dir=Path(root), mapped_file_size_commit_log=8 * 1024 * 1024,
                      mapped_file_size_consume_queue=60_000, **config)
    store = MessageStore.open(Path(root), cfg, clock=clock)
    schedule, timer = attach_to_store(store)
    return Env(store, schedule, timer, clock)
