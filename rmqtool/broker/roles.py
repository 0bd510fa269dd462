"""Master and slave behaviour of the broker: what changes with brokerRole (BrokerController, processors).

- A slave refuses sends: Java's CommitLog answers PutMessageStatus.SERVICE_NOT_AVAILABLE in slave
  mode and SendMessageProcessor turns it into SERVICE_NOT_AVAILABLE with its "messages are put to
  the slave" remark. The refusal comes before msgCheck here, so a send to a slave creates no topic.
- A slave with slaveReadEnable=false refuses pulls: PullMessageProcessor.rejectRequest, which
  NettyRemotingAbstract answers with SYSTEM_BUSY "[REJECTREQUEST]...".
- A slave learns masterAddr and haServerAddr from its REGISTER_BROKER answers
  (`handleRegisterBrokerResult`), hands the HA address to the store's HA service unless
  haMasterAddress is configured, and copies the master's metadata (slave.py).
- The master answers what slaves copy: GET_ALL_CONSUMER_OFFSET, GET_ALL_DELAY_OFFSET,
  GET_ALL_SUBSCRIPTIONGROUP_CONFIG (AdminBrokerProcessor: the managers' JSON), and both answer
  GET_BROKER_HA_STATUS with HARuntimeInfo.

The HA engine (store/ha) is reached through `local.ha_service` when it is there, duck-typed:
`update_ha_master_address(addr)` and `update_master_address(addr)` on a slave, and
`runtime_info(master_put_where) -> HARuntimeInfo` for 907. Without it a master reports no slave
connections and a slave no transfer, which is what Java reports for a group with no HA traffic.
"""

from __future__ import annotations

import logging
import shutil
from pathlib import Path
from typing import Any

from rmqtool.remoting import fastjson
from rmqtool.remoting.bodies_ha import HAClientRuntimeInfo, HARuntimeInfo
from rmqtool.remoting.codes import RequestCode, ResponseCode
from rmqtool.remoting.command import RemotingCommand
from rmqtool.remoting.transport import Connection

log = logging.getLogger("rmqtool.broker")

REJECT_REQUEST_REMARK = "[REJECTREQUEST]system busy, start flow control for a while"


def disk_used_ratio(path: Path) -> float:
    """`UtilAll.getDiskPartitionSpaceUsedPercent` as a 0..1 ratio, -1 when the path is missing."""
    try:
        u = shutil.disk_usage(path)
    except OSError:
        return -1.0
    used = u.total - u.free
    entire = used + u.free
    if entire <= 0:
        return -1.0
    return (used * 100 // entire + (1 if used * 100 % entire else 0)) / 100.0


def slave_send_remark(root: Path) -> str:
    root = Path(root)
    cl, cq, ix = (disk_used_ratio(root / d) for d in ("commitlog", "consumequeue", "index"))
    return ("service not available now. It may be caused by one of the following reasons: the broker's disk is "
            f"full [CL: {cl:5.2f} CQ: {cq:5.2f} INDEX: {ix:5.2f}], messages are put to the slave, message store "
            "has been shut down, etc.")


class RoleProcessor:
    """Mixin of BrokerController: the request codes and periodic work that depend on the role."""

    def cluster_handlers(self: Any) -> dict[int, Any]:
        handlers: dict[int, Any] = {
            RequestCode.GET_ALL_CONSUMER_OFFSET: self.process_get_all_consumer_offset,
            RequestCode.GET_ALL_DELAY_OFFSET: self.process_get_all_delay_offset,
            RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG: self.process_get_all_subscription_group,
            RequestCode.GET_BROKER_HA_STATUS: self.process_broker_ha_status,
        }
        if self.cluster.is_slave:
            for code in (RequestCode.SEND_MESSAGE, RequestCode.SEND_MESSAGE_V2, RequestCode.SEND_BATCH_MESSAGE,
                         RequestCode.CONSUMER_SEND_MSG_BACK):
                handlers[code] = self.process_send_to_slave
            if not self.cluster.slave_read_enable:
                handlers[RequestCode.PULL_MESSAGE] = self.reject_request
                handlers[RequestCode.LITE_PULL_MESSAGE] = self.reject_request
        return handlers

    # ------------------------------------------------------------ slave refusals
    def process_send_to_slave(self: Any, cmd: RemotingCommand, conn: Connection) -> RemotingCommand:
        return cmd.response(ResponseCode.SERVICE_NOT_AVAILABLE,
                            remark=slave_send_remark(Path(self.config.store_path_root_dir)))

    def reject_request(self: Any, cmd: RemotingCommand, conn: Connection) -> RemotingCommand:
        return cmd.response(ResponseCode.SYSTEM_BUSY, remark=REJECT_REQUEST_REMARK)

    # ------------------------------------------------------------ what slaves copy
    async def process_get_all_consumer_offset(self: Any, cmd: RemotingCommand, conn: Connection) -> RemotingCommand:
        text = self.local.offsets.to_text()
        return cmd.response(body=text.encode("utf-8"))

    async def process_get_all_delay_offset(self: Any, cmd: RemotingCommand, conn: Connection) -> RemotingCommand:
        """The delayOffset.json text: from the running schedule service, else the file."""
        from rmqtool.store.schedule import ScheduleMessageService, delay_offset_path, read_config_file

        for svc in getattr(self.local, "services", []):
            if isinstance(svc, ScheduleMessageService):
                return cmd.response(body=svc.encode().encode("utf-8"))
        text = read_config_file(delay_offset_path(Path(self.config.store_path_root_dir)))
        if text is None:  # AdminBrokerProcessor.getAllDelayOffset: "No delay offset in this broker"
            return cmd.response(ResponseCode.SYSTEM_ERROR, remark="No delay offset in this broker")
        return cmd.response(body=text.encode("utf-8"))

    async def process_get_all_subscription_group(self: Any, cmd: RemotingCommand,
                                                 conn: Connection) -> RemotingCommand:
        return cmd.response(body=self.local.subscriptions.to_text().encode("utf-8"))

    async def process_broker_ha_status(self: Any, cmd: RemotingCommand, conn: Connection) -> RemotingCommand:
        info = self.ha_runtime_info()
        return cmd.response(body=fastjson.dumpb(info))

    def ha_runtime_info(self: Any) -> HARuntimeInfo:
        """`DefaultHAService.getRuntimeInfo(commitLog.getMaxOffset())`."""
        put_where = int(self.store.max_phy_offset)
        ha = getattr(self.local, "ha_service", None)
        fn = getattr(ha, "runtime_info", None)
        if fn is not None:
            info = fn(put_where)
            if isinstance(info, HARuntimeInfo):
                return info
        if not self.cluster.is_slave:
            return HARuntimeInfo(True, put_where, 0)
        return HARuntimeInfo(False, 0, 0, [], HAClientRuntimeInfo(masterAddr=self.ha_master_addr,
                                                                  maxOffset=put_where))

    # ------------------------------------------------------------ learning the master
    def handle_register_result(self: Any, result: tuple[str | None, str | None] | None) -> None:
        """`handleRegisterBrokerResult`: a slave takes the master's HA address (unless haMasterAddress
        is set) and the master's address for SlaveSynchronize; an answer without them (the master
        is gone) clears the master address, not the HA one, as in Java."""
        if result is None or not self.cluster.is_slave:
            return
        ha_addr, master_addr = result
        if self.cluster.fixed_ha_master is None and ha_addr is not None:
            self.set_ha_master_address(ha_addr, master_addr)
        self.slave_sync.set_master_addr(master_addr)

    def set_ha_master_address(self: Any, ha_addr: str | None, master_addr: str | None = None) -> None:
        if ha_addr != self.ha_master_addr:
            log.info("HA master address %s -> %s", self.ha_master_addr, ha_addr)
        self.ha_master_addr = ha_addr
        ha = getattr(self.local, "ha_service", None)
        for name, value in (("update_ha_master_address", ha_addr), ("update_master_address", master_addr)):
            fn = getattr(ha, name, None)
            if fn is not None:
                try:
                    fn(value)
                except Exception:  # noqa: BLE001 - the HA engine's fault must not stop registration
                    log.exception("%s(%s) failed", name, value)

    async def slave_sync_tick(self: Any) -> None:
        if self.cluster.is_slave:
            await self.slave_sync.tick()

    def special_services_start(self: Any) -> bool:
        """`changeSpecialServiceStatus(brokerId == MASTER_ID)`: delay/timer delivery and the
        transaction check-back run on the master only (they write to the CommitLog)."""
        return not self.cluster.is_slave
