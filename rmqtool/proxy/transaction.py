"""Half-message bookkeeping of the proxy (`TransactionDataManager`, `AbstractTransactionService`).

A 5.x client ends a transaction with only the topic, message id and transaction id; the broker's
END_TRANSACTION needs the half message's queue offset and CommitLog offset. The proxy remembers
them per (producer group, transaction id) when the half message is sent or checked back, for
`transactionDataExpireMillis`, at most `transactionDataMaxNum` per key.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from dataclasses import dataclass


@dataclass
class TransactionData:
    broker_name: str
    tran_state_table_offset: int
    commit_log_offset: int
    transaction_id: str
    check_timestamp: int
    expire_ms: int

    def expired(self, now_ms: int) -> bool:
        return now_ms - self.check_timestamp > self.expire_ms


class TransactionDataManager:
    def __init__(self, expire_ms: int = 30_000, max_num: int = 15, max_keys: int = 100_000) -> None:
        self.expire_ms = expire_ms
        self.max_num = max_num
        self.max_keys = max_keys
        self.table: OrderedDict[tuple[str, str], list[TransactionData]] = OrderedDict()

    def add(self, producer_group: str, transaction_id: str, broker_name: str, tran_state_table_offset: int,
            commit_log_offset: int, now_ms: int | None = None) -> TransactionData | None:
        if not broker_name or not transaction_id:
            return None
        now = int(time.time() * 1000) if now_ms is None else now_ms
        data = TransactionData(broker_name, tran_state_table_offset, commit_log_offset, transaction_id, now,
                               self.expire_ms)
        key = (producer_group, transaction_id)
        entries = self.table.setdefault(key, [])
        if not any(e.commit_log_offset == commit_log_offset for e in entries):
            entries.append(data)
        entries.sort(key=lambda e: e.check_timestamp)
        del entries[:-self.max_num]
        self.table.move_to_end(key)
        while len(self.table) > self.max_keys:  # a client that never ends its transactions
            self.table.popitem(last=False)
        return data

    def poll(self, producer_group: str, transaction_id: str, now_ms: int | None = None) -> TransactionData | None:
        """`pollNoExpireTransactionData`: the newest entry (`pollLast`), expired ones dropped on
        the way. After a check-back that is the renewed half message the check named, so the
        client's commit ends the copy the broker checks next, not the original (whose op record
        would leave the copy to be checked, and committed, again)."""
        now = int(time.time() * 1000) if now_ms is None else now_ms
        key = (producer_group, transaction_id)
        entries = self.table.get(key)
        if not entries:
            return None
        found = None
        while entries:
            e = entries.pop()
            if not e.expired(now):
                found = e
                break
        if not entries:
            del self.table[key]
        return found
