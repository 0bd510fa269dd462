"""formats/*.md: every byte table agrees with the construct declarations in rmqtool/layouts."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from rmqtool.inspect.configs import parse_config_text
from rmqtool.inspect.fieldtree import walk
from rmqtool.layouts import batchcq, checkpoint, commitlog, consumequeue, cqext, index, timer

ROOT = Path(__file__).resolve().parents[2]
FORMATS = ROOT / "formats"
VECTORS = ROOT / "fixtures" / "vectors"
DOCS = ["commitlog.md", "consumequeue.md", "batchconsumequeue.md", "consumequeue_ext.md", "index.md", "timerlog.md",
        "timerwheel.md", "checkpoint.md", "timercheck.md", "configs.md"]
LAYOUTS = {
    "CommitLogRecord": (commitlog.CommitLogRecord, "v1_commitlog_record_TopicTest.bin"),
    "CommitLogBlank": (commitlog.CommitLogBlank, "commitlog_eof_blank.bin"),
    "CqUnit": (consumequeue.CqUnit, "cq_unit_TopicTest_0.bin"),
    "BcqUnit": (batchcq.BcqUnit, None),
    "CqExtUnit": (cqext.CqExtUnit, None),
    "IndexHeader": (index.IndexHeader, "index_header_after_2_keys.bin"),
    "IndexSlot": (index.IndexSlot, None),
    "IndexEntry": (index.IndexEntry, None),
    "TimerLogUnit": (timer.TimerLogUnit, "timerlog_unit.bin"),
    "TimerLogBlank": (timer.TimerLogBlank, None),
    "TimerSlot": (timer.TimerSlot, "timerwheel_slot.bin"),
    "StoreCheckpoint": (checkpoint.StoreCheckpoint, "checkpoint_first40.bin"),
    "TimerCheckpoint": (checkpoint.TimerCheckpoint, "timercheck_first56.bin"),
}


def tables(text: str) -> list[tuple[str, list[list[str]]]]:
    """(layout name, rows) for every `Layout: \\`Name\\`` followed by a Markdown table."""
    out = []
    for m in re.finditer(r"Layout: `(\w+)`\n\n((?:\|.*\|\n)+)", text):
        lines = m.group(2).strip().splitlines()
        header = [c.strip() for c in lines[0].strip("|").split("|")]
        assert header[:3] == ["offset", "size", "field"], header
        rows = [[c.strip() for c in line.strip().strip("|").split("|")] for line in lines[2:]]
        out.append((m.group(1), rows))
    return out


def _example(layout, vector: str | None) -> bytes:
    """A reference vector, or zeros (with the blank magic) for layouts without one."""
    if vector is not None:
        return (VECTORS / vector).read_bytes()
    if layout is timer.TimerLogBlank:
        return bytes(12) + (-875286124).to_bytes(4, "big", signed=True)
    if layout is cqext.CqExtUnit:  # with a bit map, so the variable field is walked too
        return cqext.CQ_EXT_HEAD.pack(28, 2598919, 1764460800070, 8) + bytes(range(8))
    return bytes(layout.sizeof())


@pytest.mark.parametrize("doc", DOCS)
def test_every_format_doc_exists_with_an_example(doc):
    text = (FORMATS / doc).read_text(encoding="utf-8")
    assert "## Annotated example" in text and "```" in text


@pytest.mark.parametrize("doc", [d for d in DOCS if d != "configs.md"])
def test_byte_tables_match_the_layouts(doc):
    found = tables((FORMATS / doc).read_text(encoding="utf-8"))
    assert found, f"{doc} has no checked byte table"
    for name, rows in found:
        layout, vector = LAYOUTS[name]
        nodes = walk(layout, _example(layout, vector))
        assert not any(n.error for n in nodes), name
        assert [r[2] for r in rows] == [n.name for n in nodes], f"{doc}: {name} field names/order"
        for row, node in zip(rows, nodes, strict=True):
            off, size = row[0], row[1]
            if off.isdigit():
                assert int(off) == node.offset, f"{doc}: {name}.{node.name} offset"
            if size.isdigit():
                assert int(size) == node.size, f"{doc}: {name}.{node.name} size"
        numeric = [r for r in rows if r[0].isdigit() and r[1].isdigit()]
        assert numeric, "a table whose numbers are never checked proves nothing"


def test_every_layout_is_documented():
    documented = {name for doc in DOCS for name, _ in tables((FORMATS / doc).read_text(encoding="utf-8"))}
    assert documented == set(LAYOUTS)


def test_config_examples_parse_as_fastjson_text():
    text = (FORMATS / "configs.md").read_text(encoding="utf-8")
    blocks = re.findall(r"```\n(.*?)```", text, re.S)
    assert len(blocks) == 3
    delay = parse_config_text(blocks[0])
    assert delay["offsetTable"] == {"1": 1, "3": 1}
    assert parse_config_text(blocks[1])["offsetTable"]["TopicTest@groupA"]["3"] == 0
    # the timermetrics example is what TimerMetrics writes for two TopicTest timers
    from rmqtool.store.timer.timermetrics import TimerMetrics

    m = TimerMetrics(Path("unused"))
    m.add("TopicTest", 1, 1700000000000)
    m.add("TopicTest", 1, 1700000000000)
    m.data_version.counter = 3
    assert m.to_text() == blocks[2].strip()
