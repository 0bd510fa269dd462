"""Transactional messages: half messages, END_TRANSACTION 37, CHECK_TRANSACTION_STATE 39.

(protocol.md §4.10, §6.5; formats.md §10; RocketMQ's TransactionalMessageBridge,
EndTransactionProcessor, TransactionalMessageCheckService.)
A prepared message is stored on RMQ_SYS_TRANS_HALF_TOPIC queue 0 with REAL_TOPIC / REAL_QID and
`__transactionId__`; commit stores it on its real topic (transaction type COMMIT, prepared
offset = the half's commitlog offset); commit and rollback both write an op record ("<offset>,",
tag `d`) on RMQ_SYS_TRANS_OP_HALF_TOPIC. A periodic check asks a live producer of the message's
group about half messages older than transactionTimeOut that have no op record, at most
transactionCheckMax times. Unlike the Java broker, the check does not re-append the half message;
the check counts are kept in memory and the scan position in consumerOffset.json
(group CID_RMQ_SYS_TRANS, as the Java broker does).
"""

from __future__ import annotations

import dataclasses
import logging
from typing import Any

from rmqtool.layouts import properties as P
from rmqtool.layouts.constants import (
    TRANS_HALF_TOPIC,
    TRANS_OP_HALF_TOPIC,
    TRANSACTION_COMMIT_TYPE,
    TRANSACTION_ROLLBACK_TYPE,
    TRANSACTION_TYPE_MASK,
)
from rmqtool.layouts.message import MessageExt, encode_record
from rmqtool.remoting.codes import RequestCode, ResponseCode
from rmqtool.remoting.command import RemotingCommand
from rmqtool.remoting.headers import CheckTransactionStateRequestHeader, EndTransactionRequestHeader
from rmqtool.remoting.transport import Connection

log = logging.getLogger("rmqtool.broker")

TRANS_CHECK_GROUP = "CID_RMQ_SYS_TRANS"
REMOVE_TAG = "d"
OFFSET_SEPARATOR = ","


class TransactionProcessor:
    # ------------------------------------------------------------ half messages
    def put_half_message(self: Any, msg: MessageExt, producer_group: str) -> Any:
        """`parseHalfMessageInner` + put (runs on the store thread pool)."""
        from rmqtool.validators import check_body

        check_body(msg.body, self.config.max_message_size)
        props = dict(msg.properties)
        uniq = props.get(P.UNIQ_KEY)
        if not uniq:
            uniq = props[P.UNIQ_KEY] = self.local.uniq_keys.create(self.clock())
        props[P.TRANSACTION_ID] = uniq
        props[P.REAL_TOPIC] = msg.topic
        props[P.REAL_QID] = str(msg.queue_id)
        props.setdefault(P.PGROUP, producer_group)
        props[P.CLUSTER] = self.cluster_name
        msg.properties = P.broker_order(props)
        msg.sys_flag &= ~TRANSACTION_TYPE_MASK
        msg.topic = TRANS_HALF_TOPIC
        msg.queue_id = 0
        msg.store_host = self.local.store_host
        return self.store.put_message(msg)

    def _write_op(self: Any, half: MessageExt) -> Any:
        """`deletePrepareMessage`: an op record naming the half message's queue offset."""
        props = P.broker_order({P.TAGS: REMOVE_TAG, P.WAIT: "false",
                                P.UNIQ_KEY: self.local.uniq_keys.create(self.clock())})
        op = MessageExt(topic=TRANS_OP_HALF_TOPIC, body=f"{half.queue_offset}{OFFSET_SEPARATOR}".encode(),
                        queue_id=half.queue_id, properties=props, born_timestamp=self.clock(),
                        born_host=self.local.store_host, store_host=self.local.store_host)
        result = self.store.put_message(op)
        self._tx_state()["done"].add(half.queue_offset)
        return result

    def _tx_state(self: Any) -> dict[str, Any]:
        st = getattr(self, "_tx", None)
        if st is None:
            start = self.local.offsets.query_offset(TRANS_CHECK_GROUP, TRANS_HALF_TOPIC, 0)
            op_start = self.local.offsets.query_offset(TRANS_CHECK_GROUP, TRANS_OP_HALF_TOPIC, 0)
            st = self._tx = {"done": set(), "checks": {}, "half": max(0, start), "op": max(0, op_start),
                             "op_scanned": max(0, op_start)}
        return st

    # ------------------------------------------------------------ END_TRANSACTION
    async def process_end_transaction(self: Any, cmd: RemotingCommand, conn: Connection) -> RemotingCommand | None:
        h = EndTransactionRequestHeader.from_ext(cmd.ext_fields)
        if h.commitOrRollback not in (TRANSACTION_COMMIT_TYPE, TRANSACTION_ROLLBACK_TYPE):
            return None  # TRANSACTION_NOT_TYPE: nothing to do, no answer
        return await self.run(self._end_transaction, cmd, h)

    def _end_transaction(self: Any, cmd: RemotingCommand, h: EndTransactionRequestHeader) -> RemotingCommand:
        half = self.store.look_message_by_offset(h.commitLogOffset)
        if half is None or half.topic != TRANS_HALF_TOPIC:
            return cmd.response(ResponseCode.SYSTEM_ERROR, remark="Find prepared transaction message failed")
        if half.properties.get(P.PGROUP) != h.producerGroup:
            return cmd.response(ResponseCode.SYSTEM_ERROR, remark="The producer group wrong")
        if half.queue_offset != h.tranStateTableOffset:
            return cmd.response(ResponseCode.SYSTEM_ERROR, remark="The transaction state table offset wrong")
        if half.commit_log_offset != h.commitLogOffset:
            return cmd.response(ResponseCode.SYSTEM_ERROR, remark="The commit log offset wrong")
        st = self._tx_state()
        if half.queue_offset in st["done"]:
            return cmd.response()  # already committed or rolled back (a late check answer)
        if h.commitOrRollback == TRANSACTION_COMMIT_TYPE:
            props = dict(half.properties)  # stored as the half had them, like endMessageTransaction
            real = MessageExt(
                topic=props.get(P.REAL_TOPIC, ""), queue_id=int(props.get(P.REAL_QID, "0") or 0), body=half.body,
                flag=half.flag, properties=props,
                sys_flag=(half.sys_flag & ~TRANSACTION_TYPE_MASK) | TRANSACTION_COMMIT_TYPE,
                born_timestamp=half.born_timestamp, born_host=half.born_host, store_host=half.store_host,
                reconsume_times=half.reconsume_times, prepared_transaction_offset=half.commit_log_offset)
            result = self.store.put_message(real)
            status = str(getattr(result.status, "name", result.status))
            if status not in ("PUT_OK", "FLUSH_DISK_TIMEOUT", "FLUSH_SLAVE_TIMEOUT", "SLAVE_NOT_AVAILABLE"):
                return cmd.response(ResponseCode.SYSTEM_ERROR, remark=f"store the committed message failed: {status}")
            self.stats["put"] += 1
        self._write_op(half)
        return cmd.response()

    # ------------------------------------------------------------ check-back
    def _scan_half(self: Any, now_ms: int) -> list[MessageExt]:
        """Half messages to check now (store thread): read op records, walk the half queue."""
        st = self._tx_state()
        store = self.store
        op_max = store.get_max_offset_in_queue(TRANS_OP_HALF_TOPIC, 0)
        while st["op_scanned"] < op_max:
            r = store.get_message(TRANS_OP_HALF_TOPIC, 0, st["op_scanned"], 64)
            if not r.messages:
                st["op_scanned"] = max(st["op_scanned"] + 1, r.next_begin_offset)
                continue
            for m in r.messages:
                for part in m.body.decode("ascii", "replace").split(OFFSET_SEPARATOR):
                    if part.strip().lstrip("-").isdigit():
                        st["done"].add(int(part))
            st["op_scanned"] = r.next_begin_offset
        half_max = store.get_max_offset_in_queue(TRANS_HALF_TOPIC, 0)
        out: list[MessageExt] = []
        pos = max(st["half"], store.get_min_offset_in_queue(TRANS_HALF_TOPIC, 0))
        contiguous = True
        while pos < half_max:
            r = store.get_message(TRANS_HALF_TOPIC, 0, pos, 32)
            if not r.messages:
                if r.next_begin_offset <= pos:
                    break
                pos = r.next_begin_offset
                continue
            stop = False
            for m in r.messages:
                o = m.queue_offset
                if o in st["done"]:
                    if contiguous:
                        st["half"] = o + 1
                    continue
                immunity = m.properties.get(P.CHECK_IMMUNITY_TIME_IN_SECONDS)
                timeout = self.transaction_timeout_ms
                if immunity and immunity.isdigit():
                    timeout = max(timeout, int(immunity) * 1000)
                if now_ms - m.store_timestamp < timeout:
                    stop = True  # newer messages follow; they are not due either
                    break
                contiguous = False
                n = st["checks"].get(o, 0)
                if n >= self.transaction_check_max:
                    log.info("half message %s dropped after %d checks", m.msg_id, n)
                    st["done"].add(o)
                    st["checks"].pop(o, None)
                    continue
                st["checks"][o] = n + 1
                out.append(m)
            if stop:
                break
            pos = r.next_begin_offset
        self.local.offsets.commit_offset(TRANS_CHECK_GROUP, TRANS_HALF_TOPIC, 0, st["half"])
        return out

    async def check_transactions(self: Any) -> int:
        """One round of `TransactionalMessageCheckService`: CHECK_TRANSACTION_STATE to producers."""
        if self.store.get_max_offset_in_queue(TRANS_HALF_TOPIC, 0) <= 0:
            return 0
        due = await self.run(self._scan_half, self.clock())
        sent = 0
        for m in due:
            group = m.properties.get(P.PGROUP, "")
            conn = self.clients.producer_channel(group)
            if conn is None:
                log.info("no producer of group %s online to check transaction %s", group, m.msg_id)
                continue
            real = dataclasses.replace(m, topic=m.properties.get(P.REAL_TOPIC, m.topic),
                                       queue_id=int(m.properties.get(P.REAL_QID, "0") or 0),
                                       properties=dict(m.properties))
            body = encode_record(real, P.encode_properties(m.properties))
            uniq = m.properties.get(P.UNIQ_KEY)
            ext = CheckTransactionStateRequestHeader(
                m.queue_offset, m.commit_log_offset, uniq, m.properties.get(P.TRANSACTION_ID, uniq),
                m.offset_msg_id, real.topic, self.broker_name).to_ext()
            await conn.oneway(RemotingCommand.request(RequestCode.CHECK_TRANSACTION_STATE, ext, body))
            sent += 1
        return sent
