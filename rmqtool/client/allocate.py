"""The five queue allocation strategies of clustering consumers (protocol.md §7.4).

Java: `client/.../consumer/rebalance/*.java`. Every strategy gets `mq_all` sorted by
(topic, brokerName, queueId) and `cid_all` sorted as strings, and returns nothing when the
current client id is not in `cid_all` (it has not been seen by the broker yet).
"""

from __future__ import annotations

import bisect
import hashlib
from collections.abc import Iterable, Sequence
from typing import Protocol

from rmqtool.client.message import MessageQueue


class AllocateMessageQueueStrategy(Protocol):
    name: str

    def allocate(self, consumer_group: str, current_cid: str, mq_all: Sequence[MessageQueue],
                 cid_all: Sequence[str]) -> list[MessageQueue]: ...


def _check(current_cid: str, mq_all: Sequence[MessageQueue], cid_all: Sequence[str]) -> bool:
    """`AbstractAllocateMessageQueueStrategy.check`: False means "allocate nothing"."""
    if not current_cid:
        raise ValueError("currentCID is empty")
    if not mq_all or not cid_all:
        return False
    return current_cid in cid_all


class AllocateMessageQueueAveragely:
    """Contiguous blocks; the first `n % c` consumers get one queue more."""

    name = "AVG"

    def allocate(self, consumer_group: str, current_cid: str, mq_all: Sequence[MessageQueue],
                 cid_all: Sequence[str]) -> list[MessageQueue]:
        if not _check(current_cid, mq_all, cid_all):
            return []
        n, c = len(mq_all), len(cid_all)
        index = list(cid_all).index(current_cid)
        mod = n % c
        if n <= c:
            size = 1
        elif mod > 0 and index < mod:
            size = n // c + 1
        else:
            size = n // c
        start = index * size if (mod > 0 and index < mod) else index * size + mod
        return [mq_all[(start + i) % n] for i in range(min(size, n - start))]


class AllocateMessageQueueAveragelyByCircle:
    """Queue j goes to consumer j % c."""

    name = "AVG_BY_CIRCLE"

    def allocate(self, consumer_group: str, current_cid: str, mq_all: Sequence[MessageQueue],
                 cid_all: Sequence[str]) -> list[MessageQueue]:
        if not _check(current_cid, mq_all, cid_all):
            return []
        c = len(cid_all)
        index = list(cid_all).index(current_cid)
        return [mq_all[j] for j in range(index, len(mq_all)) if j % c == index]


def md5_hash(key: str) -> int:
    """`ConsistentHashRouter.MD5Hash`: the first 4 digest bytes as an unsigned 32-bit number."""
    return int.from_bytes(hashlib.md5(key.encode("utf-8")).digest()[:4], "big")


class ConsistentHashRouter:
    """A `TreeMap` ring of virtual nodes `clientId-k`; a key goes to the first node at or after its hash."""

    def __init__(self, nodes: Iterable[str], virtual_node_cnt: int = 10) -> None:
        ring: dict[int, str] = {}
        for node in nodes:
            for k in range(virtual_node_cnt):
                ring[md5_hash(f"{node}-{k}")] = node  # a later node wins a hash collision (TreeMap.put)
        self._keys = sorted(ring)
        self._nodes = [ring[h] for h in self._keys]

    def route_node(self, key: str) -> str | None:
        if not self._keys:
            return None
        i = bisect.bisect_left(self._keys, md5_hash(key))
        return self._nodes[i if i < len(self._keys) else 0]


class AllocateMessageQueueConsistentHash:
    name = "CONSISTENT_HASH"

    def __init__(self, virtual_node_cnt: int = 10) -> None:
        if virtual_node_cnt < 1:
            raise ValueError("virtual_node_cnt must be >= 1")
        self.virtual_node_cnt = virtual_node_cnt

    def allocate(self, consumer_group: str, current_cid: str, mq_all: Sequence[MessageQueue],
                 cid_all: Sequence[str]) -> list[MessageQueue]:
        if not _check(current_cid, mq_all, cid_all):
            return []
        router = ConsistentHashRouter(cid_all, self.virtual_node_cnt)
        return [mq for mq in mq_all if router.route_node(str(mq)) == current_cid]


class AllocateMessageQueueByConfig:
    """The configured queues, whoever asks."""

    name = "CONFIG"

    def __init__(self, message_queue_list: Sequence[MessageQueue]) -> None:
        self.message_queue_list = list(message_queue_list)

    def allocate(self, consumer_group: str, current_cid: str, mq_all: Sequence[MessageQueue],
                 cid_all: Sequence[str]) -> list[MessageQueue]:
        return list(self.message_queue_list)


class AllocateMessageQueueByMachineRoom:
    """Queues of brokers named `idc@name` whose idc is in `consumeridcs`, in blocks of |pre| // c."""

    name = "MACHINE_ROOM"

    def __init__(self, consumeridcs: Iterable[str]) -> None:
        self.consumeridcs = set(consumeridcs)

    def allocate(self, consumer_group: str, current_cid: str, mq_all: Sequence[MessageQueue],
                 cid_all: Sequence[str]) -> list[MessageQueue]:
        if not _check(current_cid, mq_all, cid_all):
            return []
        index = list(cid_all).index(current_cid)
        pre = []
        for mq in mq_all:
            parts = mq.broker_name.split("@")
            while parts and not parts[-1]:  # Java's split drops trailing empty strings
                parts.pop()
            if len(parts) == 2 and parts[0] in self.consumeridcs:
                pre.append(mq)
        c = len(cid_all)
        m, r = len(pre) // c, len(pre) % c
        out = pre[index * m : index * m + m]
        if r > index:
            out.append(pre[index + m * c])
        return out


STRATEGIES = {
    "averagely": AllocateMessageQueueAveragely,
    "circle": AllocateMessageQueueAveragelyByCircle,
    "consistent-hash": AllocateMessageQueueConsistentHash,
}
