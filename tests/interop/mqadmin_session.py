"""Running Apache's mqadmin from tests: one JVM for many commands, its table output, and the
broker state the read commands are checked against (a consumer group online with a lag of one
per queue). Shared by test_mqadmin.py (the everyday read commands in depth), test_mqadmin_all.py
(every command, serve against Apache) and test_mqadmin_cluster.py.
"""

from __future__ import annotations

import contextlib
import json
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TypeVar

from rmqtool.client import (
    CONSUME_FROM_FIRST_OFFSET,
    ClientConfig,
    ConsumeStatus,
    Message,
    MessageExt,
    MessageQueue,
    Producer,
    PushConsumer,
)
from rmqtool.remoting.command import RemotingCommand

from .harness import java_cmd, require_java

CMD_TIMEOUT = 60.0  # s, one mqadmin command (its own RPC timeouts are 3-5 s)
FIRST_CMD_TIMEOUT = 150.0  # s, the first, which also waits for the JVM to start and load its classes
T = TypeVar("T")


class MQAdmin:
    """One JVM running Apache's mqadmin commands one after another (MQAdminSession.java)."""

    def __init__(self, namesrv: str, home: Path) -> None:
        require_java()
        home.mkdir(parents=True, exist_ok=True)
        self.namesrv = namesrv
        self.stderr = open(home / "mqadmin.stderr", "wb")  # noqa: SIM115 - closed in close()
        # cwd: consumerStatus (ConsumerStatusSubCommand) writes each client's running info under
        # ./<now>/<clientId>, relative to the JVM's working directory
        self.proc = subprocess.Popen(java_cmd("MQAdminSession", home=home), stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=self.stderr, cwd=home)
        self._timer: threading.Timer | None = None
        self._ran = False  # the first command gets FIRST_CMD_TIMEOUT

    def run(self, *args: str) -> dict:
        """`mqadmin <args> -n <namesrv>`: {"args", "out", "err", "ms"}; the JVM is killed past CMD_TIMEOUT."""
        assert self.proc.stdin is not None and self.proc.stdout is not None
        line = "\t".join([args[0], "-n", self.namesrv, *args[1:]])
        # a CI machine busy with two brokers' JVMs once took over 60 s for a session's first command
        limit = CMD_TIMEOUT if self._ran else FIRST_CMD_TIMEOUT
        self._ran = True
        timer = threading.Timer(limit, self.proc.kill)
        timer.start()
        try:
            self.proc.stdin.write(line.encode() + b"\n")
            self.proc.stdin.flush()
            reply = self.proc.stdout.readline()
        finally:
            timer.cancel()
        if not reply:
            self.stderr.flush()
            tail = Path(self.stderr.name).read_bytes()[-2000:].decode(errors="replace")
            raise RuntimeError(f"mqadmin session died during {args!r} (killed after {limit:g} s?); "
                               f"its stderr ends:\n{tail}")
        return json.loads(reply)

    def close(self) -> None:
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.stderr.close()


def run_once(runs: dict[str, T | Exception], kind: str, what: str, fn: Callable[[], T]) -> T:
    """`fn()` the first time a module's checks ask for broker `kind`, its result (or its failure,
    re-raised for every check) after that: one mqadmin scenario per broker serves many checks."""
    if kind not in runs:
        try:
            runs[kind] = fn()
        except Exception as e:  # noqa: BLE001 - reported by every check, run once
            runs[kind] = e
    run = runs[kind]
    if isinstance(run, Exception):
        raise RuntimeError(f"{what} against {kind} failed: {run!r}") from run
    return run


# --- parsing mqadmin's output -------------------------------------------------------------------

def ok(res: dict) -> str:
    """The command's stdout, after checking it did not fail (mqadmin prints failures, exits 0)."""
    assert "command failed" not in res["out"] + res["err"], f"{res['args']}: {res['out']}{res['err'][-3000:]}"
    return res["out"]


def table(out: str) -> list[list[str]]:
    """Rows under the '#Header' line, split on runs of blanks."""
    lines = out.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("#"))
    rows = []
    for line in lines[start + 1:]:
        if not line.strip():
            break
        rows.append(line.split())
    return rows


def cluster_rows(out: str) -> list[dict[str, str]]:
    rows = []
    for r in table(out):
        rows.append({"cluster": r[0], "broker": r[1], "bid": r[2], "addr": r[3], "version": r[4],
                     "activated": r[-1]})
    return rows


# --- the broker state the read commands see -------------------------------------------------------

def committed_offset(producer: Producer, broker_addr: str, group: str, topic: str, qid: int) -> int:
    """The group's offset on the broker (QUERY_CONSUMER_OFFSET 14), -1 if none: what mqadmin must report."""
    cmd = RemotingCommand.request(14, {"consumerGroup": group, "topic": topic, "queueId": str(qid)})
    r = producer.instance.run(producer.instance.invoke(broker_addr, cmd))
    return int(r.ext_fields.get("offset", -1)) if r.code == 0 else -1


def wait_for(what: Callable[[], str], cond: Callable[[], bool], timeout: float = 30.0) -> None:
    """Poll `cond` until true; past `timeout` s a TimeoutError says `what()`."""
    deadline = time.time() + timeout
    while not cond():
        if time.time() > deadline:
            raise TimeoutError(what())
        time.sleep(0.1)


def safe_queues(producer: Producer, topic: str) -> list[MessageQueue]:
    try:
        return producer.fetch_publish_message_queues(topic)
    except Exception:  # noqa: BLE001 - not routed yet
        return []


@contextlib.contextmanager
def group_lagging_by_one(producer: Producer, namesrv: str, broker_addr: str, topic: str, group: str, queues: int,
                         keys: Callable[[int, int], list[str]],
                         hold_s: float) -> Iterator[dict[int, list[tuple[str, str]]]]:
    """Queue q of `topic` gets q + 1 "done" messages, then one "held" one; a PushConsumer of `group`
    consumes the done ones and keeps each held one in its listener (at most `hold_s`), so the group
    stays online with a committed offset of q + 1 and a lag of exactly one per queue while the block
    runs. Yields what was sent: queue id -> [(tag, unique message id)]; `keys(q, i)` are the keys
    of message i of queue q. The consumer lets go and shuts down after the block."""
    wait_for(lambda: f"route of {topic}", lambda: len(safe_queues(producer, topic)) == queues)
    broker_name = safe_queues(producer, topic)[0].broker_name
    sent: dict[int, list[tuple[str, str]]] = {}
    for q in range(queues):
        mq = MessageQueue(topic, broker_name, q)
        for i in range(q + 2):
            tag = "held" if i == q + 1 else "done"
            r = producer.send(Message(topic, f"body-{q}-{i}", tags=tag, keys=keys(q, i)), queue=mq)
            sent.setdefault(q, []).append((tag, r.msg_id))
    release = threading.Event()
    consumed: list[str] = []

    def listener(msgs: list[MessageExt], ctx: object) -> ConsumeStatus:
        for m in msgs:
            if m.properties.get("TAGS") == "held":
                release.wait(hold_s)  # keeps the committed offset just before it
            else:
                consumed.append(m.properties.get("UNIQ_KEY", ""))
        return ConsumeStatus.CONSUME_SUCCESS

    consumer = PushConsumer(group, namesrv, consume_from_where=CONSUME_FROM_FIRST_OFFSET,
                            config=ClientConfig(persist_consumer_offset_interval=0.3))
    consumer.subscribe(topic, "*").register_listener(listener)
    consumer.start()
    try:
        def offsets() -> list[int]:
            return [committed_offset(producer, broker_addr, group, topic, q) for q in range(queues)]

        wait_for(lambda: f"the consumer committed every done message: {offsets()}, consumed {len(consumed)}",
                 lambda: offsets() == [q + 1 for q in range(queues)])
        yield sent
    finally:
        release.set()
        consumer.shutdown()
