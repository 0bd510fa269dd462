"""PopBufferMergeService (enablePopBufferMerge=true): checkpoints held in memory, acks merged in.

Followed: Java 5.3.3's `PopBufferMergeService`. With the flag a pop's checkpoint is not stored at
once: it waits in `buffer` (keyed as Java's merge key: topic, group, queue, start offset, pop time,
broker name) and an ack of one of its messages only sets a bit. The scan (`scan`, every few ms in
Java) stores a checkpoint with its acks when it has stayed popCkStayBufferTime (10 s), when its
revive time is less than popCkStayBufferTimeOut (3 s) away, or when the broker stops; a
checkpoint acked in full before that is dropped, and nothing of it reaches the revive topic.
Records, when written, are the ones the unbuffered path writes (`ck` with its revive queue, `ack`
per acked message, or one `bAck` with enablePopBatchAck).

The consumer offset moves only through `commit_offsets`, queue by queue in pop order, past a
checkpoint once it is done (all acked) or stored: a kill -9 loses the buffered checkpoints, but
their messages were never committed, so the next pop hands them out again (Java's at-least-once).
Pops start at max(committed offset, the newest buffered next-begin offset) (`latest_offset`).
Without the flag nothing is buffered and the popper commits at once, as before.
"""

from __future__ import annotations

import logging
import threading
from collections import deque
from dataclasses import dataclass
from typing import Any

from rmqtool.broker.confvalues import conf_flag, conf_int
from rmqtool.layouts.pop import AckMsg, PopCheckPoint

from .records import ack_message, ck_message

log = logging.getLogger("rmqtool.broker.pop.buffer")

PUT_OK = ("PUT_OK", "FLUSH_DISK_TIMEOUT", "FLUSH_SLAVE_TIMEOUT", "SLAVE_NOT_AVAILABLE")
SCAN_INTERVAL_S = 0.02  # Java scans every 5 ms; the stay times are seconds


@dataclass
class PopCheckPointWrapper:
    """`PopCheckPointWrapper`: a checkpoint, which of its messages are acked (`bits`), which acks
    are stored (`to_store_bits`), whether the checkpoint itself is stored, where the pop ended."""

    revive_qid: int
    ck: PopCheckPoint
    next_begin_offset: int
    just_offset: bool = False  # stored at pop time; only its offset waits in the queue
    bits: int = 0
    to_store_bits: int = 0
    ck_stored: bool = False
    storing: bool = False

    @property
    def lock_key(self) -> str:
        return f"{self.ck.topic}@{self.ck.cid}@{self.ck.queue_id}"

    @property
    def merge_key(self) -> tuple:
        ck = self.ck
        return ck.topic, ck.cid, ck.queue_id, ck.start_offset, ck.pop_time, ck.broker_name

    def done(self) -> bool:
        """`isCkDone`: every message acked."""
        full = (1 << self.ck.num) - 1
        return self.bits & full == full

    def done_for_finish(self) -> bool:
        """`isCkDoneForFinish`: every ack that came is stored."""
        return (self.bits ^ self.to_store_bits) & ((1 << self.ck.num) - 1) == 0

    def finished(self) -> bool:
        """Nothing left to do: the scan drops it, the offset queue commits past it."""
        return (self.just_offset and self.ck_stored) or self.done() or (self.done_for_finish() and self.ck_stored)


class PopBufferMergeService:
    """The buffer of one PopService; thread-safe (pops may run on the store's thread pool)."""

    def __init__(self, service: Any, extra: dict[str, str]) -> None:
        self.service = service
        self.enabled = conf_flag(extra, "enablePopBufferMerge", False)
        self.stay_time = conf_int(extra, "popCkStayBufferTime", 10_000)
        self.stay_timeout = conf_int(extra, "popCkStayBufferTimeOut", 3_000)
        self.max_buffer = conf_int(extra, "popCkMaxBufferSize", 200_000)
        self.max_offset_queue = conf_int(extra, "popCkOffsetMaxQueueSize", 20_000)
        self.batch_ack = conf_flag(extra, "enablePopBatchAck", False)
        self.buffer: dict[tuple, PopCheckPointWrapper] = {}
        self.commit_offsets: dict[str, deque[PopCheckPointWrapper]] = {}
        self.serving = True
        self._lock = threading.RLock()

    # -- what pops ask ------------------------------------------------------------------------------
    def latest_offset(self, lock_key: str) -> int:
        """`getLatestOffset`: where the newest pop of the queue still in the offset queue ended, or -1."""
        with self._lock:
            q = self.commit_offsets.get(lock_key)
            return q[-1].next_begin_offset if q else -1

    def clear_offset_queue(self, lock_key: str) -> None:
        with self._lock:
            self.commit_offsets.pop(lock_key, None)

    def _queue_ok(self, w: PopCheckPointWrapper) -> bool:
        q = self.commit_offsets.get(w.lock_key)
        return q is None or len(q) < self.max_offset_queue

    def add_ck(self, ck: PopCheckPoint, revive_qid: int, next_begin_offset: int) -> bool:
        """`addCk`: hold the checkpoint (False: store it now, through `add_ck_just_offset`)."""
        if not self.enabled or not self.serving:
            return False
        if ck.revive_time - self.service.now() < self.stay_timeout + 1500:
            return False
        w = PopCheckPointWrapper(revive_qid, ck, next_begin_offset)
        with self._lock:
            if len(self.buffer) > self.max_buffer or not self._queue_ok(w) or w.merge_key in self.buffer:
                return False
            self.commit_offsets.setdefault(w.lock_key, deque()).append(w)
            self.buffer[w.merge_key] = w
        return True

    def add_ck_just_offset(self, ck: PopCheckPoint, revive_qid: int, next_begin_offset: int) -> bool:
        """`addCkJustOffset`: store the checkpoint now; its offset still waits its turn."""
        w = PopCheckPointWrapper(revive_qid, ck, next_begin_offset, just_offset=True)
        with self._lock:
            if w.merge_key in self.buffer:
                return False
        self._store_ck(w)
        with self._lock:
            self.commit_offsets.setdefault(w.lock_key, deque()).append(w)
            self.buffer[w.merge_key] = w
        return True

    def add_ck_mock(self, group: str, topic: str, queue_id: int, start_offset: int, invisible_time: int,
                    pop_time: int, revive_qid: int, next_begin_offset: int) -> None:
        """`addCkMock`: a pop that found nothing up to `next_begin_offset` (filtered out): its offset
        is committed in turn, behind the checkpoints before it."""
        ck = PopCheckPoint(start_offset=start_offset, pop_time=pop_time, invisible_time=invisible_time, num=0,
                           queue_id=queue_id, topic=topic, cid=group, broker_name=self.service.broker_name)
        w = PopCheckPointWrapper(revive_qid, ck, next_begin_offset, just_offset=True, ck_stored=True)
        with self._lock:
            self.commit_offsets.setdefault(w.lock_key, deque()).append(w)

    def add_ak(self, revive_qid: int, ack: AckMsg) -> bool:
        """`addAk`: True when the ack is merged into a buffered checkpoint (nothing to store)."""
        if not self.enabled or not self.serving:
            return False
        key = (ack.topic, ack.consumer_group, ack.queue_id, ack.start_offset, ack.pop_time, ack.broker_name)
        with self._lock:
            w = self.buffer.get(key)
            if w is None or w.just_offset:
                return False
            now = self.service.now()
            if w.ck.revive_time - now < self.stay_timeout + 1500 or now - w.ck.pop_time > self.stay_time - 1500:
                return False
            for off in ack.acked_offsets():
                i = w.ck.index_of_ack(off)
                if i > -1:
                    w.bits |= 1 << i
            return True

    # -- the scan -----------------------------------------------------------------------------------
    def pending(self) -> bool:
        with self._lock:
            return bool(self.buffer) or any(self.commit_offsets.values())

    def scan(self) -> None:
        """`scan` + `scanCommitOffset`: store what must leave the buffer, commit offsets in order."""
        now = self.service.now()
        with self._lock:
            wrappers = list(self.buffer.items())
        for key, w in wrappers:
            if w.finished():
                self._drop(key)
                continue
            if w.just_offset:
                if not w.ck_stored and not w.storing:
                    self._store_ck(w)
                continue
            remove = (not self.serving or w.ck.revive_time - now < self.stay_timeout
                      or now - w.ck.pop_time > self.stay_time)
            if not remove:
                continue
            if not w.ck_stored:
                self._store_ck(w)
                if not w.ck_stored:
                    continue
            self._store_acks(w)
            if w.done_for_finish():
                self._drop(key)
        self._commit_offsets()

    def _drop(self, key: tuple) -> None:
        with self._lock:
            self.buffer.pop(key, None)

    def _commit_offsets(self) -> None:
        offsets = self.service.local.offsets
        with self._lock:
            for q in self.commit_offsets.values():
                while q and q[0].finished():
                    w = q.popleft()
                    if w.next_begin_offset >= 0:
                        offsets.commit_offset(w.ck.cid, w.ck.topic, w.ck.queue_id, w.next_begin_offset)

    def _put(self, msg: Any) -> bool:
        try:
            put = self.service.store.put_message(msg)
        except Exception:  # noqa: BLE001 - Java logs; the next scan tries again
            log.exception("storing a revive record of the pop buffer failed")
            return False
        return str(getattr(put.status, "name", put.status)) in PUT_OK

    def _store_ck(self, w: PopCheckPointWrapper) -> None:
        """`putCkToStore`."""
        w.storing = True
        try:
            svc = self.service
            if self._put(ck_message(svc.local, svc.revive_topic, w.ck, w.revive_qid, svc.now())):
                w.ck_stored = True
        finally:
            w.storing = False

    def _store_acks(self, w: PopCheckPointWrapper) -> None:
        """`putAckToStore` per buffered ack (or `putBatchAckToStore`): due at the checkpoint's revive time."""
        svc, ck = self.service, w.ck
        todo = [i for i in range(ck.num) if w.bits >> i & 1 and not w.to_store_bits >> i & 1]
        if not todo:
            return
        if self.batch_ack:
            acks = [(AckMsg(-1, ck.start_offset, ck.cid, ck.topic, ck.queue_id, ck.pop_time, None,
                            ack_offset_list=[ck.ack_offset_by_index(i) for i in todo]), todo)]
        else:
            acks = [(AckMsg(ck.ack_offset_by_index(i), ck.start_offset, ck.cid, ck.topic, ck.queue_id, ck.pop_time,
                            ck.broker_name), [i]) for i in todo]
        for ack, indexes in acks:
            if self._put(ack_message(svc.local, svc.revive_topic, ack, w.revive_qid, ck.invisible_time, svc.now())):
                for i in indexes:
                    w.to_store_bits |= 1 << i

    def flush(self, rounds: int = 100) -> None:
        """On shutdown (`serving` false): every held checkpoint and its acks stored, offsets committed."""
        self.serving = False
        for _ in range(rounds):
            if not self.pending():
                return
            self.scan()
        log.warning("the pop buffer still holds %d checkpoints at shutdown", len(self.buffer))
