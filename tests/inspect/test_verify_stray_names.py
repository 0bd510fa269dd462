"""verify reports a stray file in every directory a broker loads by name, as it does in commitlog/."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from rmqtool.cli.main import app
from rmqtool.inspect.verify import check_store

runner = CliRunner()

OFFSET = "files are named by the 20-digit offset of their first byte (00000000000000000000, ...); "
INDEX = "index files are named by their creation time, yyyyMMddHHmmssSSS (17 digits); "
OURS = "; rmqtool will not open the store either"
TIMER = "with timerWheelEnable=true (the default) "
EXT = "with enableConsumeQueueExt=true "


def _size(n: int, want: int) -> str:
    return f"a broker refuses to start: MappedFileQueue.load takes every file and this one is {n} bytes, not {want}"


def test_a_stray_file_in_each_directory_is_one_bad_file_name(store_copy):
    # good-bcq-ext has every kind of queue; broker.conf sizes: CommitLog 65536, CQ 1000, BCQ 184,
    # ext 128, TimerLog 1056, index 16 slots x 40 entries (904 bytes)
    s = store_copy("good-bcq-ext")
    (s / "commitlog" / "junk.txt").write_bytes(b"hi\n")
    (s / "consumequeue" / "ExtTopic" / "0" / "0.bak").write_bytes(b"x")
    (s / "batchconsumequeue" / "BatchTopic" / "0" / "notes").write_bytes(b"x")
    (s / "consumequeue_ext" / "ExtTopic" / "0" / "123").write_bytes(b"x")
    (s / "index" / "junk").write_bytes(b"x")
    (s / "index" / "123").write_bytes(b"x")
    (s / "timerlog").mkdir(exist_ok=True)
    (s / "timerlog" / "junk.txt").write_bytes(b"hi")
    got = [(p.path, p.pos, p.kind, p.detail) for p in check_store(s)]
    assert got == [
        ("commitlog/junk.txt", 0, "bad-file-name", "CommitLog " + OFFSET + _size(3, 65536) + OURS),
        ("consumequeue/ExtTopic/0/0.bak", 0, "bad-file-name", "ConsumeQueue " + OFFSET + _size(1, 1000) + OURS),
        ("batchconsumequeue/BatchTopic/0/notes", 0, "bad-file-name",
         "BatchConsumeQueue " + OFFSET + _size(1, 184)),
        ("index/123", 0, "bad-file-name", INDEX + "a broker's IndexService.load opens it as an index file anyway "
         "(mapping it to 904 bytes grows a shorter file); rmqtool skips it"),
        ("index/junk", 0, "bad-file-name", INDEX + "a broker's IndexService.load skips it (its name is not a number)"),
        ("consumequeue_ext/ExtTopic/0/123", 0, "bad-file-name",
         "ConsumeQueueExt " + OFFSET + EXT + _size(1, 128)),
        ("timerlog/junk.txt", 0, "bad-file-name", "TimerLog " + OFFSET + TIMER + _size(2, 1056) + OURS),
    ]


def test_what_a_broker_makes_of_a_stray_depends_on_its_size_and_name(store_copy):
    s = store_copy("good")  # CQ files are 1000 bytes, CommitLog 65536
    q = s / "consumequeue" / "TopicTest" / "1"
    (q / ".keep").write_bytes(b"")  # empty, but sorts first: the size check fails
    (q / "copy").write_bytes(bytes(1000))  # full size: Long.parseLong("copy") throws
    (q / "1000").write_bytes(bytes(1000))  # full size, a number: Java loads it at offset 1000
    (q / "zzz").write_bytes(b"")  # empty and last: deleted at load
    (s / "index" / "sub").mkdir()
    got = [(p.path, p.detail) for p in check_store(s) if p.kind == "bad-file-name"]
    cq = "ConsumeQueue " + OFFSET
    assert got == [
        ("consumequeue/TopicTest/1/.keep", cq + _size(0, 1000) + OURS),
        ("consumequeue/TopicTest/1/1000", cq + "a broker loads it as the ConsumeQueue file at offset 1000" + OURS),
        ("consumequeue/TopicTest/1/copy", cq + "a broker refuses to start: MappedFileQueue.load takes every file "
         "and Long.parseLong fails on this name" + OURS),
        ("consumequeue/TopicTest/1/zzz", cq + "it is empty and sorts last, so a broker's MappedFileQueue.load deletes it"),
        ("index/sub", INDEX + "it is a directory: a broker's IndexService.load cannot open it and the broker refuses "
         "to start"),
    ]
    assert [p for p in check_store(s) if p.kind != "bad-file-name"] == []


def test_verify_cli_prints_the_stray_timerlog_file_and_exits_1(store_copy):
    s = store_copy("good")
    (s / "timerlog" / "junk.txt").write_bytes(b"hi")
    result = runner.invoke(app, ["verify", str(s)])
    assert result.exit_code == 1
    lines = [json.loads(line) for line in result.stdout.splitlines()]
    assert [(x["file"], x["path"], x["pos"], x["kind"]) for x in lines] == [
        ("junk.txt", "timerlog/junk.txt", 0, "bad-file-name")]
    assert "a broker refuses to start" in lines[0]["detail"]
