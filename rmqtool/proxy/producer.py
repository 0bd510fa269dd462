"""SendMessage and EndTransaction (`SendMessageActivity`, `ProducerProcessor`,
`EndTransactionActivity`, `TransactionProcessor`).

A send is checked and mapped as the proxy does it (convert.py), checked against the topic's
message type, given a queue (message group -> Guava's consistent hash over the writable
queues, else round robin), and sent to the broker as SEND_MESSAGE_V2 (one message) or
SEND_BATCH_MESSAGE (several) with the topic as the producer group. A transactional half
message leaves its offsets in the transaction data for the client's EndTransaction.
"""

from __future__ import annotations

import itertools
from typing import Any

from rmqtool.layouts import properties as P
from rmqtool.layouts.javahash import java_string_hash
from rmqtool.layouts.msgid import decode_offset_msg_id
from rmqtool.proxy.context import ProxyContext, ProxyCore
from rmqtool.proxy.convert import (
    TRANSACTION_PREPARED_TYPE,
    build_properties,
    build_sys_flag,
    check_message_type,
    message_type_of,
    validate_body,
)
from rmqtool.proxy.pb import definition as d
from rmqtool.proxy.pb import service as s
from rmqtool.proxy.status import Code, ProxyError, ok, proxy_exception, status
from rmqtool.proxy.validate import is_blank, validate_topic
from rmqtool.remoting.codes import RequestCode, ResponseCode
from rmqtool.remoting.command import RemotingCommand
from rmqtool.remoting.headers import EndTransactionRequestHeader, SendMessageRequestHeader

PERM_WRITE = 2
TRANSACTION_NOT_TYPE, TRANSACTION_COMMIT_TYPE, TRANSACTION_ROLLBACK_TYPE = 0, 0x2 << 2, 0x3 << 2
_SEND_STATUS = {  # remoting code of a stored message -> the entry's gRPC code
    ResponseCode.SUCCESS: Code.OK,
    ResponseCode.FLUSH_DISK_TIMEOUT: Code.MASTER_PERSISTENCE_TIMEOUT,
    ResponseCode.FLUSH_SLAVE_TIMEOUT: Code.SLAVE_PERSISTENCE_TIMEOUT,
    ResponseCode.SLAVE_NOT_AVAILABLE: Code.HA_NOT_AVAILABLE,
}
_SEND_STATUS_NAME = {
    ResponseCode.FLUSH_DISK_TIMEOUT: "FLUSH_DISK_TIMEOUT", ResponseCode.FLUSH_SLAVE_TIMEOUT: "FLUSH_SLAVE_TIMEOUT",
    ResponseCode.SLAVE_NOT_AVAILABLE: "SLAVE_NOT_AVAILABLE",
}
_MASK64 = (1 << 64) - 1


def consistent_hash(value: int, buckets: int) -> int:
    """Guava's `Hashing.consistentHash(long, int)` (its LinearCongruentialGenerator)."""
    state = value & _MASK64
    candidate = 0
    while True:
        state = (2862933555777941757 * state + 1) & _MASK64
        high = state >> 33  # 31 bits: (int) keeps it non-negative
        nxt = int((candidate + 1) / ((high + 1) / 2147483648.0))
        if 0 <= nxt < buckets:
            candidate = nxt
        else:
            return candidate


class ProducerActivity:
    core: ProxyCore
    _round_robin = itertools.count()

    def _write_queues(self, topic: str) -> list[int]:
        ids: list[int] = []
        for qd in self._queue_datas(topic):  # type: ignore[attr-defined]
            if qd.perm & PERM_WRITE:
                ids.extend(range(qd.writeQueueNums))
        return ids

    async def send_message(self, ctx: ProxyContext, req: Any) -> Any:
        core, cfg = self.core, self.core.config
        if len(req.messages) <= 0:
            raise ProxyError(Code.MESSAGE_CORRUPTED, "no message to send")
        first = req.messages[0]
        topic = first.topic.name
        validate_topic(topic)
        built = []
        for m in req.messages:
            if m.topic != first.topic:
                raise ProxyError(Code.MESSAGE_CORRUPTED, "topic in message is not same")
            validate_body(m.body, cfg)
            built.append((m.body, build_properties(m, topic, ctx.remote_address, cfg)))
        sys_flag = build_sys_flag(first)
        props0 = built[0][1]
        if cfg.enable_topic_message_type_check and "TRANSFER_FLAG" not in props0 and \
                not topic.startswith(("%RETRY%", "%DLQ%")):
            check_message_type(core.topic_message_type(topic), message_type_of(props0))
        queues = self._write_queues(topic)
        if not queues:
            raise proxy_exception(Code.FORBIDDEN, "no writable queue")
        group = first.system_properties.message_group if len(req.messages) == 1 else ""
        if group:
            queue_id = queues[consistent_hash(java_string_hash(group), len(queues))]
        else:
            queue_id = queues[next(self._round_robin) % len(queues)]
        try:
            born = int(props0.get("BORN_TIMESTAMP", ""))
        except ValueError:
            born = core.controller.now()
        header = SendMessageRequestHeader(topic, topic, "TBW102", 4, queue_id, sys_flag, born, 0,
                                          P.encode_properties(props0) if len(built) == 1 else None,
                                          0, None, True if len(built) > 1 else None)
        if len(built) == 1:
            cmd = RemotingCommand.request(RequestCode.SEND_MESSAGE_V2, header.to_v2_ext(), built[0][0])
        else:
            from rmqtool.broker.send import encode_batch_body

            body = encode_batch_body([(0, b, P.encode_properties(p)) for b, p in built])
            cmd = RemotingCommand.request(RequestCode.SEND_BATCH_MESSAGE, header.to_v2_ext(), body)
        cmd.language = ctx.language
        channel = core.channel(ctx)
        r = await core.invoke(cmd, channel)
        if r.code not in _SEND_STATUS:
            from rmqtool.proxy.status import remoting_error

            raise remoting_error(r.code, r.remark)
        code = _SEND_STATUS[r.code]
        uniq = ",".join(p[P.UNIQ_KEY] for _, p in built)
        if code != Code.OK:
            entry = s.SendResultEntry(status=status(code, f"send message failed, sendStatus={_SEND_STATUS_NAME[r.code]}"))
        else:
            offset = int(r.ext_fields.get("queueOffset", "0") or 0)
            tid = r.ext_fields.get("transactionId") or uniq
            entry = s.SendResultEntry(status=ok(), offset=offset, message_id=uniq, transaction_id=tid,
                                      recall_handle=r.ext_fields.get("recallHandle") or "")
            if sys_flag & TRANSACTION_PREPARED_TYPE and tid:
                try:
                    clo = decode_offset_msg_id(r.ext_fields.get("msgId", "").split(",")[0]).commit_log_offset
                except ValueError:
                    clo = -1
                core.transactions.add(topic, tid, core.broker_name, offset, clo)
        return s.SendMessageResponse(status=status(entry.status.code, Code.Name(entry.status.code)), entries=[entry])

    async def end_transaction(self, ctx: ProxyContext, req: Any) -> Any:
        core = self.core
        validate_topic(req.topic.name)
        if is_blank(req.transaction_id):
            raise ProxyError(Code.INVALID_TRANSACTION_ID, "transaction id cannot be empty")
        kind = {d.COMMIT: TRANSACTION_COMMIT_TYPE, d.ROLLBACK: TRANSACTION_ROLLBACK_TYPE}.get(
            req.resolution, TRANSACTION_NOT_TYPE)
        group = req.topic.name
        data = core.transactions.poll(group, req.transaction_id)
        if data is None:
            raise proxy_exception(Code.INTERNAL_SERVER_ERROR, "cannot found transaction data")
        h = EndTransactionRequestHeader(group, data.tran_state_table_offset, data.commit_log_offset, kind,
                                        req.message_id, req.source == d.SOURCE_SERVER_CHECK, req.transaction_id,
                                        req.topic.name)
        cmd = RemotingCommand.request(RequestCode.END_TRANSACTION, h.to_ext(), oneway=True)
        cmd.language = ctx.language
        await core.invoke_oneway(cmd, core.channel(ctx))
        return s.EndTransactionResponse(status=ok())
