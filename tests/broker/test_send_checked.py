"""SEND_MESSAGE_V2 through serve's request path (`Connection.data_received` -> controller ->
`process_send` -> `LocalBroker.send_checked`) answers exactly as it did when the handler
called `LocalBroker.send`, whose `check` repeated the handler's checks: the same codes and
remarks for every send either refuses, the same answer for those both store. The library's
`LocalBroker.send` keeps every check of its own."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from rmqtool.broker.controller import BrokerController
from rmqtool.errors import InvalidMessage, InvalidTopic
from rmqtool.layouts.message import MessageExt
from rmqtool.layouts.net import Host
from rmqtool.remoting.command import RemotingCommand, decode_frame
from rmqtool.remoting.transport import Connection
from rmqtool.store.config import StoreConfig
from rmqtool.store.local import LocalBroker


class _Transport:
    def __init__(self) -> None:
        self.out: list[bytes] = []

    def write(self, data: bytes) -> None:
        self.out.append(data)

    def writelines(self, data: Any) -> None:
        self.out.append(b"".join(data))

    def is_closing(self) -> bool:
        return False

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return ("127.0.0.1", 40001) if name in ("peername", "sockname") else default

    def close(self) -> None:
        pass


def _frame(i: int, topic: str, props: str, body: bytes = b"hello", queue_id: int = 0) -> bytes:
    ext = {"a": "pg", "b": topic, "c": "TBW102", "d": "4", "e": str(queue_id), "f": "0", "g": "1700000000000",
           "h": "0", "i": props, "j": "0", "k": "false", "m": "false", "n": "broker-a", "bname": "broker-a"}
    cmd = RemotingCommand.request(310, ext, body)
    cmd.opaque = i
    return cmd.encode()


UNIQ = "UNIQ_KEY\x017F0000010001000000000000000000{:02X}"
CASES = [
    ("ok", "SC_Topic", UNIQ + "\x02WAIT\x01true", b"hello", 0),
    ("auto-created", "SC_NewTopic", UNIQ, b"hello", 1),
    ("TBW102", "TBW102", UNIQ, b"hello", 0),
    ("rmq_sys_ topic", "rmq_sys_SC", UNIQ, b"hello", 0),
    ("empty body", "SC_Topic", UNIQ, b"", 0),
    ("separator in a value", "SC_Topic", UNIQ + "\x02K\x01a\x01b", b"hello", 0),
    ("properties too long", "SC_Topic", UNIQ + "\x02P\x01" + "p" * 33000, b"hello", 0),
    ("queue out of range", "SC_Topic", UNIQ, b"hello", 9),
    ("not allowed topic", "SCHEDULE_TOPIC_XXXX", UNIQ, b"hello", 0),
    ("bad topic name", "SC bad", UNIQ, b"hello", 0),
    ("body too big", "SC_Topic", UNIQ, b"x" * (4 * 1024 * 1024 + 1), 0),
]


async def _answers(root: Path) -> list[tuple[int, str | None, dict[str, str]]]:
    local = LocalBroker.open(root, StoreConfig(flush_disk_type="ASYNC_FLUSH"))
    ctl = BrokerController(local, Host("127.0.0.1", 10911))
    try:
        local.topics.create_in_send("SC_Topic", 4, 0)
        conn = Connection(ctl.handle)
        transport = _Transport()
        conn.connection_made(transport)  # type: ignore[arg-type]
        for i, (_why, topic, props, body, qid) in enumerate(CASES):
            conn.data_received(_frame(i, topic, props.format(i), body, qid))
        await asyncio.sleep(0)
        got = [decode_frame(raw[4:]) for raw in transport.out]
        assert [r.opaque for r in got] == list(range(len(CASES)))
        return [(r.code, r.remark, r.ext_fields) for r in got]
    finally:
        ctl.executor.shutdown(wait=False)
        local.close()


def test_serve_answers_every_send_as_with_the_library_checks(tmp_path, monkeypatch):
    now = asyncio.run(_answers(tmp_path / "checked"))
    with monkeypatch.context() as m:  # the handler calling `send`, every check made twice
        m.setattr(LocalBroker, "send_checked", LocalBroker.send)
        before = asyncio.run(_answers(tmp_path / "send"))
    assert now == before
    codes = {why: answer[0] for (why, *_), answer in zip(CASES, now, strict=True)}
    assert codes["ok"] == codes["auto-created"] == 0
    assert [why for why, code in codes.items() if code == 0] == ["ok", "auto-created"], now
    ok = now[0][2]  # SendMessageResponseHeader of the first send, as `_send_ok` writes it
    assert list(ok) == ["msgId", "queueId", "queueOffset", "transactionId", "MSG_REGION", "TRACE_ON"]
    assert (ok["queueId"], ok["queueOffset"], ok["transactionId"]) == ("0", "0", UNIQ.format(0)[9:])
    assert len(ok["msgId"]) == 32 and now[1][2]["queueId"] == "1"


@pytest.mark.parametrize("why", ["TBW102", "empty body", "separator", "queue", "auto-create off"])
def test_the_library_send_keeps_its_checks(tmp_path, why):
    with LocalBroker.open(tmp_path / "s") as local:
        local.topics.create_in_send("SC_Topic", 2, 0)
        local.topics.auto_create_topic_enable = why != "auto-create off"
        msg = MessageExt("SC_Topic", b"hi", 0, properties={"UNIQ_KEY": "U1"})
        if why == "TBW102":
            msg.topic = "TBW102"
        elif why == "empty body":
            msg.body = b""
        elif why == "separator":
            msg.properties["K"] = "a\x01b"
        elif why == "queue":
            msg.queue_id = 2
        else:
            msg.topic = "SC_Unknown"
        with pytest.raises((InvalidTopic, InvalidMessage)):
            local.send(msg)
        assert local.store.max_phy_offset == 0
