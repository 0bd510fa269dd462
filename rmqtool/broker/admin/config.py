"""The broker's runtime configuration: GET_BROKER_CONFIG 26 and UPDATE_BROKER_CONFIG 25.

Java's `Configuration` lists every field of BrokerConfig, NettyServerConfig, NettyClientConfig
and MessageStoreConfig (`getAllConfigsFormatString`, `key=value` lines), updates them in place
from a Properties body and persists them all into the broker's config file (`-c`, else
`~/store/config/broker.properties`). Here the keys are the StoreConfig fields serve runs with,
the BrokerConfig keys tools read (exportConfigs, exportMetrics, exportPopRecord, the dashboard)
and every key of the broker.conf; an update changes the running broker (StoreConfig fields, the
controller's knobs, `brokerPermission` re-registering the topics) and is written back to the
config file. As in Java, a key nobody knows is dropped and one of the black list refused.
"""

from __future__ import annotations

import dataclasses
import logging
from pathlib import Path
from typing import Any

from rmqtool.errors import StoreError
from rmqtool.remoting import fastjson
from rmqtool.remoting.codes import ResponseCode
from rmqtool.remoting.command import RemotingCommand
from rmqtool.remoting.transport import Connection
from rmqtool.store.config import StoreConfig
from rmqtool.store.jsonconfig import DataVersion, write_file

log = logging.getLogger("rmqtool.broker")

# BrokerConfig / NettyServerConfig / NettyClientConfig defaults of RocketMQ 5.3 that tools read
# or that describe what serve does; the StoreConfig fields come on top (their values win).
JAVA_DEFAULTS: dict[str, str] = {
    "brokerId": "0",
    "brokerRole": "ASYNC_MASTER",
    "brokerPermission": "6",
    "brokerIP2": "",
    "haListenPort": "",
    "autoCreateSubscriptionGroup": "true",
    "clientCallbackExecutorThreads": "",
    "configBlackList": "configBlackList;brokerConfigPath",
    "msgTraceTopicName": "RMQ_SYS_TRACE_TOPIC",
    "traceTopicEnable": "false",
    "traceOn": "true",
    "slaveReadEnable": "false",
    "useTLS": "false",
    "regionId": "DefaultRegion",
    "enablePropertyFilter": "true",  # rmqtool's default (RocketMQ's is false)
    "recallMessageEnable": "false",  # RECALL_MESSAGE 370 (broker/recall.py)
    "longPollingEnable": "true",
    "shortPollingTimeMills": "1000",
    "transactionCheckInterval": "30000",
    "transactionTimeOut": "6000",
    "transactionCheckMax": "15",
    "registerNameServerPeriod": "30000",
    "forceRegister": "true",
    "enableSlaveActingMaster": "false",
    "enableControllerMode": "false",
    "enableDLegerCommitLog": "false",
    "aclEnable": "false",
    "duplicationEnable": "false",
    "dataReadAheadEnable": "true",
    "storePathCommitLog": "",
    "namesrvAddr": "",
    "rocketmqHome": "",
}
# never updatable remotely (`initConfigBlackList`), besides the configBlackList value itself
ALWAYS_BLACK = ("brokerConfigPath", "rocketmqHome", "configBlackList")

# controller attributes that follow a key (name, kind)
_CONTROLLER_KNOBS = {
    "enablePropertyFilter": ("enable_property_filter", bool),
    "longPollingEnable": ("long_polling_enable", bool),
    "shortPollingTimeMills": ("short_polling_ms", int),
    "transactionCheckInterval": ("transaction_check_interval_ms", int),
    "transactionTimeOut": ("transaction_timeout_ms", int),
    "transactionCheckMax": ("transaction_check_max", int),
    "regionId": ("region_id", str),
    "traceOn": ("trace_on", str),
    "forceRegister": ("force_register", bool),
}


def string_to_properties(text: str) -> dict[str, str]:
    """`MixAll.string2Properties`: java.util.Properties.load of `key=value` lines."""
    props: dict[str, str] = {}
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line[0] in "#!":
            continue
        cut = min((i for i in (line.find("="), line.find(":")) if i >= 0), default=-1)
        if cut < 0:
            props[line] = ""
        else:
            props[line[:cut].strip()] = line[cut + 1:].strip()
    return props


def _store_fields() -> dict[str, str]:
    from rmqtool.store.config import _JAVA_TO_FIELD

    return dict(_JAVA_TO_FIELD)


class BrokerConfiguration:
    """The broker's `Configuration`: all keys, update in place, persist, a DataVersion."""

    def __init__(self, controller: Any, path: Path | None = None) -> None:
        self.controller = controller
        self.path = path
        self.data_version = DataVersion(timestamp=controller.clock())
        extra = dict(getattr(controller.config, "extra", {}) or {})
        self.values = dict(JAVA_DEFAULTS)
        self.values.update({
            "brokerName": controller.broker_name,
            "brokerClusterName": controller.cluster_name,
            "haListenPort": str(controller.advertised.port + 1),
            "brokerIP2": controller.advertised.ip,
            "clientCallbackExecutorThreads": str(_cpus()),
            "storePathCommitLog": str(Path(controller.config.store_path_root_dir) / "commitlog"),
            "enablePropertyFilter": str(controller.enable_property_filter).lower(),
        })
        self.values.update(extra)

    def all_configs(self) -> dict[str, str]:
        out = dict(self.values)
        cfg = self.controller.config
        for key, name in _store_fields().items():
            v = getattr(cfg, name)
            out[key] = str(v).lower() if isinstance(v, bool) else str(v)
        out["rocketmqHome"] = out.get("rocketmqHome") or ""
        return out

    def format(self) -> str:
        """`getAllConfigsFormatString`."""
        return "".join(f"{k}={v}\n" for k, v in self.all_configs().items())

    def black_list(self) -> set[str]:
        return set(ALWAYS_BLACK) | {k for k in self.values.get("configBlackList", "").split(";") if k}

    def update(self, props: dict[str, str]) -> None:
        """`Configuration.update` + the side effects of `AdminBrokerProcessor.updateBrokerConfig`."""
        fields = _store_fields()
        cfg = self.controller.config
        types = {f.name: f.type for f in dataclasses.fields(StoreConfig)}
        known = set(self.all_configs())
        for key, raw in props.items():
            if key not in known:
                continue  # MixAll.properties2Object sets only existing fields
            name = fields.get(key)
            if name is not None:
                try:
                    setattr(cfg, name, _convert(types[name], raw))
                except ValueError:
                    continue  # Java logs the bad value and keeps the field
            else:
                self.values[key] = raw
                if isinstance(getattr(cfg, "extra", None), dict):
                    cfg.extra[key] = raw
            knob = _CONTROLLER_KNOBS.get(key)
            if knob is not None:
                attr, kind = knob
                try:
                    setattr(self.controller, attr, _convert(kind, raw))
                except ValueError:
                    pass
        self.data_version.next_version(self.controller.clock())
        self.persist()

    def persist(self) -> None:
        """`Configuration.persist`: every key into the broker's config file."""
        if self.path is None:
            return
        try:
            write_file(self.path, self.format())
        except (OSError, StoreError) as e:
            log.error("persist broker config to %s failed: %s", self.path, e)

    def permission(self) -> int:
        try:
            return int(self.values.get("brokerPermission", "6"))
        except ValueError:
            return 6


def _convert(kind: Any, raw: str) -> Any:
    raw = raw.strip()
    if kind in (bool, "bool"):
        return raw.lower() == "true"
    if kind in (int, "int"):
        return int(raw)
    if kind in (Path, "Path"):
        return Path(raw)
    return raw


def _cpus() -> int:
    import os

    return os.cpu_count() or 1


class ConfigProcessor:
    """GET_BROKER_CONFIG / UPDATE_BROKER_CONFIG of `AdminBrokerProcessor`."""

    @property
    def configuration(self: Any) -> BrokerConfiguration:
        conf = getattr(self, "_configuration", None)
        if conf is None:
            conf = self._configuration = BrokerConfiguration(self, getattr(self, "broker_config_path", None))
        return conf

    async def process_get_broker_config(self: Any, cmd: RemotingCommand, conn: Connection) -> RemotingCommand:
        conf = self.configuration
        version = fastjson.dumps(fastjson.bean(counter=conf.data_version.counter,
                                               stateVersion=conf.data_version.state_version,
                                               timestamp=conf.data_version.timestamp))
        return cmd.response(ext_fields={"version": version}, body=conf.format().encode())

    async def process_update_broker_config(self: Any, cmd: RemotingCommand, conn: Connection) -> RemotingCommand:
        if cmd.body:
            try:
                props = string_to_properties(cmd.body.decode("utf-8"))
            except UnicodeDecodeError as e:
                return cmd.response(ResponseCode.SYSTEM_ERROR, remark=f"UnsupportedEncodingException {e}")
            conf = self.configuration
            if set(props) & conf.black_list():
                return cmd.response(ResponseCode.NO_PERMISSION, remark="Can not update config in black list.")
            log.info("updateBrokerConfig, new config: %s client: %s", props, conn.peer)
            conf.update(props)
            if "brokerPermission" in props:
                self.local.topics.data_version.next_version(self.clock())
                self.register_broker_all()
        return cmd.response()
