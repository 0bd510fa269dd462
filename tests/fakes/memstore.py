"""An in-memory stand-in for `rmqtool.store.messagestore.MessageStore` (contract of the team brief).

Only for unit tests of the layers above the engine while the engine is being built; every test
that uses it also has a twin on the real MessageStore (skipped until that lands).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rmqtool.layouts.javahash import java_string_hash
from rmqtool.layouts.message import MessageExt, decode_record, encode_record


@dataclass
class PutResult:
    status: str
    msg: MessageExt
    wrote_offset: int
    wrote_bytes: int
    queue_offset: int
    offset_msg_id: str


@dataclass
class GetMessageResult:
    status: str
    messages: list[MessageExt]
    raw: list[bytes]
    next_begin_offset: int
    min_offset: int
    max_offset: int


@dataclass
class FakeConfig:
    store_path_root_dir: Path
    broker_cluster_name: str = "DefaultCluster"
    broker_name: str = "broker-a"
    broker_ip1: str = "127.0.0.1"
    listen_port: int = 10911
    default_topic_queue_nums: int = 4
    auto_create_topic_enable: bool = True
    timer_wheel_enable: bool = True
    max_message_size: int = 4194304
    flush_disk_type: str = "ASYNC_FLUSH"


@dataclass
class MemStore:
    config: Any
    clock: Any = field(default=lambda: int(time.time() * 1000))
    log: bytearray = field(default_factory=bytearray)
    cq: dict[tuple[str, int], list[tuple[int, int, int]]] = field(default_factory=dict)
    put_hooks: list = field(default_factory=list)
    closed: bool = False

    def put_message(self, msg: MessageExt) -> PutResult:
        for hook in self.put_hooks:
            msg = hook(msg)
        units = self.cq.setdefault((msg.topic, msg.queue_id), [])
        msg.queue_offset = len(units)
        msg.commit_log_offset = len(self.log)
        msg.store_timestamp = self.clock()
        raw = encode_record(msg)
        self.log += raw
        tags = msg.properties.get("TAGS")
        units.append((msg.commit_log_offset, len(raw), java_string_hash(tags) if tags else 0))
        return PutResult("PUT_OK", msg, msg.commit_log_offset, len(raw), msg.queue_offset, msg.offset_msg_id)

    def put_messages(self, msgs: list[MessageExt]) -> list[PutResult]:
        return [self.put_message(m) for m in msgs]

    def get_message(self, topic, queue_id, offset, max_msgs=32, *, tags_codes=None, filter=None, max_bytes=None):
        units = self.cq.get((topic, queue_id), [])
        if not units:
            return GetMessageResult("NO_MATCHED_LOGIC_QUEUE", [], [], 0, 0, 0)
        if offset >= len(units):
            return GetMessageResult("OFFSET_OVERFLOW_ONE" if offset == len(units) else "OFFSET_OVERFLOW_BADLY",
                                    [], [], len(units), 0, len(units))
        msgs, raws = [], []
        i = offset
        while i < len(units) and len(msgs) < max_msgs:
            phys, size, code = units[i]
            i += 1
            if tags_codes is not None and code not in tags_codes:
                continue
            raw = bytes(self.log[phys:phys + size])
            msgs.append(decode_record(raw))
            raws.append(raw)
        return GetMessageResult("FOUND" if msgs else "NO_MATCHED_MESSAGE", msgs, raws, i, 0, len(units))

    def get_max_offset_in_queue(self, topic, qid):
        return len(self.cq.get((topic, qid), []))

    def get_min_offset_in_queue(self, topic, qid):
        return 0

    def look_message_by_offset(self, off, size=None):
        return decode_record(bytes(self.log), off)

    def topic_queues(self):
        out: dict[str, list[int]] = {}
        for t, q in self.cq:
            out.setdefault(t, []).append(q)
        return out

    def clean_expired_files(self, now_ms=None):
        return 0

    def close(self):
        self.closed = True
