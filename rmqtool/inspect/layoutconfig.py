"""The sizes a store was written with: from `broker.conf` beside the store, else from the files.

RocketMQ keeps these in broker.conf (`mappedFileSizeCommitLog`, `mappedFileSizeConsumeQueue`,
`maxHashSlotNum`, `maxIndexNum`, `mappedFileSizeTimerLog`, `timerPrecisionMs`,
`messageDelayLevel`, `mapperFileSizeBatchConsumeQueue`, `mappedFileSizeConsumeQueueExt`), not in the store; a store copied alone is read with the sizes of its files
and RocketMQ's defaults for the rest.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from rmqtool.inspect.files import INDEX_NAME, queue_files
from rmqtool.layouts.constants import (
    BCQ_STORE_UNIT_SIZE,
    CQ_STORE_UNIT_SIZE,
    DEFAULT_BCQ_FILE_SIZE,
    DEFAULT_COMMITLOG_FILE_SIZE,
    DEFAULT_CQ_EXT_FILE_SIZE,
    DEFAULT_CQ_FILE_SIZE,
    DEFAULT_INDEX_HASH_SLOT_NUM,
    DEFAULT_INDEX_NUM,
    DEFAULT_TIMERLOG_FILE_SIZE,
    INDEX_ENTRY_SIZE,
    INDEX_HEADER_SIZE,
    INDEX_SLOT_SIZE,
)
from rmqtool.store.index import fit_index_geometry

DEFAULT_DELAY_LEVELS = "1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h"
_UNITS = {"s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}


def parse_delay_levels(text: str) -> list[int]:
    """`messageDelayLevel` to milliseconds per level (index 0 = level 1)."""
    out = []
    for tok in text.split():
        m = re.fullmatch(r"(\d+)([smhd])", tok)
        if m:
            out.append(int(m.group(1)) * _UNITS[m.group(2)])
    return out


@dataclass
class LayoutConfig:
    commitlog_file_size: int = DEFAULT_COMMITLOG_FILE_SIZE
    cq_file_size: int = DEFAULT_CQ_FILE_SIZE
    timerlog_file_size: int = DEFAULT_TIMERLOG_FILE_SIZE
    hash_slot_num: int = DEFAULT_INDEX_HASH_SLOT_NUM
    index_num: int = DEFAULT_INDEX_NUM
    timer_precision_ms: int = 1000
    bcq_file_size: int = DEFAULT_BCQ_FILE_SIZE
    cq_ext_file_size: int = DEFAULT_CQ_EXT_FILE_SIZE
    delay_levels_ms: list[int] = field(default_factory=lambda: parse_delay_levels(DEFAULT_DELAY_LEVELS))
    from_conf: set[str] = field(default_factory=set)
    index_geometry_known: bool = True  # False: the index sizes below are a guess from a file's length

    @property
    def index_file_size(self) -> int:
        return INDEX_HEADER_SIZE + self.hash_slot_num * INDEX_SLOT_SIZE + self.index_num * INDEX_ENTRY_SIZE

    def delay_ms(self, level: int) -> int:
        """`computeDeliverTimestamp`: level capped at the max; a level without entry adds 1000 ms."""
        if level > len(self.delay_levels_ms):
            level = len(self.delay_levels_ms)
        if 1 <= level <= len(self.delay_levels_ms):
            return self.delay_levels_ms[level - 1]
        return 1000


def read_properties(path: Path) -> dict[str, str]:
    """A Java .properties file, leniently (`key=value`, `#` comments)."""
    out: dict[str, str] = {}
    for line in path.read_text("utf-8", "replace").splitlines():
        line = line.strip()
        if not line or line[0] in "#!":
            continue
        m = re.match(r"([^=:\s]+)\s*[=:]\s*(.*)$", line)
        if m:
            out[m.group(1)] = m.group(2).strip()
    return out


def _first_queue_file_size(kind_dir: Path, unit: int) -> int:
    """The size of the first file of the first topic's first queue under `kind_dir` (0 if none, or
    if it is empty or not a whole number of `unit`-byte units): all of a kind's files share it."""
    if not kind_dir.is_dir():
        return 0
    for tdir in sorted(kind_dir.iterdir()):
        qdirs = sorted(tdir.iterdir()) if tdir.is_dir() else []
        files = queue_files(qdirs[0]) if qdirs else []
        size = files[0].path.stat().st_size if files else 0
        if size and size % unit == 0:
            return size
    return 0


def load_layout_config(root: Path | None) -> LayoutConfig:
    """Sizes for the store at `root`: broker.conf first, then what the files show."""
    cfg = LayoutConfig()
    if root is None:
        return cfg
    conf = root / "broker.conf"
    props: dict[str, str] = {}
    if conf.is_file():
        try:
            props = read_properties(conf)
        except OSError:
            props = {}
    ints = {
        "mappedFileSizeCommitLog": "commitlog_file_size",
        "mappedFileSizeConsumeQueue": "cq_file_size",
        "mappedFileSizeTimerLog": "timerlog_file_size",
        "maxHashSlotNum": "hash_slot_num",
        "maxIndexNum": "index_num",
        "timerPrecisionMs": "timer_precision_ms",
        "mapperFileSizeBatchConsumeQueue": "bcq_file_size",  # sic: MessageStoreConfig's spelling
        "mappedFileSizeConsumeQueueExt": "cq_ext_file_size",
    }
    for key, attr in ints.items():
        if key in props:
            try:
                setattr(cfg, attr, int(props[key]))
                cfg.from_conf.add(attr)
            except ValueError:
                pass
    if "messageDelayLevel" in props:
        levels = parse_delay_levels(props["messageDelayLevel"])
        if levels:
            cfg.delay_levels_ms = levels
    # the CQ getter rounds up to a multiple of 20
    if cfg.cq_file_size % CQ_STORE_UNIT_SIZE:
        cfg.cq_file_size += CQ_STORE_UNIT_SIZE - cfg.cq_file_size % CQ_STORE_UNIT_SIZE
    if "commitlog_file_size" not in cfg.from_conf:
        files = queue_files(root / "commitlog")
        if files and files[0].path.stat().st_size:
            cfg.commitlog_file_size = files[0].path.stat().st_size
    if "timerlog_file_size" not in cfg.from_conf:
        files = queue_files(root / "timerlog")
        if files and files[0].path.stat().st_size:
            cfg.timerlog_file_size = files[0].path.stat().st_size
    if "cq_file_size" not in cfg.from_conf:
        cfg.cq_file_size = _first_queue_file_size(root / "consumequeue", 1) or cfg.cq_file_size
    if "bcq_file_size" not in cfg.from_conf:
        cfg.bcq_file_size = _first_queue_file_size(root / "batchconsumequeue", BCQ_STORE_UNIT_SIZE) or cfg.bcq_file_size
    if not {"hash_slot_num", "index_num"} & cfg.from_conf:
        idx = root / "index"
        if idx.is_dir():
            for p in sorted(idx.iterdir()):
                if INDEX_NAME.match(p.name) and p.stat().st_size not in (0, cfg.index_file_size):
                    fitted = fit_index_geometry(p, (cfg.hash_slot_num, cfg.index_num))
                    if fitted is not None:
                        cfg.hash_slot_num, cfg.index_num = fitted
                        break
                    # unknown: keep the slot count, derive entries from the file length (a guess,
                    # good enough to read; `index_geometry_known` tells writers not to trust it)
                    cfg.index_geometry_known = False
                    rest = p.stat().st_size - INDEX_HEADER_SIZE - cfg.hash_slot_num * INDEX_SLOT_SIZE
                    if rest > 0 and rest % INDEX_ENTRY_SIZE == 0:
                        cfg.index_num = rest // INDEX_ENTRY_SIZE
                    break
    return cfg
