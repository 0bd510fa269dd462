"""What operators ask about clients: GET_PRODUCER_CONNECTION_LIST 204, GET_ALL_PRODUCER_INFO 328,
and the requests the broker passes on to one consumer and answers with the consumer's own
response: GET_CONSUMER_RUNNING_INFO 307 (`mqadmin consumerStatus`, the dashboard's consumer
page) and CONSUME_MESSAGE_DIRECTLY 309 (`AdminBrokerProcessor.callConsumer`).
"""

from __future__ import annotations

from typing import Any

from rmqtool.errors import RemotingError
from rmqtool.remoting import fastjson
from rmqtool.remoting.bodies import Connection as ConnectionBody
from rmqtool.remoting.codes import ResponseCode
from rmqtool.remoting.command import RemotingCommand
from rmqtool.remoting.transport import Connection

CALL_CLIENT_TIMEOUT_S = 10.0  # Broker2Client.callClient
V3_1_8_SNAPSHOT = 85  # MQVersion ordinal: older clients cannot answer


class ClientAdminProcessor:
    async def process_producer_connection_list(self: Any, cmd: RemotingCommand,
                                               conn: Connection) -> RemotingCommand:
        group = (cmd.ext_fields or {}).get("producerGroup", "")
        chans = self.clients.producers.get(group)
        if chans:
            body = fastjson.bean(connectionSet=[ConnectionBody(i.client_id, str(i.conn.peer), i.language,
                                                               i.version).to_json_obj() for i in chans.values()])
            return cmd.response(body=fastjson.dumpb(body))
        return cmd.response(ResponseCode.SYSTEM_ERROR, remark=f"the producer group[{group}] not exist")

    async def process_all_producer_info(self: Any, cmd: RemotingCommand, conn: Connection) -> RemotingCommand:
        """ProducerTableInfo: group -> ProducerInfo (remoteIP as Netty prints the channel's address)."""
        data = {g: [fastjson.bean(clientId=i.client_id, language=i.language, lastUpdateTimestamp=i.last_update_ms,
                                  remoteIP=f"/{i.conn.peer}", version=i.version) for i in chans.values()]
                for g, chans in self.clients.producers.items() if chans}
        return cmd.response(body=fastjson.dumpb(fastjson.bean(data=data)))

    async def process_call_consumer(self: Any, cmd: RemotingCommand, conn: Connection) -> RemotingCommand:
        """`callConsumer`: the same request to the consumer's channel, its answer back as ours."""
        ext = cmd.ext_fields or {}
        group, client_id = ext.get("consumerGroup", ""), ext.get("clientId", "")
        info = self.clients.consumers.get(group)
        ch = next((c for c in info.channels.values() if c.client_id == client_id), None) if info else None
        if ch is None:
            return cmd.response(ResponseCode.SYSTEM_ERROR, remark=f"The Consumer <{group}> <{client_id}> not online")
        if ch.version < V3_1_8_SNAPSHOT:
            return cmd.response(ResponseCode.SYSTEM_ERROR,
                                remark=f"The Consumer <{client_id}> Version <{ch.version}> too low to finish, "
                                       "please upgrade it to V3_1_8_SNAPSHOT")
        try:
            r = await ch.conn.request(RemotingCommand.request(cmd.code, dict(ext), cmd.body), CALL_CLIENT_TIMEOUT_S)
        except RemotingError as e:
            code = ResponseCode.CONSUME_MSG_TIMEOUT if "within" in str(e) else ResponseCode.SYSTEM_ERROR
            what = "Timeout" if code == ResponseCode.CONSUME_MSG_TIMEOUT else "Exception"
            return cmd.response(code, remark=f"consumer <{group}> <{client_id}> {what}: {e}")
        return cmd.response(r.code, dict(r.ext_fields or {}), r.body, remark=r.remark)
