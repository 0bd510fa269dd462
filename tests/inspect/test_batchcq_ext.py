"""inspect and verify of BatchConsumeQueues and ConsumeQueueExt files, on the good-bcq-ext fixture store."""

from __future__ import annotations

import io
import json
import re
from pathlib import Path

from typer.testing import CliRunner

from rmqtool.cli.main import app
from rmqtool.inspect.dissect import dissect
from rmqtool.inspect.model import Filters
from rmqtool.inspect.render import write_hex
from rmqtool.inspect.verify import check_store
from rmqtool.layouts.cqext import is_ext_addr, undecorate
from rmqtool.layouts.javahash import java_string_hash

runner = CliRunner()
FORMATS = Path(__file__).resolve().parents[2] / "formats"


def _json(args: list[str]) -> list[dict]:
    result = runner.invoke(app, [*args, "--json"])
    assert result.exit_code == 0, result.output
    return [json.loads(line) for line in result.stdout.splitlines()]


def test_bcq_units_cover_every_queue_offset_of_their_records(stores):
    units = _json(["inspect", "batchconsumequeue", str(stores / "good-bcq-ext")])
    by_queue: dict[int, list[dict]] = {}
    for u in units:
        by_queue.setdefault(u["queueId"], []).append(u)
    assert {q: [(u["msgBaseOffset"], u["batchSize"]) for u in us] for q, us in by_queue.items()} == {
        0: [(0, 3), (3, 1), (4, 2), (6, 2), (8, 1)], 1: [(0, 4)]}
    assert {u["compactedOffset"] for u in units} == {-1}  # BatchConsumeQueue.INVALID_POS
    assert units[4]["path"].endswith("BatchTopic/0/00000000000000000184")  # a 4-unit file rolled over
    for u in _json(["inspect", "batchconsumequeue", str(stores / "good-bcq-ext"), "-L"]):
        m = u["message"]
        assert (m["commitLogOffset"], m["totalSize"], m["storeTimestamp"], m["queueOffset"]) == (
            u["commitLogOffset"], u["size"], u["storeTimestamp"], u["msgBaseOffset"])
        assert m["properties"].get("INNER_NUM", "1") == str(u["batchSize"])


def test_cq_ext_addresses_point_at_ext_units_holding_the_tag_hash(stores):
    cq = _json(["inspect", "consumequeue", str(stores / "good-bcq-ext"), "-L"])
    assert len(cq) == 7
    for u in cq:
        assert is_ext_addr(u["tagsCode"]) and u["extOffset"] == undecorate(u["tagsCode"])
        assert u["ext"]["extOffset"] == u["extOffset"] and u["ext"]["extAddr"] == u["tagsCode"]
        assert u["ext"]["tagsCode"] == java_string_hash(u["message"]["tags"])
        assert u["ext"]["msgStoreTime"] == u["message"]["storeTimestamp"]
    ext = _json(["inspect", "consumequeue_ext", str(stores / "good-bcq-ext")])
    assert [e.get("type") for e in ext].count("blank") == 1  # fullFillToEnd's int16 -1 before the 2nd file
    assert sorted(e["extOffset"] for e in ext if "type" not in e) == [u["extOffset"] for u in cq]


def test_the_annotated_examples_are_what_inspect_prints(stores):
    for doc, kind in (("batchconsumequeue.md", "batchconsumequeue"), ("consumequeue_ext.md", "consumequeue_ext")):
        block = re.search(r"## Annotated example.*?```\n(.*?)```", (FORMATS / doc).read_text(), re.S)
        assert block, doc
        out = io.StringIO()
        write_hex(dissect(kind, stores / "good-bcq-ext", Filters(raw=True, limit=1)), out)
        assert out.getvalue().strip() == block.group(1).strip(), doc


def test_a_store_without_them_has_none_and_unknown_kinds_name_them(stores, rmq):
    assert _json(["inspect", "batchconsumequeue", str(stores / "good")]) == []
    assert _json(["inspect", "consumequeue_ext", str(stores / "good")]) == []
    r = rmq("inspect", "nonsense", str(stores / "good"))
    assert r.returncode == 2 and b"batchconsumequeue" in r.stderr and b"consumequeue_ext" in r.stderr


def test_consumer_offsets_of_a_batchcq_queue_are_checked_against_its_batches(store_copy):
    root = store_copy("good-bcq-ext")
    co = root / "config" / "consumerOffset.json"
    text = co.read_text()
    assert '"BatchTopic@groupB":{0:5,1:4' in text  # queue 0 ends at 9, queue 1 at 4
    co.write_text(text.replace('"BatchTopic@groupB":{0:5,1:4', '"BatchTopic@groupB":{0:9,1:5'))
    problems = [p.to_json() for p in check_store(root)]
    assert [(p["kind"], p["detail"]) for p in problems] == [
        ("consumer-offset-out-of-range", "group groupB on BatchTopic/1: offset 5 outside [0, 4]")]


def test_a_damaged_ext_unit_is_reported_where_it_is(store_copy):
    root = store_copy("good-bcq-ext")
    path = root / "consumequeue_ext" / "ExtTopic" / "0" / "00000000000000000000"
    with open(path, "r+b") as fh:
        fh.seek(48)
        fh.write((5).to_bytes(2, "big"))  # a unit size below MIN_EXT_UNIT_SIZE
    kinds = {(p.path, p.pos, p.kind) for p in check_store(root)}
    assert ("consumequeue_ext/ExtTopic/0/00000000000000000000", 48, "cq-ext-unit-bad") in kinds
    assert ("consumequeue/ExtTopic/0/00000000000000000000", 40, "cq-unit-mismatch") in kinds


def test_store_summary_lists_batch_queues_and_ext_streams(stores):
    """`inspect store`: a BatchConsumeQueue's range is in messages (last msgBaseOffset + batchSize),
    consumer lag of a BatchCQ topic counts against it, and each ext stream has its byte range."""
    rows = _json(["inspect", "store", str(stores / "good-bcq-ext")])
    units = _json(["inspect", "batchconsumequeue", str(stores / "good-bcq-ext")])
    bcq = {r["queueId"]: r for r in rows if r["section"] == "batchqueue"}
    assert set(bcq) == {0, 1} and {r["topic"] for r in bcq.values()} == {"BatchTopic"}
    for qid, r in bcq.items():
        mine = [u for u in units if u["queueId"] == qid]
        assert r["maxOffset"] == mine[-1]["msgBaseOffset"] + mine[-1]["batchSize"]
        assert (r["minOffset"], r["units"]) == (0, len(mine))
        assert r["messages"] == r["maxOffset"] - r["minOffset"]
        assert r["files"] == len({u["path"] for u in mine})
    assert (bcq[0]["maxOffset"], bcq[0]["files"], bcq[1]["maxOffset"]) == (9, 2, 4)
    lag = {(r["topic"], r["queueId"]): (r["maxOffset"], r["lag"]) for r in rows if r["section"] == "consumer"}
    assert lag[("BatchTopic", 0)] == (9, 4) and lag[("BatchTopic", 1)] == (4, 0)
    ext = [r for r in rows if r["section"] == "queueext"]
    ext_units = [u for u in _json(["inspect", "consumequeue_ext", str(stores / "good-bcq-ext")])
                 if u.get("type") != "blank"]
    assert [(r["topic"], r["queueId"]) for r in ext] == [("ExtTopic", 0)]
    assert ext[0]["maxOffset"] == ext_units[-1]["extOffset"] + ext_units[-1]["size"] == 176
    assert (ext[0]["minOffset"], ext[0]["units"], ext[0]["problems"], ext[0]["files"]) == (0, len(ext_units), 0, 2)
    assert [r["section"] for r in _json(["inspect", "store", str(stores / "good-bcq-ext"), "-q", "1"])
            if r["section"] in ("batchqueue", "queueext")] == ["batchqueue"]


def test_bcq_range_min_skips_units_below_the_commitlog_min(stores):
    from rmqtool.inspect.bcq import bcq_range

    qdir = stores / "good-bcq-ext" / "batchconsumequeue" / "BatchTopic" / "0"
    units = _json(["inspect", "batchconsumequeue", str(qdir)])
    r = bcq_range(qdir, units[2]["commitLogOffset"])  # the first two units' CommitLog file expired
    assert (r.min_offset, r.max_offset, r.units) == (units[2]["msgBaseOffset"], 9, 5)
    r = bcq_range(qdir, units[-1]["commitLogOffset"] + 1)  # every unit expired: an empty queue at its end
    assert (r.min_offset, r.max_offset) == (9, 9)
