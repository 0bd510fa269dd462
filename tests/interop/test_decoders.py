"""Issue 2, Done when: a store rmqtool wrote is read correctly by readers that are not ours.

The readers are Apache RocketMQ's `MessageDecoder.decode(..., checkCRC=true)` (rocketmq-common
5.3.3 from Maven Central) and ali-ons' `message_decoder.decode` (npm ali-ons 3.12.0), each walking
the CommitLog files exactly as they lie on disk. Every field they report is compared with what
was sent and with the record's position in the log.
"""

from __future__ import annotations

import base64
import json
import zlib
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from rmqtool.layouts.constants import COMPRESSED_FLAG
from rmqtool.layouts.message import MessageExt, body_crc, compress_body
from rmqtool.layouts.msgid import create_offset_msg_id, decode_offset_msg_id
from rmqtool.layouts.net import Host

from .commitlog_writer import write_commitlog
from .harness import (
    decode_with_ali_ons,
    decode_with_apache,
    has_module,
    require_java,
    require_node,
)

pytestmark = pytest.mark.interop

LONG_RETRY_TOPIC = "%RETRY%" + "interop_group_with_a_long_name_" * 5  # > 127 bytes: v2 magic
BIG_TEXT = ("RocketMQ 日本語 ünïcödé " * 300).encode("utf-8")  # > 4 KiB, compressible


@dataclass
class Sent:
    """One message as a producer handed it over."""

    topic: str
    body: bytes
    tags: str | None = None
    keys: list[str] = field(default_factory=list)
    properties: dict[str, str] = field(default_factory=dict)
    compress: bool = False
    queue_id: int = 0
    born_host: Host | None = Host("127.0.0.1", 54321)  # None: whatever the sender's socket was
    store_host: Host | None = Host("127.0.0.1", 10911)
    flag: int = 0

    def user_properties(self) -> dict[str, str]:
        out = dict(self.properties)
        if self.tags is not None:
            out["TAGS"] = self.tags
        if self.keys:
            out["KEYS"] = " ".join(self.keys)
        return out


def cases() -> list[Sent]:
    """Everything a store holds that a reader could get wrong."""
    return [
        Sent("TopicTest", b"hello interop", tags="TagA", keys=["k1"], properties={"color": "blue"}),
        Sent("TopicTest", "Grüße, 世界 🎉".encode(), tags="标签", keys=["ключ", "k2"],
             properties={"note": "naïve 値", "empty-ish": " "}, queue_id=1),
        Sent("TopicTest", bytes(range(256)) * 3, tags="bin", queue_id=2, flag=7),
        Sent("TopicTest", BIG_TEXT, tags="big", keys=["big-1"], compress=True, queue_id=3),
        Sent("Other_Topic-1", b"x", queue_id=0),
        *[Sent("TopicTest", f"msg {i}".encode(), tags=f"T{i % 3}", keys=[f"key{i}"], queue_id=i % 4)
          for i in range(40)],
        Sent(LONG_RETRY_TOPIC, b"retry body", tags="TagR",
             properties={"RETRY_TOPIC": "TopicTest", "ORIGIN_MESSAGE_ID": "7F00000100002A9F0000000000000000"}),
        Sent("TopicTest", b"born over IPv6", tags="v6", born_host=Host("::1", 40000)),
    ]


def to_message(sent: Sent, now_ms: int) -> MessageExt:
    body, sys_flag = sent.body, 0
    if sent.compress:
        body, sys_flag = compress_body(sent.body, "zlib")
    props = sent.user_properties()
    props["CLUSTER"] = "DefaultCluster"
    return MessageExt(topic=sent.topic, body=body, queue_id=sent.queue_id, flag=sent.flag, properties=props,
                      sys_flag=sys_flag, born_timestamp=now_ms, born_host=sent.born_host,
                      store_timestamp=now_ms + 1, store_host=sent.store_host)


def check_log_walk(records: list[dict], file_size: int | None) -> None:
    """Offsets agree with the walk: records back to back, queue offsets 0,1,2.. per queue, msgId."""
    pos, queue_next = 0, {}
    for r in records:
        if "blank" in r:
            assert r["blank"] == pos
            if file_size:
                assert r["size"] == file_size - pos % file_size
            pos += r["size"]
            continue
        if "skipped" in r:
            continue
        assert r["commitLogOffset"] == pos, r
        key = (r["topic"], r["queueId"])
        assert r["queueOffset"] == queue_next.get(key, 0), r
        queue_next[key] = r["queueOffset"] + 1
        assert r["msgId"] == create_offset_msg_id(Host.parse(r["storeHost"]), r["commitLogOffset"])
        pos += r["storeSize"]


def check_against_sent(sent: list[Sent], records: list[dict], *, reader: str) -> None:
    """Every field a reader reports is what was sent (body, tags, keys, properties, hosts, flags)."""
    assert not [r for r in records if "error" in r], records
    messages = [r for r in records if "topic" in r]
    skipped = [r for r in records if "skipped" in r]
    expected = [s for s in sent if reader == "apache" or (len(s.topic.encode()) <= 127
                                                          and ":" not in (s.born_host or Host("", 0)).ip)]
    assert len(messages) == len(expected), (len(messages), len(expected))
    assert len(messages) + len(skipped) == len(sent)
    for s, r in zip(expected, messages, strict=True):
        body = base64.b64decode(r["bodyBase64"])
        assert r["topic"] == s.topic
        assert body == s.body, f"{reader}: body of {s.topic} differs"
        assert r["queueId"] == s.queue_id
        assert r["flag"] == s.flag
        assert r["tags"] == s.tags
        assert (r["keys"] or None) == (" ".join(s.keys) or None)
        props = {k: v for k, v in r["properties"].items() if v is not None}
        for k, v in s.user_properties().items():
            assert props.get(k) == v, f"{reader}: property {k!r} of {s.topic}"
        if s.born_host is not None:
            assert r["bornHost"].replace("0:0:0:0:0:0:0:1", "::1") == f"{s.born_host.ip}:{s.born_host.port}"
        if s.store_host is not None:
            assert r["storeHost"] == f"{s.store_host.ip}:{s.store_host.port}"
        assert r["bornTimestamp"] <= r["storeTimestamp"]
        assert r["reconsumeTimes"] == 0 and r["preparedTransactionOffset"] == 0
        compressed_on_disk = bool(r["sysFlag"] & COMPRESSED_FLAG) or (reader == "apache" and s.compress)
        assert compressed_on_disk == s.compress
        if not s.compress:
            assert r["bodyCRC"] == body_crc(s.body)
        else:
            stored = zlib.compress(s.body)  # only to show the CRC is of the stored, compressed bytes
            assert len(stored) < len(s.body)


@pytest.fixture
def encoded_log(tmp_path: Path) -> tuple[Path, list[Sent], int]:
    """A CommitLog written by rmqtool's record codec alone, in small files so blanks occur."""
    sent = cases()
    file_size = 2048
    write_commitlog(tmp_path / "commitlog", [to_message(s, 1_796_000_000_000 + i) for i, s in enumerate(sent)],
                    file_size)
    assert len(list((tmp_path / "commitlog").iterdir())) > 2
    return tmp_path / "commitlog", sent, file_size


def test_apache_message_decoder_reads_records_rmqtool_encoded(encoded_log, tmp_path):
    require_java()
    log, sent, file_size = encoded_log
    code, records = decode_with_apache(log, tmp_path)
    assert code == 0, records[-3:]
    check_log_walk(records, file_size)
    check_against_sent(sent, records, reader="apache")
    assert any(r.get("blank") for r in records)


def test_ali_ons_decoder_reads_records_rmqtool_encoded(encoded_log):
    require_node()
    log, sent, file_size = encoded_log
    code, records = decode_with_ali_ons(log)
    assert code == 0, records[-3:]
    check_log_walk(records, file_size)
    check_against_sent(sent, records, reader="ali-ons")
    assert len([r for r in records if "skipped" in r]) == 2  # the v2-magic and the IPv6 record


def test_apache_decoder_refuses_a_flipped_body_byte(encoded_log, tmp_path):
    """The CRC check is really on: one changed body byte makes Apache's decoder refuse the record."""
    require_java()
    log, _, _ = encoded_log
    first = sorted(log.iterdir())[0]
    raw = bytearray(first.read_bytes())
    body_at = raw.index(b"hello interop")
    raw[body_at] ^= 0x01
    first.write_bytes(bytes(raw))
    code, records = decode_with_apache(log, tmp_path)
    assert code == 1
    assert records[-1].get("error") and records[-1]["offset"] == 0


# --- the real thing: a store written by `rmqtool send` (and the store API for what send cannot say) ---

def send_cases() -> list[Sent]:
    """What `rmqtool send` takes on its command line: text bodies, tags, keys, properties."""
    auto = {"born_host": None, "store_host": None}
    return [
        Sent("TopicTest", b"hello interop", tags="TagA", keys=["k1"], properties={"color": "blue"}, **auto),
        Sent("TopicTest", "Grüße, 世界 🎉".encode(), tags="标签", keys=["ключ", "k2"],
             properties={"note": "naïve 値"}, queue_id=1, **auto),
        Sent("TopicTest", BIG_TEXT, tags="big", keys=["big-1"], queue_id=3, **auto),
        Sent("Other_Topic-1", b"x", queue_id=0, **auto),
    ]


def rmqtool_send(rmq, store: Path, s: Sent) -> dict:
    args = ["send", s.topic, s.body.decode("utf-8"), "--store", str(store)]
    if s.tags:
        args += ["--tag", s.tags]
    for k in s.keys:
        args += ["--key", k]
    for k, v in s.properties.items():
        args += ["--property", f"{k}={v}"]
    if s.queue_id is not None:
        args += ["--queue", str(s.queue_id)]
    p = rmq(*args)
    assert p.returncode == 0, p.stderr.decode(errors="replace")
    (result,) = [json.loads(line) for line in p.stdout.decode().splitlines() if line.strip()]
    assert result["status"] == "SEND_OK"
    return result


def put_with_store_api(store: Path, extra: list[Sent]) -> None:
    """Binary, compressed and v2-magic (%RETRY% over 127 bytes) records, as a broker would put them."""
    from rmqtool.store.messagestore import MessageStore

    store_obj = MessageStore.open(store)
    try:
        for s in extra:
            body, sys_flag = (compress_body(s.body, "zlib") if s.compress else (s.body, 0))
            store_obj.put_message(MessageExt(topic=s.topic, body=body, queue_id=s.queue_id, flag=s.flag,
                                             properties=s.user_properties(), sys_flag=sys_flag,
                                             born_timestamp=store_obj.clock(), born_host=Host("127.0.0.1", 54321)))
    finally:
        store_obj.close()


@pytest.mark.skipif(not has_module("rmqtool.cli.send"), reason="rmqtool.cli.send is not on this branch yet")
def test_external_decoders_read_a_store_written_by_rmqtool_send(tmp_path, rmq):
    store = tmp_path / "store"
    sent = send_cases()
    results = [rmqtool_send(rmq, store, s) for s in sent]
    lines = [f"line {i} ✓" for i in range(30)]
    p = rmq("send", "TopicLines", "--store", str(store), "--tag", "L", input="\n".join(lines) + "\n")
    assert p.returncode == 0, p.stderr
    line_results = [json.loads(x) for x in p.stdout.splitlines() if x.strip()]
    assert len(line_results) == len(lines)
    for text, res in zip(lines, line_results, strict=True):
        sent.append(Sent("TopicLines", text.encode(), tags="L", queue_id=res["queueId"], born_host=None,
                         store_host=None))
    results += line_results
    if has_module("rmqtool.store.messagestore"):
        extra = [
            Sent("TopicTest", bytes(range(256)) * 3, tags="bin", queue_id=2, flag=7, store_host=None),
            Sent("TopicTest", BIG_TEXT * 2, tags="zipped", keys=["z"], compress=True, queue_id=0, store_host=None),
            Sent(LONG_RETRY_TOPIC, b"retry body", tags="TagR", store_host=None,
                 properties={"RETRY_TOPIC": "TopicTest", "ORIGIN_MESSAGE_ID": "7F00000100002A9F0000000000000000"}),
        ]
        put_with_store_api(store, extra)
        sent += extra
    for s, res in zip(sent[: len(results)], results, strict=True):  # queues the sender chose
        assert s.queue_id in (None, res["queueId"])
        s.queue_id = res["queueId"]

    for reader in ("apache", "ali-ons"):
        if reader == "apache":
            require_java()
            code, records = decode_with_apache(store / "commitlog", tmp_path)
        else:
            require_node()
            code, records = decode_with_ali_ons(store / "commitlog")
        assert code == 0, records[-3:]
        check_log_walk(records, None)
        check_against_sent(sent, records, reader=reader)
        by_offset = {r["commitLogOffset"]: r for r in records if "topic" in r}
        for res in results:
            rec = by_offset[decode_offset_msg_id(res["offsetMsgId"]).commit_log_offset]
            assert (rec["topic"], rec["queueId"], rec["queueOffset"]) == (res["topic"], res["queueId"],
                                                                          res["queueOffset"])
            assert rec["msgId"] == res["offsetMsgId"]
            assert rec["properties"]["UNIQ_KEY"] == res["msgId"]
