"""What verify reports: one `Problem` per finding, with a stable kebab-case `kind`.

Kinds (stable names, scripts match on them):

- CommitLog: `bad-magic`, `crc-mismatch`, `size-mismatch`, `torn-tail`, `phys-offset-mismatch`,
  `blank-size-mismatch`, `nonzero-after-blank`, `missing-blank`, `gap-between-files`,
  `file-size-mismatch`, `unreadable-file`
- ConsumeQueue and BatchConsumeQueue: `cq-unit-mismatch`, `cq-gap`, `cq-missing-units`
- ConsumeQueueExt: `cq-ext-unit-bad`
- IndexFile: `index-header-bad`, `index-entry-bad`
- Timer store: `timerlog-unit-bad`, `wheel-slot-mismatch`, `timerwheel-size-bad`
- Any directory a broker loads by file name (commitlog/, each ConsumeQueue, BatchConsumeQueue and
  ConsumeQueueExt queue, timerlog/, index/): `bad-file-name` for a stray file (inspect/strays.py)
- Checkpoints and configs: `checkpoint-ahead`, `timercheck-ahead`, `config-unparsable`,
  `delay-offset-out-of-range`, `consumer-offset-out-of-range`
- POP revive log (rmq_sys_REVIVE_LOG_*, also while parked on the timer topic):
  `revive-record-unparsable`, `revive-ck-bad-offset`
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class Problem:
    """One finding: `file` is the file's name, `path` the file relative to the store root."""

    path: str
    pos: int
    kind: str
    detail: str

    @property
    def file(self) -> str:
        return self.path.rsplit("/", 1)[-1]

    def to_json(self) -> dict[str, Any]:
        return {"file": self.file, "path": self.path, "pos": self.pos, "kind": self.kind, "detail": self.detail}


KINDS = (
    "bad-magic", "crc-mismatch", "size-mismatch", "torn-tail", "phys-offset-mismatch", "blank-size-mismatch",
    "nonzero-after-blank", "missing-blank", "gap-between-files", "file-size-mismatch", "bad-file-name",
    "unreadable-file", "cq-unit-mismatch", "cq-gap", "cq-missing-units", "cq-ext-unit-bad", "index-header-bad",
    "index-entry-bad", "timerlog-unit-bad", "wheel-slot-mismatch", "timerwheel-size-bad",
    "checkpoint-ahead", "timercheck-ahead", "config-unparsable", "delay-offset-out-of-range",
    "consumer-offset-out-of-range", "revive-record-unparsable", "revive-ck-bad-offset",
)
