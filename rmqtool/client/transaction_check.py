"""A broker's CHECK_TRANSACTION_STATE: ask the producer group's listener, answer END_TRANSACTION.

`ClientRemotingProcessor#checkTransactionState` finds the `MQProducerInner` of the message's
group, and `DefaultMQProducerImpl#checkTransactionState` runs the listener on the check
executor and sends the outcome oneway. Kept apart from producer.py so `ClientInstance`, which
dispatches the request, does not import the producer that imports it.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from typing import Any

from rmqtool.client.members import MQProducerInner
from rmqtool.client.message import LocalTransactionState
from rmqtool.layouts import properties as P
from rmqtool.layouts.constants import TRANSACTION_COMMIT_TYPE, TRANSACTION_NOT_TYPE, TRANSACTION_ROLLBACK_TYPE
from rmqtool.layouts.message import decode_record
from rmqtool.remoting.codes import RequestCode
from rmqtool.remoting.command import RemotingCommand
from rmqtool.remoting.headers import CheckTransactionStateRequestHeader, EndTransactionRequestHeader

log = logging.getLogger("rmqtool.client")

# the END_TRANSACTION commitOrRollback flag of each local transaction state
TX_FLAG = {LocalTransactionState.COMMIT_MESSAGE: TRANSACTION_COMMIT_TYPE,
           LocalTransactionState.ROLLBACK_MESSAGE: TRANSACTION_ROLLBACK_TYPE,
           LocalTransactionState.UNKNOW: TRANSACTION_NOT_TYPE}


async def check_transaction_state(producers: Mapping[str, MQProducerInner], language: str, cmd: RemotingCommand,
                                  conn: Any) -> None:
    """CHECK_TRANSACTION_STATE from a broker: ask the listener, answer with END_TRANSACTION (oneway)."""
    try:
        msg = decode_record(cmd.body, check_crc=False)
    except Exception as e:
        log.warning("undecodable transaction check: %s", e)
        return
    group = msg.properties.get(P.PGROUP, "")
    producer = producers.get(group)
    if producer is None or producer.transaction_listener is None:
        log.warning("transaction check for group %s without a listener", group)
        return
    try:
        check = CheckTransactionStateRequestHeader.from_ext(cmd.ext_fields)
    except ValueError as e:
        log.warning("bad transaction check header: %s", e)
        return
    listener = producer.transaction_listener
    loop = asyncio.get_running_loop()
    remark = None
    try:
        state = await loop.run_in_executor(producer.check_executor, listener.check_local_transaction, msg)
    except Exception as e:  # Java: the exception text goes into the remark, state UNKNOW
        state, remark = LocalTransactionState.UNKNOW, f"checkLocalTransactionState Exception: {e}"
    header = EndTransactionRequestHeader(
        producerGroup=group, tranStateTableOffset=check.tranStateTableOffset,
        commitLogOffset=check.commitLogOffset, commitOrRollback=TX_FLAG[LocalTransactionState(state)],
        msgId=msg.properties.get(P.UNIQ_KEY) or check.msgId or "", fromTransactionCheck=True,
        transactionId=check.transactionId, topic=msg.topic).to_ext()
    req = RemotingCommand.request(RequestCode.END_TRANSACTION, header, oneway=True)
    req.remark = remark
    req.language = language
    await conn.oneway(req)
