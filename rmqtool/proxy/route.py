"""QueryRoute and QueryAssignment (`RouteActivity`), in cluster mode.

The broker's queues come from the name server's route of the topic; as in Apache's proxy in
cluster mode, every broker of the answer is reached through the proxy itself: its endpoints are
the addresses the client asked with, on the gRPC port (`useEndpointPortFromRequest=false`).
Only this process's broker is behind this gRPC port, so only its queues are listed.
"""

from __future__ import annotations

from typing import Any

from rmqtool.proxy.context import ProxyContext, ProxyCore
from rmqtool.proxy.pb import definition as d
from rmqtool.proxy.pb import service as s
from rmqtool.proxy.status import Code, ProxyError, ok, status
from rmqtool.proxy.validate import validate_consumer_group, validate_topic
from rmqtool.remoting.bodies import QueueData

PERM_READ, PERM_WRITE = 4, 2
_TYPES = {
    "NORMAL": [d.NORMAL], "FIFO": [d.FIFO], "TRANSACTION": [d.TRANSACTION], "DELAY": [d.DELAY],
    "MIXED": [d.NORMAL, d.FIFO, d.DELAY, d.TRANSACTION],
}


def permission(perm: int) -> int:
    r, w = bool(perm & PERM_READ), bool(perm & PERM_WRITE)
    return d.READ_WRITE if r and w else d.READ if r else d.WRITE if w else d.NONE


class RouteActivity:
    core: ProxyCore

    def _queue_datas(self, topic: str) -> list[QueueData]:
        """The name server's QueueData of this broker for `topic`, or TOPIC_NOT_FOUND."""
        core = self.core
        routes = getattr(core.controller, "routes", None)
        route = routes.pickup_topic_route_data(topic) if routes is not None else None
        if route is not None:
            queues = [q for q in route.queueDatas if q.brokerName == core.broker_name]
        else:
            tc = core.topic_config(topic)
            queues = [] if tc is None else [QueueData(core.broker_name, tc.read_queue_nums, tc.write_queue_nums,
                                                      tc.perm, tc.topic_sys_flag)]
        if not queues:
            raise ProxyError(Code.TOPIC_NOT_FOUND, f"No topic route info in name server for the topic: {topic}")
        return queues

    def _broker(self, endpoints: Any) -> Any:
        addrs = [d.Address(host=a.host, port=self.core.grpc_port) for a in endpoints.addresses]
        scheme = endpoints.scheme if endpoints.scheme != d.ADDRESS_SCHEME_UNSPECIFIED else d.IPv4
        return d.Broker(name=self.core.broker_name, id=0, endpoints=d.Endpoints(scheme=scheme, addresses=addrs))

    def query_route(self, ctx: ProxyContext, req: Any) -> Any:
        validate_topic(req.topic.name)
        queues = self._queue_datas(req.topic.name)
        broker = self._broker(req.endpoints)
        accept = _TYPES.get(self.core.topic_message_type(req.topic.name), [d.MESSAGE_TYPE_UNSPECIFIED])
        out = []
        for qd in queues:
            out.extend(_message_queues(qd, req.topic, accept, broker))
        return s.QueryRouteResponse(status=ok(), message_queues=out)

    def query_assignment(self, ctx: ProxyContext, req: Any) -> Any:
        validate_topic(req.topic.name)
        validate_consumer_group(req.group.name)
        queues = self._queue_datas(req.topic.name)
        group = self.core.group_config(req.group.name)
        fifo = bool(group is not None and group.consume_message_orderly)
        broker = self._broker(req.endpoints)
        assignments = []
        for qd in queues:
            if not qd.perm & PERM_READ or qd.readQueueNums <= 0:
                continue
            ids = range(qd.readQueueNums) if fifo else (-1,)
            for i in ids:
                mq = d.MessageQueue(topic=req.topic, id=i, permission=permission(qd.perm), broker=broker)
                assignments.append(d.Assignment(message_queue=mq))
        if not assignments:
            return s.QueryAssignmentResponse(status=status(Code.FORBIDDEN, "no readable queue"))
        return s.QueryAssignmentResponse(status=ok(), assignments=assignments)


def _message_queues(qd: QueueData, topic: Any, accept: list[int], broker: Any) -> list[Any]:
    """`genMessageQueueFromQueueData`: read-only, write-only, then read-write queue ids."""
    perm = qd.perm
    r = w = rw = n = 0
    if perm & PERM_WRITE and perm & PERM_READ:
        rw = min(qd.writeQueueNums, qd.readQueueNums)
        r, w = qd.readQueueNums - rw, qd.writeQueueNums - rw
    elif perm & PERM_WRITE:
        w = qd.writeQueueNums
    elif perm & PERM_READ:
        r = qd.readQueueNums
    elif not perm & (PERM_READ | PERM_WRITE):
        n = max(1, qd.writeQueueNums, qd.readQueueNums)
    out = []
    qid = 0
    for count, p in ((r, d.READ), (w, d.WRITE), (rw, d.READ_WRITE), (n, d.NONE)):
        for _ in range(count):
            out.append(d.MessageQueue(topic=topic, id=qid, permission=p, broker=broker, accept_message_types=accept))
            qid += 1
    return out
