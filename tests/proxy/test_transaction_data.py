"""The proxy's half-message bookkeeping (`TransactionDataManager` of Apache's proxy): an
EndTransaction ends the newest entry of its transaction (the copy a check-back named), expired
entries are skipped, and at most `transactionDataMaxNum` are kept per transaction, the oldest dropped."""

from __future__ import annotations

from rmqtool.proxy.transaction import TransactionDataManager


def test_poll_takes_the_newest_unexpired_entry():
    m = TransactionDataManager(expire_ms=1_000, max_num=3)
    m.add("G", "T1", "broker-a", 0, 100, now_ms=10_000)  # the send
    m.add("G", "T1", "broker-a", 5, 900, now_ms=10_500)  # a check-back of the renewed copy
    got = m.poll("G", "T1", now_ms=10_600)
    assert (got.tran_state_table_offset, got.commit_log_offset) == (5, 900)
    assert m.poll("G", "T1", now_ms=11_100) is None  # what is left expired at 11_000
    assert m.poll("G", "T1", now_ms=11_100) is None and not m.table


def test_poll_skips_expired_newer_entries_and_keeps_max_num():
    m = TransactionDataManager(expire_ms=1_000, max_num=2)
    for i in range(4):
        m.add("G", "T2", "broker-a", i, 100 + i, now_ms=10_000 + i)
    assert [e.tran_state_table_offset for e in m.table[("G", "T2")]] == [2, 3]
    assert m.poll("G", "T2", now_ms=10_500).tran_state_table_offset == 3
    assert m.poll("G", "T2", now_ms=10_500).tran_state_table_offset == 2
    assert m.poll("G", "T2", now_ms=10_500) is None
