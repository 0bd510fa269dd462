"""What `rmqtool send` prints: one result per message (Java's SendResult), written once per batch.

A batch stored as records (`LocalBroker.send_bodies`) comes back as one `Stored`: its status,
queue, UNIQ_KEYs, CommitLog offsets and first queue offset; its JSON lines are formatted in one
comprehension, without a dict per message. Other sends give one dict per message (`_results`).
Both print the same text (tests/cli/test_send_bodies.py).
"""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass
from typing import Any

from rmqtool.cli import common
from rmqtool.layouts import properties as P
from rmqtool.layouts.msgid import host_hex

RESULT_COLUMNS = ["status", "msgId", "offsetMsgId", "topic", "queueId", "queueOffset"]


@dataclass(slots=True)
class Stored:
    """The results of one batch stored as records, or (`dicts`) of one sent another way."""

    status: str
    topic: str
    queue_id: int
    uniq_keys: list[str]
    offsets: list[int]
    queue_offset: int
    host_prefix: str
    dicts: list[dict[str, Any]] | None = None

    @classmethod
    def of_results(cls, results: list[dict[str, Any]]) -> Stored:
        status = next((r["status"] for r in results if r["status"] != "SEND_OK"), "SEND_OK")
        return cls(status, "", 0, [], [0] * len(results), 0, "", results)

    def results(self) -> list[dict[str, Any]]:
        if self.dicts is not None:
            return self.dicts
        topic, qid, prefix, status = self.topic, self.queue_id, self.host_prefix, self.status
        return [{"status": status, "msgId": u, "offsetMsgId": prefix + format(o, "016X"), "topic": topic,
                 "queueId": qid, "queueOffset": q}
                for u, o, q in zip(self.uniq_keys, self.offsets, range(self.queue_offset, 1 << 62), strict=False)]

    def json_lines(self) -> str:
        if self.dicts is not None:
            return "".join(map(_json_result, self.dicts))
        # the strings are a status name, a validated topic and hex ids: nothing to escape
        head = f'{{"status":"{self.status}","msgId":"'
        mid = f'","offsetMsgId":"{self.host_prefix}'
        tail = f'","topic":"{self.topic}","queueId":{self.queue_id},"queueOffset":'
        return "".join([f"{head}{u}{mid}{o:016X}{tail}{q}}}\n"
                        for u, o, q in zip(self.uniq_keys, self.offsets, range(self.queue_offset, 1 << 62),
                                           strict=False)])


def _results(puts: list[Any], topic: str, queue_ids: list[int]) -> list[dict[str, Any]]:
    """Java's SendResult of each put: the queue the producer chose, the store's queue offset and
    ids; what is the same for the whole batch (status names, the store host's hex) worked out once."""
    out = []
    names: dict[Any, str] = {}
    host: Any = None
    prefix = ""
    uniq = P.UNIQ_KEY
    for put, queue_id in zip(puts, queue_ids, strict=True):
        status = put.status
        name = names.get(status)
        if name is None:
            text = str(getattr(status, "value", status))
            name = names[status] = "SEND_OK" if text == "PUT_OK" else text
        msg = put.msg
        offset = put.wrote_offset
        if msg.store_host is not host:
            host = msg.store_host
            prefix = host_hex(host)
        offset_id = prefix + format(offset, "016X") if 0 <= offset <= 0x7FFFFFFFFFFFFFFF else put.offset_msg_id
        out.append({"status": name, "msgId": msg.properties.get(uniq) or offset_id, "offsetMsgId": offset_id,
                    "topic": topic, "queueId": queue_id, "queueOffset": put.queue_offset})
    return out


class ResultPrinter:
    """One result per message on stdout, written (and flushed) once per batch sent; `quiet`
    prints none, only a summary on stderr at the end (the fast path of a big pipe)."""

    def __init__(self, json_out: bool, quiet: bool = False) -> None:
        self.json = common.choose_format(None, json_out) == "json"
        self.quiet = quiet
        self.out = sys.stdout
        self.counts: dict[str, int] = {}
        self.t0 = time.monotonic()

    def write_stored(self, stored: list[Stored]) -> None:
        """`write` of batches stored as records: their JSON lines in one write."""
        if self.quiet or not self.json:
            for s in stored:
                self.write(s.results())
            return
        self.out.write("".join([s.json_lines() for s in stored]))
        self.out.flush()

    def write(self, results: list[dict[str, Any]]) -> None:
        if self.quiet:
            for r in results:
                self.counts[r["status"]] = self.counts.get(r["status"], 0) + 1
            return
        if not self.json:
            common.print_table(results, RESULT_COLUMNS)
            return
        self.out.write("".join(map(_json_result, results)))
        self.out.flush()

    def summary(self) -> None:
        if self.quiet:
            n = sum(self.counts.values())
            by = ", ".join(f"{k} {v}" for k, v in sorted(self.counts.items()))
            common.warn(f"send: {n} message(s) in {time.monotonic() - self.t0:.2f}s" + (f" ({by})" if by else ""))


def _json_result(r: dict[str, Any]) -> str:
    """A result as a JSON line. Its strings are a validated topic name, hex ids and status names
    (nothing to escape), so a format string writes the same text as a JSON encoder, faster."""
    if r.keys() != _RESULT_KEYS or not isinstance(r["queueOffset"], int) or not isinstance(r["queueId"], int):
        return common.json_line(r) + "\n"
    return (f'{{"status":"{r["status"]}","msgId":"{r["msgId"]}","offsetMsgId":"{r["offsetMsgId"]}",'
            f'"topic":"{r["topic"]}","queueId":{r["queueId"]},"queueOffset":{r["queueOffset"]}}}\n')


_RESULT_KEYS = {"status": 0, "msgId": 0, "offsetMsgId": 0, "topic": 0, "queueId": 0, "queueOffset": 0}.keys()
