"""Delay levels: put-time rewrite, delivery of every level on time, delayOffset.json."""

from __future__ import annotations

import pytest
from timer_support import T0, Clock, open_env

from rmqtool.errors import InvalidInput
from rmqtool.layouts.constants import SCHEDULE_TOPIC
from rmqtool.store.schedule import (
    DataVersion,
    decode_delay_offset,
    delay_level_table,
    encode_delay_offset,
)

LEVEL_MS = [1000, 5000, 10000, 30000, 60000, 120000, 180000, 240000, 300000, 360000, 420000, 480000, 540000,
            600000, 1200000, 1800000, 3600000, 7200000]


def test_default_levels():
    assert list(delay_level_table().values()) == LEVEL_MS
    assert delay_level_table("2s 1d 3m 1h") == {1: 2000, 2: 86_400_000, 3: 180_000, 4: 3_600_000}
    with pytest.raises(InvalidInput):
        delay_level_table("1s 5x")


def test_put_parks_the_message_on_its_level_queue(tmp_path):
    env = open_env(tmp_path, Clock())
    r = env.send("T", b"hi", DELAY="3", UNIQ_KEY="K", TIMER_DELAY_MS="5000")
    m = r.msg
    assert (m.topic, m.queue_id) == (SCHEDULE_TOPIC, 2)
    assert m.properties["REAL_TOPIC"] == "T" and m.properties["REAL_QID"] == "0"
    assert "TIMER_DELAY_MS" not in m.properties  # a delay level wins over the timer keys
    stored = env.store.look_message_by_offset(r.wrote_offset)
    assert stored.topic == SCHEDULE_TOPIC and stored.properties["DELAY"] == "3"
    env.close()


def test_level_above_max_is_clamped(tmp_path):
    env = open_env(tmp_path, Clock())
    m = env.send("T", DELAY="99").msg
    assert (m.queue_id, m.properties["DELAY"]) == (17, "18")
    env.close()


@pytest.mark.parametrize("level", range(1, 19))
def test_every_level_is_delivered_exactly_at_its_delay(tmp_path, level):
    clock = Clock(T0 + 123)
    env = open_env(tmp_path, clock)
    env.send("T", b"body", DELAY=str(level), UNIQ_KEY=f"U{level}", TAGS="tg")
    due = T0 + 123 + LEVEL_MS[level - 1]
    assert env.run(due - 1) == 0
    assert env.delivered("T") == []
    assert env.run(due) == 1
    [m] = env.delivered("T")
    assert m.body == b"body" and m.store_timestamp == clock.now
    # messageTimeUp builds the string from the full map: DELAY, REAL_TOPIC, REAL_QID stay on disk
    assert m.properties["DELAY"] == str(level) and m.properties["REAL_TOPIC"] == "T"
    assert m.properties["UNIQ_KEY"] == f"U{level}" and m.properties["TAGS"] == "tg"
    assert env.run(due + 10_000_000) == 0  # delivered once
    env.close()
    assert decode_delay_offset((tmp_path / "config" / "delayOffset.json").read_text())[0][level] == 1


def test_levels_deliver_independently_and_in_order(tmp_path):
    clock = Clock()
    env = open_env(tmp_path, clock)
    for i in range(3):
        env.send("T", b"L2-%d" % i, DELAY="2")
        env.send("T", b"L1-%d" % i, DELAY="1")
        clock.advance(100)
    assert env.run(T0 + 1100) == 2  # level-1 messages stored at T0 and T0+100
    assert env.run(T0 + 5250) == 1 + 3
    assert [m.body for m in env.delivered("T")] == [b"L1-0", b"L1-1", b"L1-2", b"L2-0", b"L2-1", b"L2-2"]
    env.close()


def test_progress_survives_reopen_and_is_not_redelivered(tmp_path):
    clock = Clock()
    env = open_env(tmp_path, clock)
    env.send("T", b"a", DELAY="1")
    env.send("T", b"b", DELAY="2")
    env.run(T0 + 1000)
    env.close()
    env = open_env(tmp_path, clock)
    assert env.schedule.offset_table == {1: 1, 2: 0}
    assert env.run(T0 + 6000) == 1
    assert [m.body for m in env.delivered("T")] == [b"a", b"b"]
    env.close()


def test_delay_offset_json_is_fastjson_shaped():
    text = encode_delay_offset({2: 0, 1: 3, 3: 12}, DataVersion(0, 0, 1700000000000))
    assert text == ('{\n\t"dataVersion":{\n\t\t"counter":0,\n\t\t"stateVersion":0,\n\t\t"timestamp":1700000000000\n'
                    '\t},\n\t"offsetTable":{1:3,2:0,3:12\n\t}\n}')
    table, dv = decode_delay_offset(text)
    assert table == {1: 3, 2: 0, 3: 12} and dv == DataVersion(0, 0, 1700000000000)
    assert decode_delay_offset('{"offsetTable":{1:12,2:0,3:7}}')[0] == {1: 12, 2: 0, 3: 7}  # 4.9.x


def test_offsets_are_corrected_into_the_queue_on_load(tmp_path):
    clock = Clock()
    env = open_env(tmp_path, clock)
    env.send("T", b"a", DELAY="1")
    env.close()
    (tmp_path / "config").mkdir(exist_ok=True)
    (tmp_path / "config" / "delayOffset.json").write_text('{"offsetTable":{1:50}}')
    env = open_env(tmp_path, clock)
    assert env.schedule.offset_table[1] == 1  # clamped to the max offset of queue 0
    env.close()


def test_unparsable_delay_offset_falls_back_to_bak(tmp_path):
    clock = Clock()
    env = open_env(tmp_path, clock)
    env.send("T", b"a", DELAY="1")
    env.send("T", b"b", DELAY="1")
    env.run(T0 + 1000)
    env.schedule.persist()
    env.close()
    (tmp_path / "config" / "delayOffset.json").write_text("{garbage")
    (tmp_path / "config" / "delayOffset.json.bak").write_text('{"offsetTable":{1:2}}')
    env = open_env(tmp_path, clock)
    assert env.schedule.offset_table[1] == 2
    env.close()


def test_delay_offsets_on_a_full_disk_stay_in_memory_and_are_written_later(tmp_path, monkeypatch, caplog):
    import errno
    import logging
    import os

    from rmqtool.store.jsonconfig import read_file

    clock = Clock()
    env = open_env(tmp_path, clock)
    env.send("T", b"a", DELAY="1")
    env.run(T0 + 1000)
    real_fsync = os.fsync

    def enospc(_fd):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(os, "fsync", enospc)
    caplog.set_level(logging.WARNING)
    env.schedule.persist()  # no exception: a warning, and the offsets stay dirty
    env.schedule.persist()
    assert caplog.text.count("cannot write delayOffset.json: No space left on device") == 1
    monkeypatch.setattr(os, "fsync", real_fsync)
    env.close()  # stop() persists again, now with room
    assert read_file(tmp_path / "config" / "delayOffset.json")["offsetTable"] == {"1": 1}
