"""A small persistent store with the `MessageStore` contract subset the timer services use.

It exists so the delay-level and timer services can be tested (including SIGKILL rounds) on real
CommitLog record bytes before and independently of the real engine; the same tests also run
against `rmqtool.store.messagestore.MessageStore` when it is importable.
"""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace

from rmqtool.layouts.message import Blank, MessageExt, RecordError, decode_record, encode_record
from rmqtool.layouts.net import Host


@dataclass
class MiniConfig:
    store_path_root_dir: Path
    message_delay_level: str = "1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h"
    timer_precision_ms: int = 1000
    timer_max_delay_sec: int = 259200
    timer_roll_window_slot: int = 172800
    mapped_file_size_timer_log: int = 104857600
    timer_wheel_enable: bool = True
    flush_delay_offset_interval: int = 10000
    max_message_size: int = 4194304
    extra: dict = field(default_factory=dict)


class MiniStore:
    def __init__(self, root: Path, config: MiniConfig | None = None, clock=None) -> None:
        self.root = Path(root)
        self.config = config or MiniConfig(self.root)
        self.clock = clock or (lambda: 0)
        self.put_hooks: list = []
        self.dispatch_listeners: list = []
        self._lock = threading.RLock()
        (self.root / "commitlog").mkdir(parents=True, exist_ok=True)
        self._path = self.root / "commitlog" / "00000000000000000000"
        self._cq: dict[tuple[str, int], list[tuple[int, int]]] = {}
        data = self._path.read_bytes() if self._path.exists() else b""
        pos = 0
        while pos < len(data):
            try:
                m = decode_record(data, pos, read_body=False, check_crc=False)
            except (Blank, RecordError):
                break
            self._cq.setdefault((m.topic, m.queue_id), []).append((pos, m.total_size))
            pos += m.total_size
        self._fd = os.open(self._path, os.O_RDWR | os.O_CREAT, 0o644)
        os.ftruncate(self._fd, pos)
        self._end = pos
        self.min_phy_offset = 0

    def put_message(self, msg: MessageExt):
        with self._lock:
            for hook in self.put_hooks:
                msg = hook(msg)
            q = self._cq.setdefault((msg.topic, msg.queue_id), [])
            msg.queue_offset = len(q)
            msg.commit_log_offset = self._end
            msg.store_timestamp = self.clock()
            msg.store_host = Host("127.0.0.1", 10911)
            raw = encode_record(msg)
            os.pwrite(self._fd, raw, self._end)
            q.append((self._end, len(raw)))
            self._end += len(raw)
            req = SimpleNamespace(topic=msg.topic, queue_id=msg.queue_id, commit_log_offset=msg.commit_log_offset,
                                  msg_size=len(raw), consume_queue_offset=msg.queue_offset,
                                  properties=msg.properties, store_timestamp=msg.store_timestamp)
            for listener in self.dispatch_listeners:
                listener(req)
            return SimpleNamespace(status="PUT_OK", msg=msg, wrote_offset=msg.commit_log_offset,
                                   wrote_bytes=len(raw), queue_offset=msg.queue_offset)

    def _read(self, offset: int, size: int) -> MessageExt:
        return decode_record(os.pread(self._fd, size, offset), 0)

    def look_message_by_offset(self, commit_log_offset: int, size: int | None = None):
        if size is None:
            size = int.from_bytes(os.pread(self._fd, 4, commit_log_offset), "big")
        try:
            return self._read(commit_log_offset, size)
        except (Blank, RecordError):
            return None

    def get_message(self, topic, queue_id, offset, max_msgs=32, **_):
        with self._lock:
            q = self._cq.get((topic, queue_id))
            if q is None:
                return SimpleNamespace(status="NO_MATCHED_LOGIC_QUEUE", messages=[], next_begin_offset=0,
                                       min_offset=0, max_offset=0)
            if offset >= len(q):
                status = "OFFSET_OVERFLOW_ONE" if offset == len(q) else "OFFSET_OVERFLOW_BADLY"
                return SimpleNamespace(status=status, messages=[], next_begin_offset=len(q) if offset > len(q) else offset,
                                       min_offset=0, max_offset=len(q))
            units = q[offset: offset + max_msgs]
        msgs = [self._read(o, s) for o, s in units]
        return SimpleNamespace(status="FOUND", messages=msgs, next_begin_offset=offset + len(msgs), min_offset=0,
                               max_offset=len(q))

    def get_max_offset_in_queue(self, topic, queue_id):
        return len(self._cq.get((topic, queue_id), []))

    def get_min_offset_in_queue(self, topic, queue_id):
        return 0

    def get_commit_log_offset_in_queue(self, topic, queue_id, offset):
        q = self._cq.get((topic, queue_id), [])
        return q[offset][0] if 0 <= offset < len(q) else -1

    def topic_queues(self):
        out: dict[str, list[int]] = {}
        for t, qid in self._cq:
            out.setdefault(t, []).append(qid)
        return out

    def close(self):
        os.close(self._fd)
