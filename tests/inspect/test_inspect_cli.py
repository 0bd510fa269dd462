"""The inspect command end to end, and the fast JSON path against the general one."""

from __future__ import annotations

import json

from rmqtool.inspect.commitlog import scan_commitlog
from rmqtool.inspect.dissect import message_fields
from rmqtool.inspect.fastjson_record import fast_message_fields
from rmqtool.inspect.files import ReadOnlyFile, queue_files
from rmqtool.inspect.timercheck import check_timerlog_units, check_wheel_slots
from rmqtool.layouts.message import Blank, RecordError, body_crc, decode_record


def test_fast_json_fields_equal_the_general_ones_on_every_fixture_record(stores):
    checked = 0
    for qf in queue_files(stores / "good" / "commitlog"):
        with ReadOnlyFile(qf.path) as rof:
            pos = 0
            while True:
                try:
                    msg = decode_record(rof.buf, pos, rof.size, check_crc=False)
                except (Blank, RecordError):  # the blank, or the zero tail of the last file
                    break
                fast = fast_message_fields(rof.buf, pos, rof.size)
                if msg.sys_flag & 1:
                    assert fast is None  # compressed bodies take the general path
                else:
                    assert fast is not None
                    assert fast == (msg.total_size, message_fields(msg, crc_ok=body_crc(msg.body) == msg.body_crc))
                    checked += 1
                pos += msg.total_size
    assert checked > 80


def test_json_is_the_default_when_stdout_is_not_a_terminal(stores, rmq):
    r = rmq("inspect", "commitlog", str(stores / "good"), "--limit", "2")
    assert r.returncode == 0, r.stderr
    lines = [json.loads(x) for x in r.stdout.splitlines()]
    assert [x["pos"] for x in lines] == [0, 221]
    assert lines[0]["file"] == "00000000000000000000" and lines[0]["path"] == "commitlog/00000000000000000000"
    assert r.stderr == b"", "no progress bar when stderr is not a terminal"


def test_msg_id_finds_the_record_by_offset_and_by_uniq_key(stores, rmq):
    r = rmq("inspect", "commitlog", str(stores / "good"), "--msg-id", "C0A8010A00002A9F00000000000007D1")
    [rec] = [json.loads(x) for x in r.stdout.splitlines()]
    assert rec["commitLogOffset"] == 2001 and rec["topic"] == "BinaryTopic"
    r2 = rmq("inspect", "commitlog", str(stores / "good"), "--msg-id", rec["msgId"])
    assert [json.loads(x)["commitLogOffset"] for x in r2.stdout.splitlines()] == [2001]


def test_time_window_in_iso_form(stores, rmq):
    r = rmq("inspect", "commitlog", str(stores / "good"), "--since", "2025-11-30T00:00:00.050Z",
            "--until", "2025-11-30T00:00:00.080Z")
    ts = [json.loads(x)["storeTimestamp"] for x in r.stdout.splitlines()]
    assert ts and all(1764460800050 <= t < 1764460800080 for t in ts)


def test_bad_kind_and_bad_time_exit_2_without_traceback(stores, rmq):
    for args in (("inspect", "nonsense", str(stores / "good")),
                 ("inspect", "commitlog", str(stores / "good"), "--since", "yesterday"),
                 ("inspect", "commitlog", str(stores / "good"), "--format", "xml")):
        r = rmq(*args)
        assert r.returncode == 2, (args, r.stderr)
        assert b"Traceback" not in r.stderr


def test_hex_view_of_a_damaged_record_shows_the_fields_before_the_damage(stores, rmq):
    r = rmq("inspect", "commitlog", str(stores / "damaged-bad-magic" / "commitlog"), "--format", "hex",
            "--offset", "2001")
    out = r.stdout.decode()
    assert "problem (bad-magic)" in out
    assert "magicCode: -559038737" in out or "magicCode: 0xdeadbeef" in out


def test_timer_check_functions_report_clean_and_damaged_stores(stores, manifest):
    assert list(check_timerlog_units(stores / "good")) == []
    assert list(check_wheel_slots(stores / "good")) == []
    bad_unit = list(check_timerlog_units(stores / "damaged-timerlog-unit-bad"))
    want = manifest["damaged-timerlog-unit-bad"]
    assert [(p.path, p.pos, p.kind) for p in bad_unit] == [(want["path"], want["pos"], want["kind"])]
    bad_slot = list(check_wheel_slots(stores / "damaged-wheel-slot-mismatch"))
    want = manifest["damaged-wheel-slot-mismatch"]
    assert (bad_slot[0].path, bad_slot[0].pos, bad_slot[0].kind) == (want["path"], want["pos"], want["kind"])


def test_scan_counts_queues_like_the_consume_queues(stores):
    from rmqtool.inspect.commitlog import ScanResult

    res = ScanResult()
    assert list(scan_commitlog(queue_files(stores / "good" / "commitlog"), stores / "good", result=res)) == []
    assert res.queues[("TopicTest", 0)].max_queue_offset == 2
    assert res.queues[("BulkTopic", 1)].count == 30
    assert ("TxTopic", 0) in res.queues  # the COMMIT record, not the PREPARED one
    assert res.queues[("TxTopic", 0)].count == 1


def test_fast_property_parser_equals_decode_properties():
    from hypothesis import given, settings
    from hypothesis import strategies as st

    from rmqtool.inspect.fastjson_record import _props
    from rmqtool.layouts.properties import decode_properties

    @settings(max_examples=500, deadline=None)
    @given(st.text(alphabet="ab\x01\x02é", max_size=40))
    def check(text):
        assert _props(text) == decode_properties(text)

    check()


def test_cli_json_output_is_byte_identical_to_the_golden_library_output(stores, rmq):
    from tests.inspect.golden_cases import golden_path

    r = rmq("inspect", "commitlog", str(stores / "good" / "commitlog"), "--limit", "32")
    assert r.returncode == 0
    assert r.stdout.decode("utf-8") == golden_path("commitlog.json").read_text(encoding="utf-8")


def test_timermetrics_rows_and_a_broken_timermetrics_is_reported(store_copy, rmq):
    root = store_copy("good")
    (root / "config" / "timermetrics").write_text(
        '{"dataVersion":{"counter":4,"stateVersion":0,"timestamp":1700000000000},'
        '"timingCount":{"TopicTest":{"count":3,"timeStamp":1700000000001}}}')
    r = rmq("inspect", "config", str(root / "config" / "timermetrics"))
    assert r.returncode == 0, r.stderr
    [row] = [json.loads(x) for x in r.stdout.splitlines()]
    assert (row["topic"], row["count"], row["timeStamp"]) == ("TopicTest", 3, 1700000000001)
    (root / "config" / "timermetrics").write_text('{"timingCount":{')
    r = rmq("verify", str(root))
    assert r.returncode == 1
    [bad] = [json.loads(x) for x in r.stdout.splitlines() if b"timermetrics" in x]
    assert bad["kind"] == "config-unparsable" and bad["file"].endswith("timermetrics")
