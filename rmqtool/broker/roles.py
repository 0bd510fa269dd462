"""Master and slave behaviour of the broker: what changes with brokerRole (BrokerController, processors).

- A slave refuses sends: Java's CommitLog answers PutMessageStatus.SERVICE_NOT_AVAILABLE in slave
  mode and SendMessageProcessor turns it into SERVICE_NOT_AVAILABLE with its "messages are put to
  the slave" remark. The refusal comes before msgCheck here, so a send to a slave creates no topic.
  A send-back gets "no master available along with <brokerIP1>" (peekMasterBroker is null on a
  slave), END_TRANSACTION SLAVE_NOT_AVAILABLE (EndTransactionProcessor).
- A slave with slaveReadEnable=false refuses pulls: PullMessageProcessor.rejectRequest, which
  NettyRemotingAbstract answers with SYSTEM_BUSY "[REJECTREQUEST]...".
- A slave learns masterAddr and haServerAddr from its REGISTER_BROKER answers
  (`handleRegisterBrokerResult`), hands the HA address to the store's HA service unless
  haMasterAddress is configured, and copies the master's metadata (slave.py).
- The master answers what slaves copy: GET_ALL_CONSUMER_OFFSET, GET_ALL_DELAY_OFFSET,
  GET_ALL_SUBSCRIPTIONGROUP_CONFIG (AdminBrokerProcessor: the managers' JSON), GET_TIMER_METRICS
  and GET_TIMER_CHECK_POINT (a Java slave's timer store follows them), and both answer
  GET_BROKER_HA_STATUS with HARuntimeInfo.

The HA engine (store/ha) is reached through `self.replication` (broker/replication.py, set by
serve): its `update_ha_master_address` / `update_master_address` on a slave, its HAService's
connections and its HAClient's counters for 907. Without it (a controller made in tests) a master
reports no slave connections and a slave no transfer.
"""

from __future__ import annotations

import logging
import shutil
import time
from pathlib import Path
from typing import Any

from rmqtool.remoting import fastjson
from rmqtool.remoting.bodies_ha import HAClientRuntimeInfo, HAConnectionRuntimeInfo, HARuntimeInfo
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
            RequestCode.GET_TIMER_CHECK_POINT: self.process_get_timer_check_point,
            RequestCode.GET_TIMER_METRICS: self.process_get_timer_metrics,
        }
        if self.cluster.is_slave:
            for code in (RequestCode.SEND_MESSAGE, RequestCode.SEND_MESSAGE_V2, RequestCode.SEND_BATCH_MESSAGE):
                handlers[code] = self.process_send_to_slave
            handlers[RequestCode.CONSUMER_SEND_MSG_BACK] = self.process_send_back_to_slave
            handlers[RequestCode.END_TRANSACTION] = self.process_end_transaction_on_slave
            if not self.cluster.slave_read_enable:
                handlers[RequestCode.PULL_MESSAGE] = self.reject_request
                handlers[RequestCode.LITE_PULL_MESSAGE] = self.reject_request
        return handlers

    # ------------------------------------------------------------ slave refusals
    def process_send_to_slave(self: Any, cmd: RemotingCommand, conn: Connection) -> RemotingCommand:
        return cmd.response(ResponseCode.SERVICE_NOT_AVAILABLE,
                            remark=slave_send_remark(Path(self.config.store_path_root_dir)))

    def process_send_back_to_slave(self: Any, cmd: RemotingCommand, conn: Connection) -> RemotingCommand:
        """`consumerSendMsgBack`: `peekMasterBroker()` is null on a slave."""
        return cmd.response(ResponseCode.SYSTEM_ERROR,
                            remark=f"no master available along with {self.cluster.broker_ip1}")

    def process_end_transaction_on_slave(self: Any, cmd: RemotingCommand, conn: Connection) -> RemotingCommand:
        """EndTransactionProcessor: "Message store is slave mode, so end transaction is forbidden"."""
        log.warning("Message store is slave mode, so end transaction is forbidden. ")
        return cmd.response(ResponseCode.SLAVE_NOT_AVAILABLE)

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

    def _timer_store(self: Any) -> Any:
        for svc in getattr(self.local, "services", []):
            if getattr(svc, "name", "") == "timer-message-store":
                return svc
        return None

    async def process_get_timer_check_point(self: Any, cmd: RemotingCommand, conn: Connection) -> RemotingCommand:
        """`TimerCheckpoint.encode`: the 56 bytes of config/timercheck (a Java slave asks every 3 s)."""
        timer = self._timer_store()
        if timer is None:
            return cmd.response(ResponseCode.SYSTEM_ERROR, remark="The checkpoint is null")
        return cmd.response(body=timer.timer_checkpoint.value.pack())

    async def process_get_timer_metrics(self: Any, cmd: RemotingCommand, conn: Connection) -> RemotingCommand:
        """`TimerMetrics.encode`: the timermetrics JSON (a Java slave copies it with syncAll)."""
        timer = self._timer_store()
        if timer is None:
            return cmd.response(ResponseCode.SYSTEM_ERROR, remark="The timer message store is null")
        return cmd.response(body=timer.timer_metrics.to_text().encode("utf-8"))

    async def process_broker_ha_status(self: Any, cmd: RemotingCommand, conn: Connection) -> RemotingCommand:
        info = self.ha_runtime_info()
        return cmd.response(body=fastjson.dumpb(info))

    def ha_runtime_info(self: Any) -> HARuntimeInfo:
        """`DefaultHAService.getRuntimeInfo(commitLog.getMaxOffset())`: a master lists its slave
        connections (in sync: less than haMaxGapNotInSync behind), a slave its HA client."""
        put_where = int(self.store.max_phy_offset)
        rep = getattr(self, "replication", None)
        now = time.monotonic()
        if not self.cluster.is_slave:
            info = HARuntimeInfo(True, put_where, 0)
            service = getattr(rep, "service", None)
            gap = int(getattr(self.config, "ha_max_gap_not_in_sync", 256 * 1024 * 1024))
            for c in service.connections_snapshot() if service is not None else []:
                ack = int(c.slave_ack_offset)
                in_sync = put_where - ack < gap
                info.inSyncSlaveNums += in_sync
                info.haConnectionInfo.append(HAConnectionRuntimeInfo(
                    c.client_addr, ack, put_where - ack, in_sync,
                    self._per_second(("conn", c.client_addr), int(c.transferred_bytes), now),
                    max(0, int(c.next_transfer_from))))
            return info
        client = getattr(rep, "client", None)
        addr = getattr(client, "master_ha_address", None) or self.ha_master_addr
        return HARuntimeInfo(False, 0, 0, [], HAClientRuntimeInfo(
            masterAddr=addr,
            transferredByteInSecond=self._per_second(("client",), int(getattr(client, "received_bytes", 0)), now),
            maxOffset=put_where, lastReadTimestamp=int(getattr(client, "last_read_ms", 0)),
            lastWriteTimestamp=int(getattr(client, "last_write_ms", 0))))

    def _per_second(self: Any, key: tuple[str, ...], total: int, now: float) -> int:
        """Bytes per second since the previous haStatus (Java keeps a one-second counter; a rate
        between two looks says the same for a steady stream)."""
        samples = self.__dict__.setdefault("_ha_rate_samples", {})
        prev = samples.get(key)
        samples[key] = (now, total)
        if prev is None or now <= prev[0]:
            return 0
        return int((total - prev[1]) / (now - prev[0]))

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
        ha = getattr(self, "replication", None)
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
