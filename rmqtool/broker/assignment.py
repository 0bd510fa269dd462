"""QUERY_ASSIGNMENT (400): the broker, not the client, decides which queues a consumer reads.

Followed: Java 5.3.3's `QueryAssignmentProcessor`. A 5.x remoting push consumer whose
`clientRebalance` is false (`setClientRebalance(false)`, not orderly, clustering) asks a broker
of the topic for its share instead of computing it; the answer also carries each queue's message
request mode (PULL, or POP from `setConsumeMode` / SET_MESSAGE_REQUEST_MODE 401, whose store is
`AdminProcessor.message_request_modes`), which switches the client between pulling and popping.
In POP mode the queues come back with queueId -1 (pop from every queue of that broker) unless the
mode's `popShareQueueNum` limits each client to its own share plus that of the N clients after it.
Retry topics are always PULL, as in Java.
"""

from __future__ import annotations

import logging
from typing import Any

from rmqtool.broker.confvalues import conf_flag, conf_int
from rmqtool.remoting import fastjson
from rmqtool.remoting.bodies import MessageQueue, TopicRouteData
from rmqtool.remoting.codes import RequestCode, ResponseCode
from rmqtool.remoting.command import RemotingCommand
from rmqtool.remoting.transport import Connection

log = logging.getLogger("rmqtool.broker.assignment")

RETRY_GROUP_TOPIC_PREFIX = "%RETRY%"
LMQ_PREFIX = "%LMQ%"
LMQ_QUEUE_ID = 0
PERM_READ = 4


def _mq_key(mq: MessageQueue) -> tuple[str, str, int]:
    """`MessageQueue.compareTo`: topic, then broker name, then queue id."""
    return mq.topic, mq.brokerName, mq.queueId


def _check(current: str, mq_all: list[MessageQueue], cid_all: list[str]) -> bool:
    """`AbstractAllocateMessageQueueStrategy.check` (its IllegalArgumentExceptions end the
    allocation with no answer, as Java's caller catches them)."""
    if not current:
        raise ValueError("currentCID is empty")
    if not mq_all:
        raise ValueError("mqAll is null or mqAll empty")
    if not cid_all:
        raise ValueError("cidAll is null or cidAll empty")
    return current in cid_all


def allocate_averagely(current: str, mq_all: list[MessageQueue], cid_all: list[str]) -> list[MessageQueue]:
    """`AllocateMessageQueueAveragely` ("AVG"): consecutive blocks, the first ones one larger."""
    if not _check(current, mq_all, cid_all):
        return []
    index, n, c = cid_all.index(current), len(mq_all), len(cid_all)
    mod = n % c
    if n <= c:
        size = 1
    else:
        size = n // c + 1 if mod > 0 and index < mod else n // c
    start = index * size if mod > 0 and index < mod else index * size + mod
    return [mq_all[start + i] for i in range(max(0, min(size, n - start)))]


def allocate_averagely_by_circle(current: str, mq_all: list[MessageQueue], cid_all: list[str]) -> list[MessageQueue]:
    """`AllocateMessageQueueAveragelyByCircle` ("AVG_BY_CIRCLE"): every c-th queue from the client's index."""
    if not _check(current, mq_all, cid_all):
        return []
    index = cid_all.index(current)
    return [mq_all[i] for i in range(index, len(mq_all)) if i % len(cid_all) == index]


STRATEGIES = {"AVG": allocate_averagely, "AVG_BY_CIRCLE": allocate_averagely_by_circle}


def allocate_for_pop(strategy: Any, current: str, mq_all: list[MessageQueue], cid_all: list[str],
                     share: int) -> list[MessageQueue]:
    """`QueryAssignmentProcessor.allocate4Pop`: with no share limit (or one reaching every other
    client) each client pops every queue (queueId -1 per broker, one entry per queue as Java
    returns them, equal entries merging in the answer's set); else its own share and the shares of
    the `share` clients after it, or one queue each when there are more clients than queues."""
    if share <= 0 or share >= len(cid_all) - 1:
        return [MessageQueue(mq.topic, mq.brokerName, -1) for mq in mq_all]
    if len(cid_all) <= len(mq_all):
        out = strategy(current, mq_all, cid_all)
        if current in cid_all:
            index = cid_all.index(current)
            for _ in range(share):
                index = (index + 1) % len(cid_all)
                out.extend(strategy(cid_all[index], mq_all, cid_all))
        return out
    _check(current, mq_all, cid_all)
    if current not in cid_all:
        return []
    return [mq_all[cid_all.index(current) % len(mq_all)]]


def subscribe_info(topic: str, route: TopicRouteData) -> set[MessageQueue]:
    """`MQClientInstance.topicRouteData2TopicSubscribeInfo`: every read queue of every readable broker."""
    return {MessageQueue(topic, qd.brokerName, i) for qd in route.queueDatas if qd.perm & PERM_READ
            for i in range(qd.readQueueNums)}


class QueryAssignmentProcessor:
    """QUERY_ASSIGNMENT for BrokerController.handlers (SET_MESSAGE_REQUEST_MODE stays in admin/groups.py)."""

    def __init__(self, broker: Any) -> None:
        self.broker = broker
        extra: dict[str, str] = dict(getattr(broker.config, "extra", {}) or {})
        mode = extra.get("defaultMessageRequestMode", "PULL").strip().upper()
        self.default_mode = mode if mode in ("PULL", "POP") else "PULL"
        self.default_pop_share_queue_num = conf_int(extra, "defaultPopShareQueueNum", -1)
        self.server_load_balancer_enable = conf_flag(extra, "serverLoadBalancerEnable", True)

    def handlers(self) -> dict[int, Any]:
        return {RequestCode.QUERY_ASSIGNMENT: self.process_query_assignment}

    async def process_query_assignment(self, cmd: RemotingCommand, conn: Connection) -> RemotingCommand:
        try:
            body = fastjson.loads(cmd.body or b"")
            topic, group = body["topic"], body["consumerGroup"]
            if not isinstance(topic, str) or not isinstance(group, str):  # Java: a NullPointerException
                raise ValueError("no topic or consumerGroup")
            client_id, strategy = str(body.get("clientId") or ""), body.get("strategyName")
            model = str(body["messageModel"])
            if model not in ("CLUSTERING", "BROADCASTING"):
                raise ValueError(f"no MessageModel {model}")
        except (ValueError, TypeError, KeyError, AttributeError) as e:
            return cmd.response(ResponseCode.SYSTEM_ERROR, remark=f"bad query assignment body: {e}")
        mode, share = self.request_mode(topic, group)
        queues = await self.load_balance(topic, group, client_id, model, strategy, mode, share)
        assignments = None
        if queues is not None:
            assignments = [fastjson.bean(messageQueue=mq, mode=mode) for mq in sorted(set(queues), key=_mq_key)]
        return cmd.response(body=fastjson.dumpb(fastjson.bean(messageQueueAssignments=assignments)))

    def request_mode(self, topic: str, group: str) -> tuple[str, int]:
        """The stored SetMessageRequestModeRequestBody, else PULL for retry topics and the broker's
        defaultMessageRequestMode (with defaultPopShareQueueNum when POP)."""
        stored = (self.broker.message_request_modes.get(topic) or {}).get(group)
        if stored is not None:
            try:
                return str(stored.get("mode") or "PULL"), int(stored.get("popShareQueueNum") or 0)
            except (TypeError, ValueError):
                return "PULL", 0
        if topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
            return "PULL", 0
        return self.default_mode, self.default_pop_share_queue_num if self.default_mode == "POP" else 0

    async def topic_queues(self, topic: str) -> set[MessageQueue] | None:
        """`TopicRouteInfoManager.getTopicSubscribeInfo`: the topic's queues as the name server
        routes them (the embedded one, else the first configured one that answers), or this
        broker's own topic config when it has no name server to ask."""
        route: TopicRouteData | None = None
        b = self.broker
        if b.routes is not None:
            route = b.routes.pickup_topic_route_data(topic)
            return subscribe_info(topic, route) if route is not None else None
        if b.registrar is not None:
            for addr in b.registrar.addrs:
                try:
                    r = await b.registrar._call(addr, RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC,
                                                                             {"topic": topic}))
                except Exception as e:  # noqa: BLE001 - the next name server, as Java's client tries
                    log.debug("route of %s from %s: %s", topic, addr, e)
                    continue
                if r.code == ResponseCode.SUCCESS and r.body:
                    try:
                        return subscribe_info(topic, TopicRouteData.from_json_obj(fastjson.loads(r.body)))
                    except (ValueError, TypeError, KeyError, AttributeError):
                        continue
                if r.code == ResponseCode.TOPIC_NOT_EXIST:
                    return None
            return None
        tc = b.local.topics.select(topic)
        if tc is None:
            return None
        return {MessageQueue(topic, b.broker_name, i) for i in range(tc.read_queue_nums)} if tc.perm & PERM_READ \
            else set()

    async def load_balance(self, topic: str, group: str, client_id: str, model: str, strategy_name: Any,
                           mode: str, share: int) -> list[MessageQueue] | None:
        """`doLoadBalance`: None is "no valid answer" (the client keeps what it has), [] is "nothing"."""
        if model == "BROADCASTING":
            q = await self.topic_queues(topic)
            return None if q is None else list(q)
        if topic.startswith(LMQ_PREFIX):
            mq_set: set[MessageQueue] | None = {MessageQueue(topic, self.broker.broker_name, LMQ_QUEUE_ID)}
        else:
            mq_set = await self.topic_queues(topic)
        if mq_set is None:
            return None
        if not self.server_load_balancer_enable:
            return list(mq_set)
        cid_all = sorted(self.broker.clients.consumer_ids(group))
        if not cid_all and self.broker.clients.consumers.get(group) is None:
            return None
        mq_all = sorted(mq_set, key=_mq_key)
        strategy = STRATEGIES.get(str(strategy_name))
        if strategy is None:
            log.warning("QueryLoad: unsupported strategy [%s]", strategy_name)
            return None
        try:
            if mode == "POP":
                return allocate_for_pop(strategy, client_id, mq_all, cid_all, share)
            return strategy(client_id, mq_all, cid_all)
        except ValueError as e:
            log.warning("QueryLoad: no assignment for group[%s] topic[%s]: %s", group, topic, e)
            return None
