"""Transactional messages: half messages, END_TRANSACTION 37, CHECK_TRANSACTION_STATE 39.

(protocol.md §4.10, §6.5; formats.md §10; RocketMQ's TransactionalMessageBridge,
EndTransactionProcessor, TransactionalMessageCheckService.)
A prepared message is stored on RMQ_SYS_TRANS_HALF_TOPIC queue 0 with REAL_TOPIC / REAL_QID and
`__transactionId__`; commit stores it on its real topic (transaction type COMMIT, prepared
offset = the half's commitlog offset); commit and rollback both write an op record ("<offset>,",
tag `d`) on RMQ_SYS_TRANS_OP_HALF_TOPIC. A periodic check asks a live producer of the message's
group about half messages older than transactionTimeOut that have no op record, at most
transactionCheckMax times; before each check the half message is appended again with
TRANSACTION_CHECK_TIMES raised, as the Java broker does, so the counts live in the store and the
scan position in consumerOffset.json (group CID_RMQ_SYS_TRANS).
"""

from __future__ import annotations

import dataclasses
import logging
from typing import Any

from rmqtool.layouts import properties as P
from rmqtool.layouts.constants import (
    TRANS_CHECK_MAX_TIME_TOPIC,
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

from .send import status_name

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
            st = self._tx = {"done": set(), "half": max(0, start), "op": max(0, op_start),
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
    def _renew_half(self: Any, m: MessageExt, extra: dict[str, str] | None = None) -> Any:
        """`renewHalfMessageInner` + put: the half message again at the queue's end.

        It keeps body, flags, born time and host and every property (TRANSACTION_CHECK_TIMES
        included, so the count survives a restart), and gets a new store time and offsets.
        """
        props = dict(m.properties)
        if extra:
            props.update(extra)
        return self.store.put_message(_copy_half(m, TRANS_HALF_TOPIC, m.queue_id, props))

    def _discard_half(self: Any, m: MessageExt) -> None:
        """`resolveDiscardMsg`: checked too often (or older than the files): to TRANS_CHECK_MAX_TIME_TOPIC."""
        log.info("half message %s checked %s times: moved to %s", m.msg_id,
                 m.properties.get(P.TRANSACTION_CHECK_TIMES), TRANS_CHECK_MAX_TIME_TOPIC)
        self.local.topics.create_in_send_back(TRANS_CHECK_MAX_TIME_TOPIC, 1)
        self.store.put_message(_copy_half(m, TRANS_CHECK_MAX_TIME_TOPIC, 0, dict(m.properties)))

    def _read_ops(self: Any) -> None:
        """`fillOpRemoveMap`: every half offset named by an op record (tag `d`) is done."""
        st = self._tx_state()
        store = self.store
        op_max = store.get_max_offset_in_queue(TRANS_OP_HALF_TOPIC, 0)
        while st["op_scanned"] < op_max:
            r = store.get_message(TRANS_OP_HALF_TOPIC, 0, st["op_scanned"], 64)
            if not r.messages:
                st["op_scanned"] = max(st["op_scanned"] + 1, r.next_begin_offset)
                continue
            for m in r.messages:
                if m.tags != REMOVE_TAG:
                    continue
                for part in m.body.decode("ascii", "replace").split(OFFSET_SEPARATOR):
                    if part.strip().lstrip("-").isdigit():
                        st["done"].add(int(part))
            st["op_scanned"] = r.next_begin_offset

    def _scan_half(self: Any, now_ms: int) -> list[MessageExt]:
        """`TransactionalMessageServiceImpl.check` over half queue 0 (store thread).

        As the Java broker: a half message without an op record is checked once it is older
        (by born time) than transactionTimeOut or its CHECK_IMMUNITY_TIME_IN_SECONDS; before
        each check it is written again at the queue's end with TRANSACTION_CHECK_TIMES raised
        (`putBackHalfMsgQueue`), and the check names that renewed copy. One that already has
        transactionCheckMax checks, or is older than fileReservedTime, goes to
        TRANS_CHECK_MAX_TIME_TOPIC. The scan stops at the first message not due yet and at
        anything stored since the round began (so renewed copies wait for the next round); its
        position is kept as group CID_RMQ_SYS_TRANS's offset, so a restart resumes there.
        """
        st = self._tx_state()
        store = self.store
        self._read_ops()
        done = st["done"]
        half_max = store.get_max_offset_in_queue(TRANS_HALF_TOPIC, 0)
        reserved_ms = self.store.config.file_reserved_time * 3600 * 1000
        out: list[MessageExt] = []
        pos = max(st["half"], store.get_min_offset_in_queue(TRANS_HALF_TOPIC, 0))
        stop = False
        while pos < half_max and not stop:
            r = store.get_message(TRANS_HALF_TOPIC, 0, pos, 32)
            if not r.messages:
                if r.next_begin_offset <= pos:
                    break
                pos = r.next_begin_offset
                continue
            for m in r.messages:
                o = m.queue_offset
                if o in done:
                    pos = o + 1
                    continue
                if self._need_discard(m) or now_ms - m.born_timestamp > reserved_ms:
                    self._discard_half(m)
                    pos = o + 1
                    continue
                if m.store_timestamp >= now_ms:
                    stop = True  # stored during this round: next round
                    break
                age = now_ms - m.born_timestamp
                immunity_text = m.properties.get(P.CHECK_IMMUNITY_TIME_IN_SECONDS)
                if immunity_text is not None:
                    immunity = _immunity_ms(immunity_text, self.transaction_timeout_ms)
                    if age <= immunity:
                        if self._check_prepare_queue_offset(m):
                            pos = o + 1
                            continue
                        stop = True
                        break
                elif 0 <= age <= self.transaction_timeout_ms:
                    stop = True  # newer messages follow; they are not due either
                    break
                result = self._renew_half(m)
                if status_name(result.status) != "PUT_OK":
                    log.warning("half message %s could not be written back for its check: %s", m.msg_id,
                                status_name(result.status))
                    stop = True
                    break
                m.queue_offset, m.commit_log_offset = result.queue_offset, result.wrote_offset
                out.append(m)
                pos = o + 1
        if pos != st["half"]:
            st["half"] = pos
            self.local.offsets.commit_offset(TRANS_CHECK_GROUP, TRANS_HALF_TOPIC, 0, pos)
        return out

    def _need_discard(self: Any, m: MessageExt) -> bool:
        """`needDiscard`: TRANSACTION_CHECK_TIMES at transactionCheckMax, else raised by one (1 at first)."""
        text = m.properties.get(P.TRANSACTION_CHECK_TIMES)
        times = 1
        if text is not None:
            times = _java_int(text)
            if times >= self.transaction_check_max:
                return True
            times += 1
        m.properties[P.TRANSACTION_CHECK_TIMES] = str(times)
        return False

    def _check_prepare_queue_offset(self: Any, m: MessageExt) -> bool:
        """`checkPrepareQueueOffset`: inside its immunity a half is written again, pointing at the first copy."""
        first = m.properties.get(P.TRAN_PREPARED_QUEUE_OFFSET)
        if first is None:
            extra = {P.TRAN_PREPARED_QUEUE_OFFSET: str(m.queue_offset)}
        else:
            offset = _java_int(first)
            if offset == -1:
                return False
            if offset in self._tx_state()["done"]:
                return True
            extra = None
        return status_name(self._renew_half(m, extra).status) == "PUT_OK"

    async def check_transactions(self: Any) -> int:
        """One round of `TransactionalMessageCheckService`: CHECK_TRANSACTION_STATE to producers.

        Not on a slave: its half messages are its master's, which checks them (Java starts the
        service on a master only, `changeSpecialServiceStatus`)."""
        if getattr(self.store.config, "is_slave", False):
            return 0
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


def _copy_half(m: MessageExt, topic: str, queue_id: int, props: dict[str, str]) -> MessageExt:
    """A stored half message as a new record on `topic`: body, flags, born time and hosts kept."""
    return MessageExt(topic=topic, body=m.body, queue_id=queue_id, flag=m.flag, properties=props,
                      sys_flag=m.sys_flag, born_timestamp=m.born_timestamp, born_host=m.born_host,
                      store_host=m.store_host, reconsume_times=m.reconsume_times)


def _java_int(text: str) -> int:
    """`TransactionalMessageServiceImpl.getInt/getLong`: -1 for what does not parse."""
    try:
        return int(text)
    except ValueError:
        return -1


def _immunity_ms(text: str, timeout_ms: int) -> int:
    """`getImmunityTime`: seconds in the property, transactionTimeOut when it does not parse."""
    seconds = _java_int(text)
    return timeout_ms if seconds == -1 else seconds * 1000
