"""RecallMessage (`RecallMessageActivity`, `ProducerProcessor.recallMessage` of Apache's proxy):
take back a delay message before its delivery time with the handle its send answered.

The topic must be a DELAY (or MIXED) topic when the proxy checks message types; the handle is
decoded here only for the broker it names (serve has one), then RECALL_MESSAGE 370 goes to the
broker (broker/recall.py), whose refusals come back as the proxy's MQBrokerException statuses.
"""

from __future__ import annotations

from typing import Any

from rmqtool.broker.recall import decode_recall_handle
from rmqtool.proxy.context import ProxyContext, ProxyCore
from rmqtool.proxy.convert import check_message_type
from rmqtool.proxy.pb import service as s
from rmqtool.proxy.status import Code, ProxyError, ok, proxy_exception, remoting_error
from rmqtool.proxy.validate import validate_topic
from rmqtool.remoting.codes import RequestCode
from rmqtool.remoting.command import RemotingCommand
from rmqtool.remoting.headers import RecallMessageRequestHeader


class RecallActivity:
    core: ProxyCore

    async def recall_message(self, ctx: ProxyContext, req: Any) -> Any:
        core = self.core
        topic = req.topic.name
        validate_topic(topic)
        if core.config.enable_topic_message_type_check:
            check_message_type(core.topic_message_type(topic), "DELAY")
        try:
            _, broker_name, _, _ = decode_recall_handle(req.recall_handle)
        except ValueError as e:
            raise proxy_exception(Code.INTERNAL_SERVER_ERROR, str(e)) from None
        if broker_name != core.broker_name:  # the proxy finds no broker of that name
            raise ProxyError(Code.INTERNAL_SERVER_ERROR, f"cannot find broker {broker_name}")
        h = RecallMessageRequestHeader(topic, req.recall_handle, None, broker_name)
        cmd = RemotingCommand.request(RequestCode.RECALL_MESSAGE, h.to_ext())
        cmd.language = ctx.language
        r = await core.invoke(cmd, core.channel(ctx))
        if r.code != 0:
            raise remoting_error(r.code, r.remark)
        return s.RecallMessageResponse(status=ok(), message_id=r.ext_fields.get("msgId", ""))
