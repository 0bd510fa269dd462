"""`rmqtool consume TOPIC`: read a topic as a consumer group, like `kcat -C -e` (cli.md).

Embedded mode: open the store through `LocalBroker`, deliver what delay/timer services have due
(`run_due`, so a delayed message sent a moment ago shows up without a server), pull every queue
from the group's committed offset (or `--from`), print, commit to consumerOffset.json, and exit
when caught up (or keep going with `--follow`). Messages the group sent back for retry
(`%RETRY%group`) are consumed too, shown under their original topic, as a push consumer does.

Output formats: `json` (JSON Lines of `MessageExt.to_json()`), `table`, `text` (the body), or a
template with these codes (kcat-like):

  %t topic        %q queueId       %o queueOffset    %c commitLogOffset
  %k keys         %g tags          %s body           %S body size in bytes
  %i msgId        %I offsetMsgId   %T storeTimestamp %B bornTimestamp
  %r reconsumeTimes  %h properties as k=v,k=v       %%  a percent sign
  \\n newline  \\t tab  \\\\ backslash

A template gets a newline at the end unless it ends with one.
"""

from __future__ import annotations

import re
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

import typer

from rmqtool.cli import common
from rmqtool.cli.jsonline import record_json_line
from rmqtool.errors import InvalidInput, StoreError
from rmqtool.layouts import properties as P
from rmqtool.layouts.constants import RETRY_GROUP_TOPIC_PREFIX
from rmqtool.layouts.message import MessageExt
from rmqtool.validators import check_group, check_topic

PULL_BATCH = 32  # DefaultMQPushConsumer.pullBatchSize
FAST_PULL_BATCH = 1024
FOLLOW_POLL_S = 0.05
PERSIST_INTERVAL_S = 5.0  # BrokerConfig.flushConsumerOffsetInterval
TABLE_COLUMNS = ["topic", "queueId", "queueOffset", "msgId", "tags", "keys", "storeTimestamp", "body"]


# -- formatting ----------------------------------------------------------------------------------
def _text_body(m: MessageExt) -> str:
    body = m.decompressed_body()
    try:
        return body.decode("utf-8")
    except UnicodeDecodeError:
        return body.decode("utf-8", "backslashreplace")


_CODES: dict[str, Callable[[MessageExt], str]] = {
    "t": lambda m: m.topic,
    "q": lambda m: str(m.queue_id),
    "o": lambda m: str(m.queue_offset),
    "c": lambda m: str(m.commit_log_offset),
    "k": lambda m: m.keys or "",
    "g": lambda m: m.tags or "",
    "s": _text_body,
    "S": lambda m: str(len(m.decompressed_body())),
    "i": lambda m: m.msg_id,
    "I": lambda m: m.offset_msg_id,
    "T": lambda m: str(m.store_timestamp),
    "B": lambda m: str(m.born_timestamp),
    "r": lambda m: str(m.reconsume_times),
    "h": lambda m: ",".join(f"{k}={v}" for k, v in m.properties.items()),
}
_TOKEN = re.compile(r"%(.)|\\(.)|([^%\\]+)|(%$|\\$)", re.S)
_ESC = {"n": "\n", "t": "\t", "\\": "\\", "r": "\r"}


def compile_template(template: str) -> Callable[[MessageExt], str]:
    """Turn a kcat-like template into a function MessageExt -> line (InvalidInput on unknown codes)."""
    parts: list[Callable[[MessageExt], str] | str] = []
    for m in _TOKEN.finditer(template):
        code, esc, lit, dangling = m.groups()
        if dangling:
            raise InvalidInput(f"--format {template!r}: ends with a lone {dangling!r}")
        if lit is not None:
            parts.append(lit)
        elif esc is not None:
            parts.append(_ESC.get(esc, "\\" + esc))
        elif code == "%":
            parts.append("%")
        elif code in _CODES:
            parts.append(_CODES[code])
        else:
            raise InvalidInput(f"--format: unknown code %{code} (known: %t %q %o %c %k %g %s %S %i %I %T %B %r %h %%)")
    if not parts or not (isinstance(parts[-1], str) and parts[-1].endswith("\n")):
        parts.append("\n")
    fixed = tuple(parts)

    def render(msg: MessageExt) -> str:
        return "".join(p if isinstance(p, str) else p(msg) for p in fixed)

    return render


class Output:
    """Writes messages in the chosen format; JSON Lines is the fast path (pipes)."""

    def __init__(self, fmt: str) -> None:
        self.fmt = fmt
        self.rows: list[dict[str, Any]] = []
        self.out = sys.stdout
        self._buf: list[str] = []
        if fmt == "json":
            self._line = _json_line
        elif fmt == "text":
            self._line = lambda m: _text_body(m) + "\n"
        elif fmt == "table":
            self._line = None
        else:
            self._line = compile_template(fmt)

    def write(self, msg: MessageExt) -> None:
        if self._line is None:
            row = msg.to_json()
            row["body"] = row.get("body", "<binary>")[:60]
            self.rows.append(row)
            return
        self._buf.append(self._line(msg))
        if len(self._buf) >= 1024:
            self.flush()

    def write_lines(self, lines: list[str]) -> None:
        """Already formatted JSON lines (the fast path)."""
        if lines:
            lines.append("")
            self._buf.append("\n".join(lines))
            if len(self._buf) >= 16:
                self.flush()

    def flush(self) -> None:
        if self._buf:
            self.out.write("".join(self._buf))
            self._buf.clear()
        if self.rows:
            common.print_table(self.rows, TABLE_COLUMNS)
            self.rows.clear()
        self.out.flush()


def _json_line(m: MessageExt) -> str:
    return common.json_line(m.to_json()) + "\n"


# -- consuming -----------------------------------------------------------------------------------
def start_offset(broker: Any, group: str, topic: str, qid: int, how: str) -> int:
    """Where a queue is read from: the committed offset, first, last, or the first at a time."""
    store = broker.store
    lo = store.get_min_offset_in_queue(topic, qid)
    hi = store.get_max_offset_in_queue(topic, qid)
    if how == "first":
        return lo
    if how == "last":
        return hi
    if how == "committed":
        off = broker.offsets.query_offset(group, topic, qid)
        return lo if off < 0 else min(max(off, lo), hi)
    return store.get_offset_in_queue_by_time(topic, qid, common.parse_time_ms(how))


def consume(
    ctx: typer.Context,
    topic: Annotated[str, typer.Argument(help="Topic to consume.")],
    group: Annotated[str, typer.Option("--group", "-g", help="Consumer group (offsets are kept per group).")] = "rmqtool",
    expr: Annotated[str, typer.Option("--expr", "-e", help="Tag expression: '*' or 'TagA || TagB'.")] = "*",
    sql: Annotated[str | None, typer.Option("--sql", help="SQL92 filter (network mode only).")] = None,
    from_: Annotated[str, typer.Option("--from", help="committed | first | last | TIME (epoch ms or ISO-8601).")] = "committed",
    count: Annotated[int | None, typer.Option("--count", "-c", help="Stop after N messages.")] = None,
    timeout: Annotated[float | None, typer.Option("--timeout", help="Give up waiting after SECONDS.")] = None,
    follow: Annotated[bool, typer.Option("--follow", "-f", help="Keep waiting for new messages.")] = False,
    broadcast: Annotated[bool, typer.Option("--broadcast", help="Broadcasting: offsets are not kept by the broker.")] = False,
    no_commit: Annotated[bool, typer.Option("--no-commit", help="Do not commit offsets.")] = False,
    exec_cmd: Annotated[str | None, typer.Option("--exec", help="Run CMD per message (body on stdin); non-zero = retry later.")] = None,
    max_reconsume_times: Annotated[int, typer.Option("--max-reconsume-times", help="Retries before the DLQ.")] = 16,
    concurrency: Annotated[int, typer.Option("--concurrency", help="Messages handled at once (network mode).")] = 1,
    fmt: Annotated[str | None, typer.Option("--format", help="table | json | text | TEMPLATE (%t %q %o %k %s ...).")] = None,
    pop: Annotated[bool, typer.Option("--pop", help="Consume by POP (5.x): the broker hands out messages and takes "
                                      "them back unless acked (network mode).")] = False,
    invisible: Annotated[float, typer.Option("--invisible", metavar="SECONDS", help="With --pop: how long a "
                                             "received message stays invisible to others until acked.")] = 30.0,
    json_out: common.JsonOption = False,
    store: common.StoreOption = None,
    namesrv: common.NamesrvOption = None,
) -> None:
    """Print a topic's messages from the group's committed offset, commit, and exit when caught up.

    \b
    --format TEMPLATE codes (kcat-like; a newline is added unless the template ends with one):
      %t topic  %q queueId  %o queueOffset  %c commitLogOffset  %k keys  %g tags
      %s body  %S body size  %i msgId  %I offsetMsgId  %T storeTimestamp
      %B bornTimestamp  %r reconsumeTimes  %h properties k=v,...  %% percent
      \\n newline   \\t tab   \\\\ backslash
    """
    check_topic(topic)
    check_group(group)
    if count is not None and count < 1:
        raise InvalidInput("--count must be 1 or more")
    if concurrency < 1:
        raise InvalidInput("--concurrency must be 1 or more")
    if timeout is not None and timeout < 0:
        raise InvalidInput("--timeout must be 0 or more")
    if from_ not in ("committed", "first", "last"):
        common.parse_time_ms(from_)
    fmt_name = common.choose_format(fmt, json_out, ("table", "json"))
    if fmt_name not in ("json", "text", "table"):
        compile_template(fmt_name)
    from rmqtool.store.local import SubscriptionData

    sub = SubscriptionData.build(topic, expr)
    commit = not (no_commit or broadcast)
    if pop:
        if not common.network_mode(ctx, namesrv):
            raise InvalidInput("--pop needs the network mode (--namesrv): POP state is kept by a running broker")
        if broadcast or from_ != "committed":
            raise InvalidInput("--pop takes neither --broadcast nor --from: the broker decides what is handed out")
        if not 1 <= invisible <= 43_200:
            raise InvalidInput("--invisible must be 1 to 43200 seconds")
        out = Output(fmt_name)
        try:
            common.bridge("consume_pop")(namesrv=namesrv, topic=topic, group=group, expr=expr, sql=sql, count=count,
                                         timeout=timeout, follow=follow, ack=not no_commit, exec_cmd=exec_cmd,
                                         invisible=invisible, max_attempts=max_reconsume_times, on_message=out.write)
        finally:
            out.flush()
        return
    if common.network_mode(ctx, namesrv):
        out = Output(fmt_name)
        try:
            common.bridge("consume")(namesrv=namesrv, topic=topic, group=group, expr=expr, sql=sql, start=from_,
                                     count=count, timeout=timeout, follow=follow, commit=commit,
                                     broadcast=broadcast, exec_cmd=exec_cmd,
                                     max_reconsume_times=max_reconsume_times, on_message=out.write,
                                     concurrency=concurrency)
        finally:
            out.flush()
        return
    if sql is not None:
        raise InvalidInput("--sql (SQL92 filtering) needs the network mode (--namesrv); use --expr with tags here")
    _consume_embedded(common.store_dir(store), topic, group, sub, from_, count, timeout, follow, commit,
                      exec_cmd, max_reconsume_times, Output(fmt_name))


def _consume_embedded(root: Path, topic: str, group: str, sub: Any, from_: str, count: int | None,
                      timeout: float | None, follow: bool, commit: bool, exec_cmd: str | None,
                      max_reconsume_times: int, out: Output) -> None:
    from rmqtool.store.local import LocalBroker, SubscriptionData

    if not root.is_dir():
        raise StoreError(f"no store at {root}" if not root.exists() else f"store path {root} is not a directory")
    deadline = None if timeout is None else time.monotonic() + timeout
    with LocalBroker.open(root, common.store_config(root)) as broker:
        retry_topic = RETRY_GROUP_TOPIC_PREFIX + group
        subs = {topic: sub, retry_topic: SubscriptionData(retry_topic)}
        positions: dict[tuple[str, int], int] = {}

        def queues() -> list[tuple[str, int]]:
            found = broker.store.topic_queues()
            keys = []
            for t in (topic, retry_topic):
                tc = broker.topics.select(t)
                qids = set(found.get(t, ()))
                if tc is not None:
                    qids.update(range(tc.read_queue_nums))
                keys += [(t, q) for q in sorted(qids)]
            return keys

        if commit:
            broker.subscriptions.find(group)  # PullMessageProcessor auto-creates the group's config
        printed = 0
        last_persist = time.monotonic()
        fast = out.fmt == "json" and sub.sub_all and exec_cmd is None
        try:
            while True:
                broker.run_due()
                progressed = False
                for key in queues():
                    t, qid = key
                    if key not in positions:
                        positions[key] = start_offset(broker, group, t, qid, "committed" if t == retry_topic
                                                      and from_ not in ("first", "last") else from_)
                    if fast and t != retry_topic:
                        while count is None or printed < count:
                            want = FAST_PULL_BATCH if count is None else min(FAST_PULL_BATCH, count - printed)
                            raws, nxt = broker.pull_raw(t, qid, positions[key], want)
                            if nxt == positions[key]:
                                break
                            out.write_lines([record_json_line(r) for r in raws])
                            printed += len(raws)
                            positions[key] = nxt
                            progressed = True
                            if commit:
                                broker.offsets.commit_offset(group, t, qid, nxt)
                        continue
                    while count is None or printed < count:
                        res = broker.pull(t, qid, positions[key], PULL_BATCH, expr=subs[t])
                        msgs = res.messages
                        if not msgs:
                            if res.next_begin_offset != positions[key] and res.status not in (
                                    "OFFSET_OVERFLOW_BADLY", "NO_MATCHED_LOGIC_QUEUE", "NO_MESSAGE_IN_QUEUE"):
                                positions[key] = res.next_begin_offset  # skipped filtered-out units
                                progressed = True
                                continue
                            break
                        if count is not None and printed + len(msgs) > count:
                            msgs = msgs[:count - printed]
                            nxt = msgs[-1].queue_offset + 1
                        else:
                            nxt = res.next_begin_offset
                        for m in msgs:
                            if t == retry_topic:
                                m.topic = m.properties.get(P.RETRY_TOPIC, m.topic)
                            out.write(m)
                            if exec_cmd is not None:
                                _run_exec(broker, exec_cmd, group, m, max_reconsume_times)
                        printed += len(msgs)
                        positions[key] = nxt
                        progressed = True
                        if commit:
                            broker.offsets.commit_offset(group, t, qid, nxt)
                    if count is not None and printed >= count:
                        break
                out.flush()
                if commit and time.monotonic() - last_persist > PERSIST_INTERVAL_S and broker.offsets.dirty:
                    broker.offsets.persist()
                    last_persist = time.monotonic()
                if count is not None and printed >= count:
                    break
                if deadline is not None and time.monotonic() >= deadline:
                    break
                if progressed:
                    continue
                if not follow and (deadline is None or (count is None and printed > 0)):
                    break  # caught up (kcat -e); with --timeout wait for the first (or --count) messages
                time.sleep(FOLLOW_POLL_S)
        except KeyboardInterrupt:
            pass
        finally:
            out.flush()
            if commit and broker.offsets.dirty:
                broker.offsets.persist()


def _run_exec(broker: Any, cmd: str, group: str, m: MessageExt, max_reconsume_times: int) -> None:
    """`--exec`: the body on the command's stdin; a non-zero exit sends the message back for retry."""
    env_extra = {"RMQ_TOPIC": m.topic, "RMQ_QUEUE_ID": str(m.queue_id), "RMQ_QUEUE_OFFSET": str(m.queue_offset),
                 "RMQ_MSG_ID": m.msg_id, "RMQ_TAGS": m.tags or "", "RMQ_KEYS": m.keys or "",
                 "RMQ_RECONSUME_TIMES": str(m.reconsume_times)}
    import os

    rc = subprocess.run(cmd, shell=True, input=m.decompressed_body(), stdout=sys.stderr,
                        env={**os.environ, **env_extra}).returncode
    if rc != 0:
        broker.consumer_send_back(group, m.commit_log_offset, 0, max_reconsume_times)


def register(app: typer.Typer) -> None:
    app.command("consume")(consume)

