"""Config JSON: our writer reproduces real fastjson 1.2.83 output byte for byte (golden files made
by tests/store/golden/FastjsonGolden.java), the reader takes it back, and persistence keeps a `.bak`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rmqtool.store.jsonconfig import Bean, DataVersion, dumps, loads, read_file, write_file
from rmqtool.store.offsets import ConsumerOffsetManager
from rmqtool.store.subscriptions import SubscriptionGroupConfig, SubscriptionGroupManager
from rmqtool.store.topics import TopicConfig, TopicConfigManager

GOLDEN = Path(__file__).parent / "golden"
TS = 1700000000000


def golden(name: str) -> str:
    return (GOLDEN / f"{name}.json").read_text(encoding="utf-8")


def offsets_manager(tmp_path: Path) -> ConsumerOffsetManager:
    m = ConsumerOffsetManager(tmp_path, clock=lambda: TS)
    for q, off in enumerate([250, 251, 250, 250]):
        m.commit_offset("groupA", "TopicTest", q, off)
    m.commit_offset("groupA", "%RETRY%groupA", 0, 0)
    return m


def test_consumer_offset_text_is_fastjsons(tmp_path):
    assert offsets_manager(tmp_path).to_text() == golden("consumerOffset")


def test_empty_tables_are_braces(tmp_path):
    assert ConsumerOffsetManager(tmp_path, clock=lambda: TS).to_text() == golden("consumerOffset_empty")
    m = ConsumerOffsetManager(tmp_path, clock=lambda: TS)
    m.offset_table["T1@g"] = {}
    assert m.to_text() == golden("consumerOffset_emptyinner")


def test_delay_offset_text_is_fastjsons():
    obj = Bean(dataVersion=DataVersion(timestamp=TS).to_bean(), offsetTable={1: 3, 2: 0, 3: 12})
    assert dumps(obj) == golden("delayOffset")


def test_topics_text_is_fastjsons(tmp_path):
    m = TopicConfigManager(tmp_path, clock=lambda: TS)
    m.table.clear()
    m.table["TopicTest"] = TopicConfig("TopicTest", 4, 4)
    m.table["DelayTopic"] = TopicConfig("DelayTopic", 2, 2, perm=7, order=True,
                                        attributes={"+message.type": "DELAY"})
    m.data_version.counter = 3
    assert m.to_text() == golden("topics")


def test_subscription_group_text_is_fastjsons(tmp_path):
    m = SubscriptionGroupManager(tmp_path, clock=lambda: TS)
    m.table = {"groupA": SubscriptionGroupConfig("groupA")}
    assert m.to_text() == golden("subscriptionGroup")


def test_string_escapes_as_fastjson():
    assert dumps({"k": 'a"b\\c/d\u00e9\u0001\t\n'}) == golden("escapes")


@pytest.mark.parametrize("name", ["consumerOffset", "delayOffset", "topics", "subscriptionGroup", "escapes",
                                  "consumerOffset_emptyinner"])
def test_reader_takes_fastjson_text_and_round_trips(name):
    text = golden(name)
    data = loads(text)
    assert isinstance(data, dict)
    if name == "consumerOffset":
        assert data["offsetTable"]["TopicTest@groupA"] == {"0": 250, "1": 251, "2": 250, "3": 250}


@pytest.mark.parametrize("text", [
    '{"offsetTable":{"T@g":{0:5,1:6}}}',          # compact fastjson
    '{"offsetTable":{"T@g":{"0":5,"1":6}}}',      # quoted keys (plain JSON)
    '{\n  "offsetTable" : {\n    "T@g" : { 0 : 5 ,\n 1: 6 }\n  }\n}',  # whitespace everywhere
    '{"offsetTable":{"T@g":{"0":5, 1:6}}}',       # mixed
])
def test_lenient_reader_variants(tmp_path, text):
    (tmp_path / "consumerOffset.json").write_text(text)
    m = ConsumerOffsetManager(tmp_path)
    assert m.load()
    assert m.query_offsets("g", "T") == {0: 5, 1: 6}


def test_digits_inside_strings_are_left_alone():
    assert loads('{"a":"{1:2}","b":{"x,3:":1}}') == {"a": "{1:2}", "b": {"x,3:": 1}}


def test_persist_keeps_bak_and_load_falls_back(tmp_path):
    f = tmp_path / "config" / "consumerOffset.json"
    m = offsets_manager(tmp_path / "config")
    m.persist()
    first = f.read_text()
    assert not (tmp_path / "config" / "consumerOffset.json.bak").exists()
    m.commit_offset("groupA", "TopicTest", 0, 999)
    m.persist()
    bak = tmp_path / "config" / "consumerOffset.json.bak"
    assert bak.read_text() == first
    assert not (tmp_path / "config" / "consumerOffset.json.tmp").exists()
    for damage in ("", "{not json", None):
        if damage is None:
            f.unlink()
        else:
            f.write_text(damage)
        m2 = ConsumerOffsetManager(tmp_path / "config")
        assert m2.load()
        assert m2.query_offset("groupA", "TopicTest", 0) == 250  # from the .bak
    bak.unlink()
    assert not ConsumerOffsetManager(tmp_path / "config").load()


def test_write_file_is_atomic_replace(tmp_path):
    f = tmp_path / "x.json"
    write_file(f, "{}")
    write_file(f, '{"a":1}')
    assert read_file(f) == {"a": 1}
    assert json.loads((tmp_path / "x.json.bak").read_text()) == {}


def test_delay_offset_writer_of_the_schedule_service_matches_fastjson():
    schedule = pytest.importorskip("rmqtool.store.schedule")
    dv = schedule.DataVersion(counter=0, state_version=0, timestamp=TS)
    assert schedule.encode_delay_offset({1: 3, 2: 0, 3: 12}, dv) == golden("delayOffset")


def test_group_and_topic_files_reuse_unchanged_entries_and_write_changed_ones(tmp_path):
    import gc

    from rmqtool.layouts.javahash import hashmap_order

    groups, topics = SubscriptionGroupManager(tmp_path), TopicConfigManager(tmp_path)
    for i in range(1600):  # past 1536 entries the Java table doubles: the order changes
        groups.find(f"g{i}", persist=False)
        topics.table[f"t{i}"] = TopicConfig(f"t{i}", 2, 2, 6)

    def uncached(m, table_key):
        whole = m.encode()
        whole[table_key] = {n: m.table[n].to_bean() for n in hashmap_order(list(m.table), 2048)}
        return dumps(whole)

    assert groups.to_text() == uncached(groups, "subscriptionGroupTable")
    assert topics.to_text() == uncached(topics, "topicConfigTable")
    groups.table["g3"].retry_max_times = 3  # changed in place: the cached text must not be reused
    groups.table["g4"].attributes["k"] = "v"
    groups.table["g5"].group_retry_policy["customizedRetryPolicy"] = {"max": 9}
    topics.table["t5"].perm = 4
    del groups.table["g6"]
    text = groups.to_text()
    assert text == uncached(groups, "subscriptionGroupTable") and '"g6"' not in text
    assert '"retryMaxTimes":3' in text and '"k":"v"' in text and '"max":9' in text
    groups.table["g5"].group_retry_policy["customizedRetryPolicy"]["max"] = 10  # a nested change
    assert '"max":10' in groups.to_text()
    assert topics.to_text() == uncached(topics, "topicConfigTable")
    # the entries' texts are strings only: nothing the garbage collector scans
    assert not gc.is_tracked(groups._texts._lines) and not gc.is_tracked(groups._texts._spread)


def test_an_entry_that_fails_to_encode_is_made_again_next_time(tmp_path, monkeypatch):
    """The writer encodes while handlers change the tables; an encode that meets an entry changing
    under it fails and is run again, and that entry must not come back with its old text."""
    topics = TopicConfigManager(tmp_path)
    topics.table["t"] = TopicConfig("t", 2, 2, 6)
    topics.to_text()
    topics.table["t"].perm = 4
    real = TopicConfig.to_bean

    def changing(self):
        raise RuntimeError("dictionary changed size during iteration")

    monkeypatch.setattr(TopicConfig, "to_bean", changing)
    with pytest.raises(RuntimeError):
        topics.to_text()
    monkeypatch.setattr(TopicConfig, "to_bean", real)
    assert loads(topics.to_text())["topicConfigTable"]["t"]["perm"] == 4
