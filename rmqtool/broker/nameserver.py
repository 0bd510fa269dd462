"""Name server: RouteInfoManager and its request processor (protocol.md §3, §8).

Holds which broker serves which topic. The broker of `rmqtool serve` registers in-process;
other broker processes (Apache's or another `serve`) register over REGISTER_BROKER and expire
at once when their channel closes, or when not heard of for their own heartbeat timeout: the
register header's `heartbeatTimeoutMillis` (10 s from an acting-master broker), else 120 s.
Besides a registration, QUERY_DATA_VERSION (a 5.x broker with `forceRegister=false` asks it every
30 s and registers only when its topics changed; with `enableSlaveActingMaster` it is the 1 s
heartbeat) and BROKER_HEARTBEAT count as hearing of a broker, as in Java's name server.
"""

from __future__ import annotations

import logging
import time
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field

from rmqtool.broker.nameserver_admin import NamesrvAdminProcessor
from rmqtool.remoting import fastjson
from rmqtool.remoting.bodies import (
    BrokerData,
    BrokerMemberGroup,
    ClusterInfo,
    DataVersion,
    GetBrokerMemberGroupResponseBody,
    KVTable,
    QueueData,
    RegisterBrokerBody,
    TopicConfig,
    TopicRouteData,
)
from rmqtool.remoting.codes import V4_9_4, RequestCode, ResponseCode
from rmqtool.remoting.command import RemotingCommand
from rmqtool.remoting.headers import (
    BrokerHeartbeatRequestHeader,
    GetBrokerMemberGroupRequestHeader,
    GetRouteInfoRequestHeader,
    HeaderError,
    QueryDataVersionRequestHeader,
    QueryDataVersionResponseHeader,
    RegisterBrokerRequestHeader,
    RegisterBrokerResponseHeader,
    UnRegisterBrokerRequestHeader,
)
from rmqtool.remoting.transport import Connection

log = logging.getLogger("rmqtool.namesrv")

PERM_WRITE = 2
# Java's DEFAULT_BROKER_CHANNEL_EXPIRED_TIME: the timeout of a broker whose registration names none
DEFAULT_BROKER_CHANNEL_EXPIRED_TIME = 120_000


@dataclass
class BrokerLiveInfo:
    last_update_ms: int
    data_version: DataVersion
    conn: Connection | None
    ha_server_addr: str = ""
    # Java keys brokerLiveTable by BrokerAddrInfo(clusterName, brokerAddr); we key by address and
    # keep the cluster so that queries naming another cluster miss, as they do in Java
    cluster_name: str = ""
    # set by each registration (a later one without the header goes back to the default), kept by
    # heartbeats, which only refresh last_update_ms
    heartbeat_timeout_millis: int = DEFAULT_BROKER_CHANNEL_EXPIRED_TIME

    def expired(self, now_ms: int) -> bool:
        """Java's `(last + timeoutMillis) < now`: silent for longer than this broker's own timeout."""
        return self.last_update_ms + self.heartbeat_timeout_millis < now_ms


@dataclass
class RouteInfoManager:
    """`RouteInfoManager` of 4.x: topic -> queue data, broker name -> addresses, liveness."""

    clock: Callable[[], int] = field(default=lambda: int(time.time() * 1000))
    topic_queue_table: dict[str, dict[str, QueueData]] = field(default_factory=dict)
    broker_addr_table: dict[str, BrokerData] = field(default_factory=dict)
    cluster_addr_table: dict[str, set[str]] = field(default_factory=dict)
    broker_live_table: dict[str, BrokerLiveInfo] = field(default_factory=dict)
    # NamesrvConfig.deleteTopicWithBrokerRegistration (false in 5.x): a registration without a
    # topic leaves its queue data alone; true drops it. Kept off, a slave that registers as the
    # prime slave of a dead master before SlaveSynchronize copied the topic table does not wipe
    # the master's routes that consumers need to read the slave
    delete_topic_with_broker_registration: bool = False

    def register_broker(self, cluster: str, addr: str, name: str, broker_id: int, ha_addr: str,
                        topics: dict[str, TopicConfig] | None, data_version: DataVersion,
                        conn: Connection | None = None, heartbeat_timeout_millis: int | None = None,
                        enable_acting_master: bool | None = False) -> tuple[str | None, str | None]:
        """`registerBroker`; `heartbeat_timeout_millis` None (no header field) means the 120 s default.

        Topics come from the master (id 0) or, from a 5.x broker (`enable_acting_master` not None),
        the prime slave: the lowest id of its group, which a slave is while its master is not
        registered. Returns the RegisterBrokerResult's (haServerAddr, masterAddr): for a slave the
        HA address and address of its live master, else (None, None), as Java answers."""
        self.cluster_addr_table.setdefault(cluster, set()).add(name)
        bd = self.broker_addr_table.get(name)
        first = bd is None
        if bd is None:
            bd = self.broker_addr_table[name] = BrokerData(cluster, name, {})
        for bid, a in list(bd.brokerAddrs.items()):  # the same address under another id moves
            if a == addr and bid != broker_id:
                del bd.brokerAddrs[bid]
        first = first or bd.brokerAddrs.get(broker_id) != addr
        bd.brokerAddrs[broker_id] = addr
        prev = self.broker_live_table.get(addr)
        changed = prev is None or prev.data_version != data_version
        prime_slave = enable_acting_master is not None and broker_id != 0 and broker_id == min(bd.brokerAddrs)
        if (broker_id == 0 or prime_slave) and topics is not None and (changed or first):
            # an acting master (a prime slave with enableActingMaster) is listed read-only
            wipe = PERM_WRITE if prime_slave and enable_acting_master else 0
            table = self.topic_queue_table
            for tc in topics.values():
                queues = table.get(tc.topicName)
                if queues is None:
                    queues = table[tc.topicName] = {}
                perm = tc.perm & ~wipe
                qd = queues.get(name)
                # an unchanged topic keeps its QueueData: a broker re-registers its whole table
                # for each new topic, and 1000 new objects each time kept the garbage collector
                # busy on the event loop (full collections every few registrations)
                if qd is None or qd.readQueueNums != tc.readQueueNums or qd.writeQueueNums != tc.writeQueueNums \
                        or qd.perm != perm or qd.topicSysFlag != tc.topicSysFlag:
                    queues[name] = QueueData(name, tc.readQueueNums, tc.writeQueueNums, perm, tc.topicSysFlag)
            # topics this broker no longer has lose its queue data, only when configured so
            for topic in list(self.topic_queue_table) if self.delete_topic_with_broker_registration else ():
                if topic not in topics and name in self.topic_queue_table[topic]:
                    del self.topic_queue_table[topic][name]
                    if not self.topic_queue_table[topic]:
                        del self.topic_queue_table[topic]
        timeout = DEFAULT_BROKER_CHANNEL_EXPIRED_TIME if heartbeat_timeout_millis is None else heartbeat_timeout_millis
        self.broker_live_table[addr] = BrokerLiveInfo(self.clock(), data_version, conn, ha_addr, cluster, timeout)
        if broker_id != 0:
            master = bd.brokerAddrs.get(0)
            live = self._live(cluster, master) if master is not None else None
            if live is not None:
                return live.ha_server_addr, master
        return None, None

    def _live(self, cluster: str, addr: str) -> BrokerLiveInfo | None:
        info = self.broker_live_table.get(addr)
        return info if info is not None and info.cluster_name == cluster else None

    def query_broker_topic_config(self, cluster: str, addr: str) -> DataVersion | None:
        """`queryBrokerTopicConfig`: the DataVersion of the broker's last registration."""
        info = self._live(cluster, addr)
        return info.data_version if info is not None else None

    def is_broker_topic_config_changed(self, cluster: str, addr: str, data_version: DataVersion | None) -> bool:
        """`isBrokerTopicConfigChanged`: unknown broker, or a version other than the registered one."""
        prev = self.query_broker_topic_config(cluster, addr)
        return prev is None or prev != data_version

    def update_broker_info_update_timestamp(self, cluster: str, addr: str) -> None:
        """`updateBrokerInfoUpdateTimestamp`: the broker is alive; an unknown one stays unknown."""
        info = self._live(cluster, addr)
        if info is not None:
            info.last_update_ms = self.clock()

    def unregister_broker(self, cluster: str, addr: str, name: str, broker_id: int) -> None:
        self.broker_live_table.pop(addr, None)
        bd = self.broker_addr_table.get(name)
        if bd is None:
            return
        if bd.brokerAddrs.get(broker_id) == addr:
            del bd.brokerAddrs[broker_id]
        if not bd.brokerAddrs:
            self._remove_broker_name(name)

    def _remove_broker_name(self, name: str) -> None:
        self.broker_addr_table.pop(name, None)
        for names in self.cluster_addr_table.values():
            names.discard(name)
        for cluster in [c for c, names in self.cluster_addr_table.items() if not names]:
            del self.cluster_addr_table[cluster]
        for topic in list(self.topic_queue_table):
            self.topic_queue_table[topic].pop(name, None)
            if not self.topic_queue_table[topic]:
                del self.topic_queue_table[topic]

    def _drop_addr(self, addr: str) -> None:
        self.broker_live_table.pop(addr, None)
        for name, bd in list(self.broker_addr_table.items()):
            for bid, a in list(bd.brokerAddrs.items()):
                if a == addr:
                    del bd.brokerAddrs[bid]
            if not bd.brokerAddrs:
                self._remove_broker_name(name)

    def scan_not_active_broker(self, now_ms: int | None = None) -> list[str]:
        """`scanNotActiveBroker`: drop brokers silent for longer than their own heartbeat timeout
        (never the in-process one, which has no channel and is refreshed by its controller)."""
        now = self.clock() if now_ms is None else now_ms
        dead = [a for a, info in self.broker_live_table.items() if info.conn is not None and info.expired(now)]
        for addr in dead:
            info = self.broker_live_table[addr]
            log.info("broker %s expired (not heard of for %d ms)", addr, info.heartbeat_timeout_millis)
            self._drop_addr(addr)
            if info.conn is not None:
                info.conn.abort()  # Java closes the silent broker's channel (RemotingHelper.closeChannel)
        return dead

    def on_channel_destroy(self, conn: Connection) -> None:
        for addr in [a for a, info in self.broker_live_table.items() if info.conn is conn]:
            self._drop_addr(addr)

    def pickup_topic_route_data(self, topic: str) -> TopicRouteData | None:
        qds = self.topic_queue_table.get(topic)
        if not qds:
            return None
        route = TopicRouteData()
        for name in sorted(qds):
            bd = self.broker_addr_table.get(name)
            if bd is None:
                continue
            route.queueDatas.append(qds[name])
            route.brokerDatas.append(BrokerData(bd.cluster, bd.brokerName, dict(bd.brokerAddrs)))
        if not route.brokerDatas:
            return None
        return route

    def get_broker_member_group(self, cluster: str | None, name: str | None) -> BrokerMemberGroup:
        """`getBrokerMemberGroup`: the addresses registered under `name`, whatever their cluster;
        the group carries the asked-for cluster. An unknown name gives an empty group, not an error."""
        bd = self.broker_addr_table.get(name) if name is not None else None
        return BrokerMemberGroup(cluster, name, dict(bd.brokerAddrs) if bd is not None else {})

    def cluster_info(self) -> ClusterInfo:
        return ClusterInfo({n: BrokerData(b.cluster, b.brokerName, dict(b.brokerAddrs))
                            for n, b in self.broker_addr_table.items()},
                           {c: sorted(n) for c, n in self.cluster_addr_table.items()})


class NameServerProcessor:
    """`DefaultRequestProcessor`: answers the name-server request codes."""

    def __init__(self, routes: RouteInfoManager, admin: NamesrvAdminProcessor | None = None) -> None:
        self.routes = routes
        self.admin = admin  # the KV config family and the name server's own configuration

    def handles(self, code: int) -> bool:
        if self.admin is not None and self.admin.handles(code):
            return True
        return code in (RequestCode.GET_ROUTEINFO_BY_TOPIC, RequestCode.GET_BROKER_CLUSTER_INFO,
                        RequestCode.REGISTER_BROKER, RequestCode.UNREGISTER_BROKER,
                        RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER, RequestCode.QUERY_DATA_VERSION,
                        RequestCode.BROKER_HEARTBEAT, RequestCode.GET_BROKER_MEMBER_GROUP)

    async def process(self, cmd: RemotingCommand, conn: Connection) -> RemotingCommand:
        try:
            if self.admin is not None and self.admin.handles(cmd.code):
                return self.admin.process(cmd)
            if cmd.code == RequestCode.GET_ROUTEINFO_BY_TOPIC:
                return self.get_route_info(cmd)
            if cmd.code == RequestCode.GET_BROKER_CLUSTER_INFO:
                return cmd.response(body=fastjson.dumpb(self.routes.cluster_info(), quote_keys=False))
            if cmd.code == RequestCode.REGISTER_BROKER:
                return self.register_broker(cmd, conn)
            if cmd.code == RequestCode.UNREGISTER_BROKER:
                h = UnRegisterBrokerRequestHeader.from_ext(cmd.ext_fields)
                self.routes.unregister_broker(h.clusterName, h.brokerAddr, h.brokerName, h.brokerId)
                return cmd.response()
            if cmd.code == RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER:
                return cmd.response(body=fastjson.dumpb({"topicList": sorted(self.routes.topic_queue_table)}))
            if cmd.code == RequestCode.QUERY_DATA_VERSION:
                return self.query_data_version(cmd)
            if cmd.code == RequestCode.BROKER_HEARTBEAT:
                hb = BrokerHeartbeatRequestHeader.from_ext(cmd.ext_fields)
                self.routes.update_broker_info_update_timestamp(hb.clusterName, hb.brokerAddr)
                return cmd.response()
            if cmd.code == RequestCode.GET_BROKER_MEMBER_GROUP:
                return self.get_broker_member_group(cmd)
        except HeaderError as e:
            return cmd.response(ResponseCode.SYSTEM_ERROR, remark=str(e))
        return cmd.response(ResponseCode.REQUEST_CODE_NOT_SUPPORTED, remark=f" request type {cmd.code} not supported")

    def get_route_info(self, cmd: RemotingCommand) -> RemotingCommand:
        h = GetRouteInfoRequestHeader.from_ext(cmd.ext_fields)
        route = self.routes.pickup_topic_route_data(h.topic)
        if route is not None and self.admin is not None:
            route.orderTopicConf = self.admin.order_topic_conf(h.topic)
        if route is None:
            return cmd.response(ResponseCode.TOPIC_NOT_EXIST,
                                remark=f"No topic route info in name server for the topic: {h.topic}")
        standard = cmd.version >= V4_9_4 or bool(h.acceptStandardJsonOnly)
        body = fastjson.dumpb(route, quote_keys=standard, browser_compatible=standard)
        return cmd.response(body=body)

    def get_broker_member_group(self, cmd: RemotingCommand) -> RemotingCommand:
        """GET_BROKER_MEMBER_GROUP: always SUCCESS, even without the header's fields; the body as
        `RemotingSerializable.encode` writes it, default fastjson, so broker ids are unquoted keys
        whatever the client's version. Java's handler never clears the remark that
        `createResponseCommand` sets, so its answer carries one; ours does too."""
        h = GetBrokerMemberGroupRequestHeader.from_ext(cmd.ext_fields)
        group = self.routes.get_broker_member_group(h.clusterName, h.brokerName)
        body = fastjson.dumpb(GetBrokerMemberGroupResponseBody(group), quote_keys=False)
        return cmd.response(body=body, remark="not set any response code")

    def register_broker(self, cmd: RemotingCommand, conn: Connection) -> RemotingCommand:
        h = RegisterBrokerRequestHeader.from_ext(cmd.ext_fields)
        if h.bodyCrc32 and cmd.body and (zlib.crc32(cmd.body) & 0x7FFFFFFF) != h.bodyCrc32:
            return cmd.response(ResponseCode.SYSTEM_ERROR, remark="crc32 not match")
        try:
            body = RegisterBrokerBody.decode(cmd.body, bool(h.compressed))
        except (ValueError, KeyError, TypeError, AttributeError, zlib.error) as e:
            return cmd.response(ResponseCode.SYSTEM_ERROR, remark=f"bad register body: {e}")
        w = body.topicConfigSerializeWrapper
        ha_addr, master = self.routes.register_broker(h.clusterName, h.brokerAddr, h.brokerName, h.brokerId,
                                                      h.haServerAddr, w.topicConfigTable, w.dataVersion, conn,
                                                      h.heartbeatTimeoutMillis, h.enableActingMaster)
        resp = RegisterBrokerResponseHeader(ha_addr, master)
        return cmd.response(ext_fields=resp.to_ext(), body=fastjson.dumpb(KVTable()))

    def query_data_version(self, cmd: RemotingCommand) -> RemotingCommand:
        """`queryBrokerTopicConfig`: is the broker's DataVersion (the body) the one it registered?

        Java's broker registers again only when `changed` is true or our DataVersion (the response
        body, absent for an unknown broker) differs from its own; otherwise this request alone keeps
        it alive, so the live timestamp is refreshed whatever the answer.
        """
        h = QueryDataVersionRequestHeader.from_ext(cmd.ext_fields)
        try:
            obj = fastjson.loads(cmd.body) if cmd.body else None
            version = DataVersion.from_json_obj(obj) if obj is not None else None
        except (ValueError, TypeError, AttributeError) as e:
            return cmd.response(ResponseCode.SYSTEM_ERROR, remark=f"bad DataVersion body: {e}")
        changed = self.routes.is_broker_topic_config_changed(h.clusterName, h.brokerAddr, version)
        self.routes.update_broker_info_update_timestamp(h.clusterName, h.brokerAddr)
        stored = self.routes.query_broker_topic_config(h.clusterName, h.brokerAddr)
        body = fastjson.dumpb(stored) if stored is not None else b""
        return cmd.response(ext_fields=QueryDataVersionResponseHeader(changed).to_ext(), body=body)
