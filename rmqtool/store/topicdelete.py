"""Dropping a topic's queues from a running store: `DefaultMessageStore.deleteTopics` and
`cleanExpiredConsumerQueue`, what `mqadmin deleteTopic / cleanUnusedTopic / cleanExpiredCQ` end in.

A deleted queue's ConsumeQueue files go and its next queue offset is forgotten, so a topic
created again under the same name starts at offset 0, as in Java; its messages stay in the
CommitLog until the CommitLog file expires.
"""

from __future__ import annotations

import contextlib
import shutil
from collections.abc import Iterable
from typing import Any


def _drop(store: Any, key: tuple[str, int]) -> None:
    cq = store.cqs.queues.pop(key, None)
    if cq is not None:
        with contextlib.suppress(Exception):
            cq.close()
        shutil.rmtree(store.cqs.root / key[0] / str(key[1]), ignore_errors=True)
    store.commitlog.topic_queue_table.pop(key, None)


def delete_topics(store: Any, topics: Iterable[str]) -> int:
    """Every queue of `topics`; returns how many queues went."""
    wanted = set(topics)
    if not wanted or store.read_only:
        return 0
    n = 0
    with store.commitlog.put_lock, store.flush_lock:
        for key in [k for k in list(store.cqs.queues) if k[0] in wanted]:
            _drop(store, key)
            n += 1
        for topic in wanted:
            d = store.cqs.root / topic
            if d.is_dir() and not any(d.iterdir()):
                d.rmdir()
    return n


def clean_expired_consume_queues(store: Any) -> int:
    """`cleanExpiredConsumerQueue`: queues whose last unit points below the CommitLog's min offset
    (all their messages are gone); the delay-level queues stay."""
    if store.read_only:
        return 0
    n = 0
    min_phy = store.commitlog.min_offset
    with store.commitlog.put_lock, store.flush_lock:
        for key, cq in list(store.cqs.queues.items()):
            if key[0] == "SCHEDULE_TOPIC_XXXX":
                continue
            last = cq.last_unit()
            if last is not None and min_phy > 0 and last[0] + last[1] <= min_phy:
                _drop(store, key)
                n += 1
    return n


def unused_topics(store: Any, topic_exists: Any) -> list[str]:
    """Topics with queues in the store but no topic config (`cleanUnusedTopic`)."""
    return sorted({t for t, _ in list(store.cqs.queues) if not topic_exists(t)})
