"""The name server's operator requests: the KV config family and its own configuration.

PUT_KV_CONFIG 100, GET_KV_CONFIG 101, DELETE_KV_CONFIG 102, GET_KVLIST_BY_NAMESPACE 219 (what
`mqadmin updateKvConfig / deleteKvConfig / updateOrderConf` and `updateTopic -o true` send),
UPDATE_NAMESRV_CONFIG 318 / GET_NAMESRV_CONFIG 319, WIPE_WRITE_PERM_OF_BROKER 205 /
ADD_WRITE_PERM_OF_BROKER 327, DELETE_TOPIC_IN_NAMESRV 216, GET_TOPICS_BY_CLUSTER 224 and
GET_SYSTEM_TOPIC_LIST_FROM_NS 304 (the dashboard's topic page), as Java's `DefaultRequestProcessor`
answers them, over `KVConfigManager` (persisted as `kvConfig.json`, `{"configTable": {namespace:
{key: value}}}`, after every change, loaded at start) and the name server's `Configuration`
(persisted as `namesrv.properties`). Java keeps both under `~/namesrv/`; serve keeps them under
`<storePathRootDir>/namesrv/`, next to the broker's store it runs with.
"""

from __future__ import annotations

import json
import logging
import threading
from pathlib import Path

from rmqtool.errors import StoreError
from rmqtool.remoting import fastjson
from rmqtool.remoting.bodies import KVTable
from rmqtool.remoting.codes import ResponseCode
from rmqtool.remoting.command import RemotingCommand
from rmqtool.store.jsonconfig import write_file

log = logging.getLogger("rmqtool.namesrv")

PERM_READ, PERM_WRITE = 4, 2

PUT_KV_CONFIG = 100
GET_KV_CONFIG = 101
DELETE_KV_CONFIG = 102
WIPE_WRITE_PERM_OF_BROKER = 205
DELETE_TOPIC_IN_NAMESRV = 216
GET_KVLIST_BY_NAMESPACE = 219
UPDATE_NAMESRV_CONFIG = 318
GET_NAMESRV_CONFIG = 319
ADD_WRITE_PERM_OF_BROKER = 327
GET_TOPICS_BY_CLUSTER = 224
GET_SYSTEM_TOPIC_LIST_FROM_NS = 304
ORDER_TOPIC_CONFIG = "ORDER_TOPIC_CONFIG"  # NamesrvUtil.NAMESPACE_ORDER_TOPIC_CONFIG
CODES = (PUT_KV_CONFIG, GET_KV_CONFIG, DELETE_KV_CONFIG, WIPE_WRITE_PERM_OF_BROKER, DELETE_TOPIC_IN_NAMESRV,
         GET_KVLIST_BY_NAMESPACE, UPDATE_NAMESRV_CONFIG, GET_NAMESRV_CONFIG, ADD_WRITE_PERM_OF_BROKER,
         GET_TOPICS_BY_CLUSTER, GET_SYSTEM_TOPIC_LIST_FROM_NS)

# NamesrvConfig / NettyServerConfig defaults of RocketMQ 5.3 (the keys getNamesrvConfig lists)
NAMESRV_DEFAULTS: dict[str, str] = {
    "rocketmqHome": "", "kvConfigPath": "", "configStorePath": "", "productEnvName": "center",
    "clusterTest": "false", "orderMessageEnable": "false", "returnOrderTopicConfigToBroker": "true",
    "clientRequestThreadPoolNums": "8", "defaultThreadPoolNums": "16", "clientRequestThreadPoolQueueCapacity": "50000",
    "defaultThreadPoolQueueCapacity": "10000", "scanNotActiveBrokerInterval": "5000",
    "unRegisterBrokerQueueCapacity": "3000", "supportActingMaster": "false", "enableAllTopicList": "true",
    "enableTopicList": "true", "notifyMinBrokerIdChanged": "false", "enableControllerInNamesrv": "false",
    "needWaitForService": "false", "waitSecondsForService": "45", "deleteTopicWithBrokerRegistration": "false",
    "configBlackList": "configBlackList;configStorePath;kvConfigPath", "bindAddress": "0.0.0.0", "listenPort": "9876",
    "serverWorkerThreads": "8", "serverCallbackExecutorThreads": "0", "serverSelectorThreads": "3",
    "serverOnewaySemaphoreValue": "256", "serverAsyncSemaphoreValue": "64", "serverChannelMaxIdleTimeSeconds": "120",
    "serverSocketSndBufSize": "0", "serverSocketRcvBufSize": "0", "writeBufferHighWaterMark": "0",
    "writeBufferLowWaterMark": "0", "serverSocketBacklog": "1024", "serverPooledByteBufAllocatorEnable": "true",
    "serverNettyWorkerGroupEnable": "true", "useEpollNativeSelector": "false", "enableShutdownGracefully": "false",
    "shutdownWaitTimeSeconds": "30",
}
_ALWAYS_BLACK = ("configBlackList", "configStorePath", "kvConfigPath")


class KVConfigManager:
    """`KVConfigManager`: namespace -> key -> value, persisted on every change."""

    def __init__(self, path: Path | None) -> None:
        self.path = path
        self.table: dict[str, dict[str, str]] = {}
        self._lock = threading.Lock()

    def load(self) -> None:
        if self.path is None or not self.path.exists():
            return
        try:
            data = fastjson.loads(self.path.read_bytes())
            table = data.get("configTable") or {}
            self.table = {str(ns): {str(k): str(v) for k, v in kv.items()} for ns, kv in table.items()
                          if isinstance(kv, dict)}
        except (OSError, ValueError, AttributeError) as e:
            log.error("load %s failed: %s", self.path, e)

    def persist(self) -> None:
        if self.path is None:
            return
        try:
            write_file(self.path, json.dumps({"configTable": self.table}, indent="\t", ensure_ascii=False))
        except (OSError, StoreError) as e:
            log.error("persist %s failed: %s", self.path, e)

    def put(self, namespace: str, key: str, value: str) -> None:
        with self._lock:
            self.table.setdefault(namespace, {})[key] = value
        self.persist()

    def get(self, namespace: str, key: str) -> str | None:
        return self.table.get(namespace, {}).get(key)

    def delete(self, namespace: str, key: str) -> None:
        with self._lock:
            kv = self.table.get(namespace)
            if kv is None or kv.pop(key, None) is None:
                return
        self.persist()

    def list_by_namespace(self, namespace: str) -> dict[str, str] | None:
        kv = self.table.get(namespace)
        return dict(kv) if kv is not None else None


class NamesrvConfiguration:
    """The name server's `Configuration`: NamesrvConfig + NettyServerConfig keys, persisted."""

    def __init__(self, path: Path | None, listen: tuple[str, int] | None = None, kv_path: Path | None = None) -> None:
        self.path = path
        self.values = dict(NAMESRV_DEFAULTS)
        if path is not None:
            self.values["configStorePath"] = str(path)
        if kv_path is not None:
            self.values["kvConfigPath"] = str(kv_path)
        if listen is not None:
            self.set_listen(*listen)

    def set_listen(self, host: str, port: int) -> None:
        self.values["bindAddress"], self.values["listenPort"] = host, str(port)

    def load(self) -> None:
        from rmqtool.broker.admin.config import string_to_properties

        if self.path is None or not self.path.exists():
            return
        try:
            props = string_to_properties(self.path.read_text(encoding="utf-8"))
        except OSError as e:
            log.error("load %s failed: %s", self.path, e)
            return
        for k, v in props.items():
            if k in self.values and k not in ("listenPort", "bindAddress", "configStorePath", "kvConfigPath"):
                self.values[k] = v

    def format(self) -> str:
        return "".join(f"{k}={v}\n" for k, v in self.values.items())

    def black_list(self) -> set[str]:
        return set(_ALWAYS_BLACK) | {k for k in self.values.get("configBlackList", "").split(";") if k}

    def update(self, props: dict[str, str]) -> None:
        for k, v in props.items():
            if k in self.values:  # properties2Object: only existing fields
                self.values[k] = v
        if self.path is not None:
            try:
                write_file(self.path, self.format())
            except (OSError, StoreError) as e:
                log.error("persist %s failed: %s", self.path, e)


class NamesrvAdminProcessor:
    """The codes above, over a RouteInfoManager, a KVConfigManager and a NamesrvConfiguration."""

    def __init__(self, routes: object, kv: KVConfigManager, conf: NamesrvConfiguration) -> None:
        self.routes = routes
        self.kv = kv
        self.conf = conf
        self.apply_route_config()

    def apply_route_config(self) -> None:
        """The NamesrvConfig keys RouteInfoManager reads at each registration."""
        if hasattr(self.routes, "delete_topic_with_broker_registration"):
            flag = self.conf.values.get("deleteTopicWithBrokerRegistration", "false").strip().lower() == "true"
            self.routes.delete_topic_with_broker_registration = flag

    def handles(self, code: int) -> bool:
        return code in CODES

    def order_topic_conf(self, topic: str) -> str | None:
        """A route's orderTopicConf: the ORDER_TOPIC_CONFIG KV entry, with orderMessageEnable on
        (`ClientRequestProcessor.getRouteInfoByTopic`); what `updateOrderConf` / `updateTopic -o` put."""
        if self.conf.values.get("orderMessageEnable", "false").lower() != "true":
            return None
        return self.kv.get(ORDER_TOPIC_CONFIG, topic)

    def process(self, cmd: RemotingCommand) -> RemotingCommand:
        ext = cmd.ext_fields or {}
        code = cmd.code
        if code == PUT_KV_CONFIG:
            ns, key = ext.get("namespace"), ext.get("key")
            if ns is None or key is None:
                return cmd.response(ResponseCode.SYSTEM_ERROR, remark="namespace or key is null")
            self.kv.put(ns, key, ext.get("value", ""))
            return cmd.response()
        if code == GET_KV_CONFIG:
            ns, key = ext.get("namespace", ""), ext.get("key", "")
            value = self.kv.get(ns, key)
            if value is not None:
                return cmd.response(ext_fields={"value": value})
            return cmd.response(ResponseCode.QUERY_NOT_FOUND, remark=f"No config item, Namespace: {ns} Key: {key}")
        if code == DELETE_KV_CONFIG:
            self.kv.delete(ext.get("namespace", ""), ext.get("key", ""))
            return cmd.response()
        if code == GET_KVLIST_BY_NAMESPACE:
            ns = ext.get("namespace", "")
            table = self.kv.list_by_namespace(ns)
            if table is None:
                return cmd.response(ResponseCode.QUERY_NOT_FOUND, remark=f"No config item, Namespace: {ns}")
            return cmd.response(body=fastjson.dumpb(KVTable(table)))
        if code == GET_NAMESRV_CONFIG:
            return cmd.response(body=self.conf.format().encode())
        if code == UPDATE_NAMESRV_CONFIG:
            return self.update_config(cmd)
        if code in (WIPE_WRITE_PERM_OF_BROKER, ADD_WRITE_PERM_OF_BROKER):
            count = self.operate_write_perm(ext.get("brokerName", ""), code == WIPE_WRITE_PERM_OF_BROKER)
            key = "wipeTopicCount" if code == WIPE_WRITE_PERM_OF_BROKER else "addTopicCount"
            log.info("%s write perm of broker[%s]: %d topics", "wipe" if key[0] == "w" else "add",
                     ext.get("brokerName"), count)
            return cmd.response(ext_fields={key: str(count)})
        if code == GET_TOPICS_BY_CLUSTER:
            if self.conf.values.get("enableTopicList", "true").lower() != "true":
                return cmd.response(ResponseCode.SYSTEM_ERROR, remark="disable")
            return cmd.response(body=fastjson.dumpb(fastjson.bean(topicList=self.topics_by_cluster(ext.get("cluster", "")))))
        if code == GET_SYSTEM_TOPIC_LIST_FROM_NS:
            return cmd.response(body=fastjson.dumpb(self.system_topic_list()))
        if code == DELETE_TOPIC_IN_NAMESRV:
            self.delete_topic(ext.get("topic", ""), ext.get("clusterName") or None)
            return cmd.response()
        return cmd.response(ResponseCode.REQUEST_CODE_NOT_SUPPORTED, remark=f" request type {code} not supported")

    def update_config(self, cmd: RemotingCommand) -> RemotingCommand:
        from rmqtool.broker.admin.config import string_to_properties

        if cmd.body:
            try:
                props = string_to_properties(cmd.body.decode("utf-8"))
            except UnicodeDecodeError as e:
                return cmd.response(ResponseCode.SYSTEM_ERROR, remark=f"UnsupportedEncodingException {e}")
            if set(props) & self.conf.black_list():
                return cmd.response(ResponseCode.NO_PERMISSION, remark="Can not update config in black list.")
            self.conf.update(props)
            self.apply_route_config()
        return cmd.response()

    def operate_write_perm(self, broker_name: str, wipe: bool) -> int:
        """`operateWritePermOfBroker`: every queue data of the broker, write bit off, or back to RW."""
        count = 0
        for qds in self.routes.topic_queue_table.values():
            qd = qds.get(broker_name)
            if qd is None:
                continue
            qd.perm = (qd.perm & ~PERM_WRITE) if wipe else (PERM_READ | PERM_WRITE)
            count += 1
        return count

    def topics_by_cluster(self, cluster: str) -> list[str]:
        """`getTopicsByCluster`: topics with queue data on a broker of the cluster (none if unknown)."""
        names = self.routes.cluster_addr_table.get(cluster, set())
        return sorted(t for t, qds in self.routes.topic_queue_table.items() if any(n in qds for n in names))

    def system_topic_list(self) -> dict[str, object]:
        """`getSystemTopicList`: the cluster names and broker names (topics of their own), and the
        address of one broker."""
        topics: list[str] = []
        for cluster, names in self.routes.cluster_addr_table.items():
            topics.append(cluster)
            topics.extend(sorted(names))
        addr = next((next(iter(bd.brokerAddrs.values())) for bd in self.routes.broker_addr_table.values()
                     if bd.brokerAddrs), None)
        return fastjson.bean(brokerAddr=addr, topicList=topics)

    def delete_topic(self, topic: str, cluster: str | None) -> None:
        """`deleteTopic(topic[, cluster])`: the topic's queue data of that cluster's brokers, or all."""
        qds = self.routes.topic_queue_table.get(topic)
        if qds is None:
            return
        if cluster is None:
            del self.routes.topic_queue_table[topic]
            return
        for name in self.routes.cluster_addr_table.get(cluster, set()):
            qds.pop(name, None)
        if not qds:
            del self.routes.topic_queue_table[topic]


def namesrv_admin(routes: object, store_root: Path | None) -> NamesrvAdminProcessor:
    """The processor with its files under `<store_root>/namesrv/`, loaded."""
    base = Path(store_root) / "namesrv" if store_root is not None else None
    kv = KVConfigManager(base / "kvConfig.json" if base else None)
    conf = NamesrvConfiguration(base / "namesrv.properties" if base else None,
                                kv_path=base / "kvConfig.json" if base else None)
    kv.load()
    conf.load()
    return NamesrvAdminProcessor(routes, kv, conf)
