"""The golden cases: every kind in every view, plus filters and links, and verify of each store.

Regenerate after an intended change with `python -m tests.inspect.regen` (or run pytest with
RMQTOOL_REGEN_GOLDEN=1) and review the diff of tests/inspect/golden/.
"""

from __future__ import annotations

import io
import json
from pathlib import Path

from rmqtool.inspect.dissect import dissect
from rmqtool.inspect.model import Filters
from rmqtool.inspect.render import write_hex, write_json, write_table
from rmqtool.inspect.verify import check_store

GOLDEN = Path(__file__).resolve().parent / "golden"

KIND_PATHS = {
    "commitlog": "good/commitlog",
    "consumequeue": "good/consumequeue",
    "index": "good/index",
    "timerlog": "good/timerlog",
    "timerwheel": "good/timerwheel",
    "checkpoint": "good/checkpoint",
    "timercheck": "good/config/timercheck",
    "config": "good/config",
    "store": "good",
}

# name -> (kind, path under the stores dir, Filters kwargs)
CASES: dict[str, tuple[str, str, dict]] = {}
for _kind, _path in KIND_PATHS.items():
    for _view in ("json", "table", "hex"):
        _f: dict = {"limit": 12} if _kind in ("commitlog", "consumequeue", "index") and _view == "hex" else {}
        if _kind == "commitlog" and _view != "hex":
            _f = {"limit": 32}  # every message kind is among the first 32; the rest is bulk
        CASES[f"{_kind}.{_view}"] = (_kind, _path, {"view": _view, **_f})
CASES.update({
    "commitlog-topic-queue.json": ("commitlog", "good/commitlog", {"view": "json", "topic": "TopicTest", "queue": 1}),
    "commitlog-offset-limit.json": ("commitlog", "good/commitlog", {"view": "json", "offset": 4000, "limit": 3}),
    "commitlog-window.json": ("commitlog", "good/commitlog",
                              {"view": "json", "since": 1764460800050, "until": 1764460800080}),
    "commitlog-key.json": ("commitlog", "good/commitlog", {"view": "json", "key": "order-5"}),
    "commitlog-msgid-offset.json": ("commitlog", "good/commitlog",
                                    {"view": "json", "msg_id": "C0A8010A00002A9F00000000000007D1"}),
    "commitlog-follow.json": ("commitlog", "good/commitlog",
                              {"view": "json", "topic": "%RETRY%groupA", "follow": True, "body_hex": True}),
    "consumequeue-follow.json": ("consumequeue", "good/consumequeue/TopicTest/0", {"view": "json", "follow": True}),
    "consumequeue-follow.table": ("consumequeue", "good/consumequeue/TopicTest", {"view": "table", "follow": True}),
    "index-key.json": ("index", "good/index", {"view": "json", "topic": "TopicTest", "key": "order-3",
                                               "follow": True}),
    "timerwheel-follow.json": ("timerwheel", "good/timerwheel", {"view": "json", "follow": True}),
    "timerwheel-follow.hex": ("timerwheel", "good/timerwheel", {"view": "hex", "follow": True}),
    "timerlog-follow.table": ("timerlog", "good/timerlog", {"view": "table", "follow": True}),
    "commitlog-kinds.hex": ("commitlog", "good/commitlog", {"view": "hex", "offset": 2001, "limit": 9}),
    "commitlog-torn.hex": ("commitlog", "damaged-torn-tail/commitlog/00000000000000065536",
                           {"view": "hex", "offset": 76000}),
    "commitlog-badmagic.json": ("commitlog", "damaged-bad-magic/commitlog", {"view": "json", "limit": 12}),
    "commitlog-crc.table": ("commitlog", "damaged-crc-mismatch/commitlog", {"view": "table", "limit": 8}),
    "config-bad.json": ("config", "damaged-bad-config/config", {"view": "json"}),
})
# BatchConsumeQueue and ConsumeQueueExt, from the good-bcq-ext store (make_queue_fixtures.py)
for _kind, _path in (("batchconsumequeue", "good-bcq-ext"), ("consumequeue_ext", "good-bcq-ext/consumequeue_ext")):
    for _view in ("json", "table", "hex"):
        CASES[f"{_kind}.{_view}"] = (_kind, _path, {"view": _view})
CASES.update({
    "batchconsumequeue-offset.json": ("batchconsumequeue", "good-bcq-ext/batchconsumequeue/BatchTopic/0",
                                      {"view": "json", "offset": 5, "limit": 2}),
    "batchconsumequeue-follow.json": ("batchconsumequeue", "good-bcq-ext", {"view": "json", "queue": 1,
                                                                            "follow": True}),
    "batchconsumequeue-tag.table": ("batchconsumequeue", "good-bcq-ext", {"view": "table", "tag": "TagB"}),
    "consumequeue_ext-offset.hex": ("consumequeue_ext", "good-bcq-ext", {"view": "hex", "offset": 96}),
    "consumequeue-ext-addr.table": ("consumequeue", "good-bcq-ext/consumequeue", {"view": "table"}),
    "consumequeue-ext-addr.hex": ("consumequeue", "good-bcq-ext", {"view": "hex", "offset": 4, "limit": 2}),
    "consumequeue-ext-follow.json": ("consumequeue", "good-bcq-ext/consumequeue/ExtTopic/0",
                                     {"view": "json", "follow": True, "limit": 2}),
    "store-bcq-ext-topic.table": ("store", "good-bcq-ext", {"view": "table", "topic": "BatchTopic"}),
})
for _view in ("json", "table", "hex"):  # the store summary's batchqueue and queueext sections
    CASES[f"store-bcq-ext.{_view}"] = ("store", "good-bcq-ext", {"view": _view})


def render_case(stores: Path, name: str) -> str:
    kind, rel, opts = CASES[name]
    opts = dict(opts)
    view = opts.pop("view")
    f = Filters(raw=view == "hex", **opts)
    out = io.StringIO()
    items = dissect(kind, stores / rel, f)
    {"json": write_json, "hex": write_hex, "table": lambda i, o: write_table(i, o, width=200)}[view](items, out)
    return out.getvalue()


def verify_case(stores: Path, store: str) -> str:
    return "".join(json.dumps(p.to_json(), ensure_ascii=False) + "\n" for p in check_store(stores / store))


def golden_path(name: str) -> Path:
    return GOLDEN / f"{name}.txt"
