"""`get_message` reads the ConsumeQueue units a pull needs, not its whole scan window: a pull
of 32 without a filter unpacks 32 units (it used to unpack up to 800), and answers the same
records, next offset and byte cut as before; a tag filter still scans ahead."""

from __future__ import annotations

from rmqtool.layouts.javahash import java_string_hash
from rmqtool.store.consumequeue import ConsumeQueue
from rmqtool.store.messagestore import MessageStore
from tests.store.conftest import make_msg, small_config


def _counting(monkeypatch) -> list[int]:
    asked: list[int] = []
    read_units = ConsumeQueue.read_units

    def counted(self, index: int, max_units: int):
        asked.append(max_units)
        return read_units(self, index, max_units)

    monkeypatch.setattr(ConsumeQueue, "read_units", counted)
    return asked


def test_a_pull_without_filter_reads_only_the_units_it_returns(tmp_path, monkeypatch):
    with MessageStore.open(tmp_path / "s", small_config()) as store:
        store.put_messages([make_msg(i, body_size=50) for i in range(300)])
        asked = _counting(monkeypatch)
        got = store.get_message("TopicTest", 0, 10, 32, decode=False)
        assert max(asked) == 32  # what is still wanted, in one read per ConsumeQueue file
        assert len(got.raw) == 32 and got.next_begin_offset == 42
        assert [r[:4] for r in got.raw] == [store.get_message("TopicTest", 0, 10 + k, 1, decode=False).raw[0][:4]
                                            for k in range(32)]
        asked.clear()
        cut = store.get_message("TopicTest", 0, 0, 32, max_bytes=5 * len(got.raw[0]), decode=False)
        assert len(cut.raw) == 5 and cut.next_begin_offset == 5 and max(asked) == 32
        asked.clear()
        tail = store.get_message("TopicTest", 0, 290, 32, decode=False)
        assert len(tail.raw) == 10 and tail.next_begin_offset == 300 and max(asked) == 10


def test_a_tag_filtered_pull_still_scans_ahead(tmp_path, monkeypatch):
    with MessageStore.open(tmp_path / "s", small_config()) as store:
        store.put_messages([make_msg(i, body_size=50, TAGS="hit" if i % 10 == 0 else "miss") for i in range(300)])
        asked = _counting(monkeypatch)
        got = store.get_message("TopicTest", 0, 0, 8, tags_codes={java_string_hash("hit")}, decode=False)
        assert sum(asked) >= 71 and len(got.raw) == 8 and got.next_begin_offset == 71


def _one_by_one(store, queue_id: int, offset: int, n: int) -> list[bytes]:
    """Each record's bytes read by a pull of one (a span of one record is the record itself)."""
    return [bytes(store.get_message("TopicTest", queue_id, offset + k, 1, decode=False).raw[0]) for k in range(n)]


def test_records_end_to_end_are_read_as_one_span_with_the_same_bytes(tmp_path, monkeypatch):
    with MessageStore.open(tmp_path / "s", small_config()) as store:
        # queue 0 alone for 40 records (one span), then queues 0 and 1 in turn (no two of queue 0 adjacent)
        store.put_messages([make_msg(i, body_size=50 + i) for i in range(40)])
        store.put_messages([make_msg(i, queue_id=i % 2, body_size=60) for i in range(40, 80)])
        reads: list[int] = []
        read_bytes = type(store.commitlog).read_bytes

        def counted(self, offset: int, size: int):
            reads.append(size)
            return read_bytes(self, offset, size)

        monkeypatch.setattr(type(store.commitlog), "read_bytes", counted)
        got = store.get_message("TopicTest", 0, 4, 32, decode=False)
        assert len(reads) == 1 and reads[0] == sum(len(r) for r in got.raw)  # one read for 32 records
        assert [bytes(r) for r in got.raw] == _one_by_one(store, 0, 4, 32)
        assert got.next_begin_offset == 36
        reads.clear()
        mixed = store.get_message("TopicTest", 0, 40, 32, decode=False)  # queue 0's records 40.. are apart
        assert len(reads) == 20 and [bytes(r) for r in mixed.raw] == _one_by_one(store, 0, 40, 20)
        assert b"".join(mixed.raw) == b"".join(_one_by_one(store, 0, 40, 20))


def test_a_damaged_record_inside_a_span_is_left_out_as_before(tmp_path):
    with MessageStore.open(tmp_path / "s", small_config()) as store:
        store.put_messages([make_msg(i, body_size=50) for i in range(10)])
        whole = _one_by_one(store, 0, 0, 10)
        units = store.cqs.find("TopicTest", 0).read_units(3, 1)
        phys = units[0][0]
        mf = store.commitlog.mfq.find(phys)
        mf.mm[phys - mf.from_offset + 4 : phys - mf.from_offset + 8] = b"\0\0\0\0"  # record 3's magic code
        got = store.get_message("TopicTest", 0, 0, 32, decode=False)
        assert [bytes(r) for r in got.raw] == whole[:3] + whole[4:]
        assert got.status == "FOUND" and got.next_begin_offset == 10
