"""Index entries built behind the append, in this process (`MessageStore.defer_index`).

Java's broker answers a send once its records are in the CommitLog; `ReputMessageService`
builds the ConsumeQueue units and index entries afterwards, on a thread of its own. `rmqtool
serve` does the same for the index: the put path hands the keys it gathered to `DeferredIndex`,
the response goes out, and the keys are written by `drain`, which the event loop runs a few
milliseconds after the request that queued them (serve's `wake`), so the index work of a
request no longer adds to its latency. It is the same work on the same thread, and keys that
wait together (the single sends of those milliseconds) are hashed and written together, which
costs less CPU than one by one.

Every reader drains first, so nothing is missed by a look-up that follows a send: a query by
key, expiry, flush (the checkpoint's index time), close. Builds run in the order they were
queued, under one lock, so the files come out byte for byte as from building each put at once
(tests/store/test_index_defer.py). A crash loses only keys of the newest records, past the
last file's endPhyOffset: recovery re-indexes those from the CommitLog, as after any crash.
"""

from __future__ import annotations

import logging
import threading
from collections import deque
from collections.abc import Callable, Iterable
from typing import Any

from rmqtool.errors import StoreError
from rmqtool.store.index import IndexRecord, IndexService

log = logging.getLogger("rmqtool.store")

# queued calls past which a putter builds them itself: memory stays bounded when no drain runs
MAX_PENDING = 1024


class DeferredIndex:
    """An IndexService whose builds wait until `drain`; the same methods as IndexService.

    `wake(drain)` is called (outside every lock) when the first build is queued after a drain:
    serve schedules `drain` on its event loop there. Single records (`build_index`) queued one after
    another are built with one `build_index_batch`.
    """

    offloaded = False  # built in this process: MessageStore.start_index_process may still take over

    def __init__(self, inner: IndexService, wake: Callable[[Callable[[], None]], None],
                 failed: Callable[[Exception], None]) -> None:
        self.inner = inner
        self.wake = wake
        self.failed = failed  # MessageStore.dispatch_failed: what a failed build in the put path called
        # appended by putters, taken from the left by `drain` (deque: both ends thread-safe, no lock)
        self._pending: deque[tuple[Any, ...]] = deque()
        self._scheduled = False  # a wake is out: the drain it causes takes everything queued by then
        self._build_lock = threading.Lock()  # held while building: drains run one at a time, in order

    # -- the put path ------------------------------------------------------------------------------
    def _queue(self, item: tuple[Any, ...]) -> None:
        pending = self._pending
        pending.append(item)
        if not self._scheduled:  # read after the append: a drain resets it before taking the queue
            self._scheduled = True
            try:
                self.wake(self.drain)
            except Exception as e:  # a closed loop: the next flush, look-up or close drains
                log.debug("index drain not scheduled: %s", e)
        elif len(pending) >= MAX_PENDING:
            self.drain()

    def build_index(self, topic: str, phy_offset: int, store_timestamp: int, uniq_key: str | None,
                    key_text: str | None, now_ms: int) -> None:
        if now_ms == store_timestamp:  # every put path passes its store time twice
            self._queue((topic, phy_offset, store_timestamp, uniq_key, key_text))
        else:
            self._queue((self.inner.build_index, (topic, phy_offset, store_timestamp, uniq_key, key_text, now_ms)))

    def build_index_batch(self, records: list[IndexRecord]) -> None:
        self._queue((self.inner.build_index_batch, (records,)))

    def build_index_usual(self, topic: str, store_timestamp: int, phys: list[int], uniq_keys: list[str],
                          keys: list[str]) -> None:
        self._queue((self.inner.build_index_usual, (topic, store_timestamp, phys, uniq_keys, keys)))

    def build_index_columns(self, topics: list[str], store_timestamp: int, phys: list[int],
                            uniq_keys: list[str | None], key_texts: list[str | None]) -> None:
        self._queue((self.inner.build_index_columns, (topics, store_timestamp, phys, uniq_keys, key_texts)))

    # -- the builder -------------------------------------------------------------------------------
    def pending(self) -> int:
        return len(self._pending)

    def drain(self) -> None:
        """Build everything queued so far, in order; a no-op when nothing waits."""
        pending = self._pending
        if not pending:
            if self._build_lock.locked():  # another thread took the queue and is still writing it:
                with self._build_lock:  # a reader that drains first must see those keys too
                    pass
            return
        lock = self._build_lock
        lock.acquire()
        try:
            self._scheduled = False  # before taking the queue: a later put wakes again
            if len(pending) == 1:  # serve's usual drain: one request's keys (only drains take, under the lock)
                item = pending.popleft()
                if len(item) == 5:
                    _build_record(self.inner, item)
                else:
                    item[0](*item[1])
            else:
                take = pending.popleft
                _build(self.inner, [take() for _ in range(len(pending))])
        except (StoreError, OSError) as e:  # a full disk: as when the put path built them
            self.failed(e)
        finally:
            lock.release()

    # -- readers drain first -----------------------------------------------------------------------
    def query_offsets(self, topic: str, key: str, max_num: int, begin: int, end: int) -> list[int]:
        self.drain()
        return self.inner.query_offsets(topic, key, max_num, begin, end)

    def delete_expired(self, commitlog_min: int) -> int:
        self.drain()
        with self._build_lock:
            return self.inner.delete_expired(commitlog_min)

    def flush(self) -> None:
        self.drain()
        with self._build_lock:
            self.inner.flush()

    def close(self) -> None:
        self.drain()
        self.inner.close()

    @property
    def files(self) -> list[Any]:
        self.drain()
        return self.inner.files

    def all_files(self) -> Iterable[Any]:
        self.drain()
        return self.inner.all_files()

    def __getattr__(self, name: str) -> Any:  # the rest of IndexService's (last_full_end_timestamp, ...)
        return getattr(self.inner, name)


def _build(inner: IndexService, pending: list[Any]) -> None:
    singles: list[IndexRecord] = []
    for item in pending:
        if len(item) == 5:  # one record of `build_index`
            singles.append(item)
            continue
        if singles:
            _build_singles(inner, singles)
            singles = []
        fn, args = item
        fn(*args)
    if singles:
        _build_singles(inner, singles)


def _build_singles(inner: IndexService, records: list[IndexRecord]) -> None:
    if len(records) == 1:
        _build_record(inner, records[0])
    else:
        inner.build_index_batch(records)


def _build_record(inner: IndexService, record: IndexRecord) -> None:
    topic, phy, ts, uniq, keys = record
    inner.build_index(topic, phy, ts, uniq, keys, ts)
