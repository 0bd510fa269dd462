"""enablePopBufferMerge=true (broker/pop/buffer.py, Java's PopBufferMergeService) in `rmqtool serve`:
a checkpoint acked within the window never reaches the revive topic (`inspect revive`), a graceful
stop stores what the buffer holds and the message comes back after restart, and kill -9 loses no
unacked message (its offset was never committed: the next pop hands it out again). Redelivery of
a checkpoint acked in part, beside Apache's broker: tests/interop/test_pop_buffer_merge.py."""

from __future__ import annotations

import json
import signal
import time

import pytest
from typer.testing import CliRunner

from rmqtool.cli.main import app
from tests.broker.conftest import TEST_CONF, ServeProcess, Wire, create_topic
from tests.pop_serve_helpers import ack, handles, pop_ext, pop_until, send

pytestmark = pytest.mark.slow
BUFFER_CONF = TEST_CONF + "enablePopBufferMerge=true\n"


def revive_records(store, group: str) -> list[dict]:
    """`rmqtool inspect revive` of the (live) store: the records of `group` as put (on the timer
    topic until due; the copies the timer delivers to the revive queue are left out)."""
    r = CliRunner().invoke(app, ["inspect", "revive", str(store), "--json"])
    assert r.exit_code == 0, r.output
    rows = [json.loads(line) for line in r.stdout.splitlines() if line.strip()]
    return [row for row in rows if row.get("group") == group and row.get("stored") == "timer"]


def tags(rows: list[dict]) -> list[str]:
    return sorted(str(row["tag"]) for row in rows)


def sent_and_popped(w: Wire, broker: str, topic: str, group: str, n: int, invisible: int) -> list[tuple]:
    """`n` messages sent to a new one-queue `topic`, then popped by `group` in one pop: (message, handle)."""
    create_topic(broker, topic, 1)
    send(w, topic, n)
    got = handles(w.request(200050, pop_ext(topic, group, invisible=invisible)))
    assert len(got) == n, [m.body for m, _ in got]
    return got


def test_pop_then_ack_in_the_window_stores_no_checkpoint(tmp_path):
    serve = ServeProcess(tmp_path / "store", BUFFER_CONF)
    w = Wire(serve.broker)
    try:
        # 10 s: an ack merges while the revive time is 4.5 s away (room for a loaded machine)
        got = sent_and_popped(w, serve.broker, "PopBuf", "cg_buf", 3, invisible=10_000)
        assert [m.body for m, _ in got] == [b"m0", b"m1", b"m2"]
        for _m, h in got:
            assert ack(w, "cg_buf", "PopBuf", h).code == 0
        r = w.request(200050, pop_ext("PopBuf", "cg_buf"))  # the offset is past the buffered pop
        assert r.code == 210, [m.body for m, _ in handles(r)]
        time.sleep(0.5)  # a few scans: the acked checkpoint is dropped, its offset committed
        assert revive_records(serve.store, "cg_buf") == []
        off = w.request(14, {"consumerGroup": "cg_buf", "topic": "PopBuf", "queueId": 0})
        assert off.ext_fields["offset"] == "3"
    finally:
        w.close()
        assert serve.stop() == 0
    assert revive_records(serve.store, "cg_buf") == []  # a stop stores nothing that was acked
    assert "Traceback" not in serve.stderr, serve.stderr


def test_a_stop_stores_the_buffer_and_the_message_comes_back_after_restart(tmp_path):
    store = tmp_path / "store"
    serve = ServeProcess(store, BUFFER_CONF)
    w = Wire(serve.broker)
    try:
        got = sent_and_popped(w, serve.broker, "PopBufS", "cg_bufs", 2, invisible=10_000)
        assert ack(w, "cg_bufs", "PopBufS", got[0][1]).code == 0
        assert revive_records(store, "cg_bufs") == []  # held: nothing stored yet
    finally:
        w.close()
        assert serve.stop() == 0
    assert tags(revive_records(store, "cg_bufs")) == ["ack", "ck"]
    serve = ServeProcess(store, BUFFER_CONF)
    w = Wire(serve.broker)
    try:
        assert w.request(200050, pop_ext("PopBufS", "cg_bufs")).code == 210  # invisible until its revive
        back = pop_until(w, "PopBufS", "cg_bufs", 1, timeout=30)
        assert [m.body for m, _ in back] == [b"m1"] and back[0][0].reconsume_times == 1
    finally:
        w.close()
        assert serve.stop() == 0
    assert "Traceback" not in serve.stderr, serve.stderr


def test_kill_9_with_a_buffered_checkpoint_loses_no_unacked_message(tmp_path):
    store = tmp_path / "store"
    serve = ServeProcess(store, BUFFER_CONF)
    w = Wire(serve.broker)
    try:
        got = sent_and_popped(w, serve.broker, "PopBufK", "cg_bufk", 4, invisible=60_000)
        for m, h in got:
            if m.body in (b"m0", b"m2"):
                assert ack(w, "cg_bufk", "PopBufK", h).code == 0
        time.sleep(6)  # consumer offsets are persisted every 5 s: the pop's is not committed yet
    finally:
        w.close()
        serve.stop(signal.SIGKILL)
    assert revive_records(store, "cg_bufk") == []  # the checkpoint died with the process
    serve = ServeProcess(store, BUFFER_CONF)
    w = Wire(serve.broker)
    try:
        # at once, not after the invisible time: the offset never moved past them (at-least-once:
        # the acked two may come again, the unacked two must)
        again = handles(w.request(200050, pop_ext("PopBufK", "cg_bufk", invisible=60_000)))
        bodies = sorted(m.body for m, _ in again)
        assert {b"m1", b"m3"} <= set(bodies) and bodies == sorted(set(bodies))
        for _m, h in again:
            assert ack(w, "cg_bufk", "PopBufK", h).code == 0
        assert w.request(200050, pop_ext("PopBufK", "cg_bufk")).code == 210
    finally:
        w.close()
        assert serve.stop() == 0
    assert "Traceback" not in serve.stderr, serve.stderr
