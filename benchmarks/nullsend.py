"""`rmqtool serve` whose sends store nothing: what a RocketMQ client reaches here when the broker costs
(almost) nothing, for `benchmarks/serve.py --targets ...,ceiling`.

    python benchmarks/nullsend.py serve --store DIR --namesrv-port 0 --broker-port 0

Everything but the send is serve's own (name server, routes, heartbeats, topic creation). A
SEND_MESSAGE(_V2) or SEND_BATCH_MESSAGE is read as serve reads it (frame, JSON header, send header)
and answered as stored, with a response of the usual size (an offset message id per message, the
queue's next offset, the message's or batch's UNIQ_KEY), but nothing is checked, appended or
dispatched. The cost left on the server is the frame and header work and the socket calls, which
every broker pays; so a case's rate against this server is near the most any broker can reach on
this machine with the same client processes sharing its cores. Its pulls find nothing: serve.py
runs no consume case against it.
"""

from __future__ import annotations

import struct
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from rmqtool.broker.send import SendProcessor  # noqa: E402
from rmqtool.layouts import properties as P  # noqa: E402
from rmqtool.layouts.msgid import host_hex  # noqa: E402
from rmqtool.remoting.command import RemotingCommand  # noqa: E402
from rmqtool.remoting.headers import send_header_from_ext  # noqa: E402

_TOTAL = struct.Struct(">i")  # each inner message of a batch body starts with its total size
_next: dict[tuple[str, int], int] = {}  # each queue's next offset
_phys = [0]  # the CommitLog offset the messages would have had (their ids are made from it)


def _batch_count(body: bytes) -> int:
    """The inner messages of a SEND_BATCH_MESSAGE body (`MessageDecoder.encodeMessages`)."""
    n = pos = 0
    end = len(body)
    while pos + 4 <= end:
        size = _TOTAL.unpack_from(body, pos)[0]
        if size <= 0:
            break
        pos += size
        n += 1
    return max(n, 1)


def null_send(self: Any, cmd: RemotingCommand, conn: Any) -> RemotingCommand:
    """`SendProcessor.process_send` answering as if stored."""
    h = send_header_from_ext(cmd.code, cmd.ext_fields)
    batch = cmd.code == 320 or bool(h.batch)
    n = _batch_count(cmd.body) if batch else 1
    key = (h.topic, max(h.queueId, 0))
    offset = _next.get(key, 0)
    _next[key] = offset + n
    uniq = P.decode_properties(h.properties or "").get(P.UNIQ_KEY)
    host, phys, size = self.local.store_host, _phys[0], max(1, len(cmd.body) // n)
    # each message's offset msgId, made as serve makes a batch's (`BatchPutResult.offset_msg_ids`)
    ids = ",".join(map((host_hex(host) + "%016X").__mod__, range(phys, phys + n * size, size)))
    _phys[0] = phys + n * size
    return self._send_ok(cmd, 0, ids, key[1], offset, uniq, uniq if batch else None)


def main() -> None:
    SendProcessor.process_send = null_send  # type: ignore[method-assign]
    from rmqtool.cli.main import main as rmqtool_main

    rmqtool_main()


if __name__ == "__main__":
    main()
