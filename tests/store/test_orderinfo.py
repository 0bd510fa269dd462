"""ConsumerOrderInfoManager: the orderly-POP blocks, commitAndNext, and config/consumerOrderInfo.json
as fastjson writes it (Java's file loads here, ours is the same text)."""

from __future__ import annotations

from rmqtool.store.orderinfo import ConsumerOrderInfoManager

JAVA_FILE = """{
\t"table":{
\t\t"T@g":{3:{
\t\t\t\t"cm":1,
\t\t\t\t"i":60000,
\t\t\t\t"l":1700000000000,
\t\t\t\t"o":[10,1,2],
\t\t\t\t"oc":{11:2},
\t\t\t\t"popTime":1700000000000
\t\t\t}
\t\t}
\t}
}"""


def test_block_commit_and_next(tmp_path):
    now = [1000]
    m = ConsumerOrderInfoManager(tmp_path, lambda: now[0])
    infos: list[str] = []
    assert m.update(None, False, "T", "g", 0, 1000, 5000, [4, 5, 7], infos) == 0
    assert m.check_block(None, "T", "g", 0, 5000)
    assert m.commit_and_next("T", "g", 0, 5, 1000) == 4  # 4 still unacked
    assert m.commit_and_next("T", "g", 0, 9, 1000) == -1  # not handed out
    assert m.commit_and_next("T", "g", 0, 4, 999) == -2  # another pop's time
    assert m.commit_and_next("T", "g", 0, 4, 1000) == 7
    assert m.commit_and_next("T", "g", 0, 7, 1000) == 8
    assert not m.check_block(None, "T", "g", 0, 5000)
    # handed out again: one more consume of each offset seen before
    m.update(None, False, "T", "g", 1, 1000, 5000, [1, 2], infos)
    assert m.update(None, False, "T", "g", 1, 2000, 5000, [1, 2], infos) == 1
    now[0] = 7001
    assert not m.check_block(None, "T", "g", 1, 5000)  # the invisible time ran out


def test_file_round_trip_with_java_text(tmp_path):
    (tmp_path / "consumerOrderInfo.json").write_text(JAVA_FILE)
    m = ConsumerOrderInfoManager(tmp_path, lambda: 1700000001000)
    m.load()
    oi = m.get("T", "g", 3)
    assert oi is not None and oi.queue_offsets() == [10, 11, 12] and oi.offset_consumed_count == {11: 2}
    assert m.check_block(None, "T", "g", 3, 60000)
    assert m.commit_and_next("T", "g", 3, 11, 1700000000000) == 12
    m.persist()
    again = ConsumerOrderInfoManager(tmp_path, lambda: 0)
    again.load()
    assert again.get("T", "g", 3).commit_offset_bit == 3
    text = (tmp_path / "consumerOrderInfo.json").read_text()
    assert '"T@g":{3:{' in text and '"oc":{11:2' in text
