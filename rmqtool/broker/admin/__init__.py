"""The operator's requests of the broker (`AdminBrokerProcessor` and friends of the Java broker).

One mixin per family, combined into `AdminProcessor`, whose `admin_handlers()` the controller
merges into its request-code table. The mixins reach the controller only through `self`
(its store, managers and `run`), never by importing it.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from rmqtool.broker.admin.brokerstats import BrokerStatsProcessor
from rmqtool.broker.admin.clients import ClientAdminProcessor
from rmqtool.broker.admin.config import ConfigProcessor
from rmqtool.broker.admin.groups import GroupAdminProcessor
from rmqtool.broker.admin.maintenance import MaintenanceProcessor
from rmqtool.broker.admin.queries import QueryProcessor
from rmqtool.broker.admin.reply import ReplyProcessor
from rmqtool.broker.admin.runtime import BROKER_VERSION, BROKER_VERSION_DESC, RuntimeInfoProcessor
from rmqtool.remoting.codes import RequestCode as R

__all__ = ["AdminProcessor", "BROKER_VERSION", "BROKER_VERSION_DESC"]


class AdminProcessor(QueryProcessor, RuntimeInfoProcessor, ConfigProcessor, GroupAdminProcessor,
                     ClientAdminProcessor, MaintenanceProcessor, ReplyProcessor, BrokerStatsProcessor):
    def admin_handlers(self: Any) -> dict[int, Callable[..., Awaitable[Any]]]:
        """The codes of this package, beside those the controller lists itself."""
        return {
            R.GET_BROKER_RUNTIME_INFO: self.process_broker_runtime_info,
            R.VIEW_BROKER_STATS_DATA: self.process_view_broker_stats,
            R.GET_BROKER_CONFIG: self.process_get_broker_config,
            R.UPDATE_BROKER_CONFIG: self.process_update_broker_config,
            R.UPDATE_AND_CREATE_TOPIC_LIST: self.process_update_and_create_topic_list,
            R.DELETE_TOPIC_IN_BROKER: self.process_delete_topic,
            R.CLEAN_UNUSED_TOPIC: self.process_clean_unused_topic,
            R.GET_SYSTEM_TOPIC_LIST_FROM_BROKER: self.process_system_topic_list,
            R.CLEAN_EXPIRED_CONSUMEQUEUE: self.process_clean_expired_cq,
            R.DELETE_EXPIRED_COMMITLOG: self.process_delete_expired_commitlog,
            R.QUERY_CONSUME_QUEUE: self.process_query_consume_queue,
            R.SET_COMMITLOG_READ_MODE: self.process_set_commitlog_read_mode,
            R.UPDATE_COLD_DATA_FLOW_CTR_CONFIG: self.process_update_cold_data_config,
            R.REMOVE_COLD_DATA_FLOW_CTR_CONFIG: self.process_remove_cold_data_config,
            R.GET_COLD_DATA_FLOW_CTR_INFO: self.process_get_cold_data_info,
            R.EXPORT_ROCKSDB_CONFIG_TO_JSON: self.process_export_rocksdb_config,
            R.RESET_MASTER_FLUSH_OFFSET: self.process_reset_master_flush_offset,
            R.POP_ROLLBACK: self.process_pop_rollback,
            R.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP: self.process_update_subscription_group,
            R.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP_LIST: self.process_update_subscription_group_list,
            R.GET_ALL_SUBSCRIPTIONGROUP_CONFIG: self.process_get_all_subscription_group,
            R.GET_SUBSCRIPTIONGROUP_CONFIG: self.process_get_subscription_group,
            R.DELETE_SUBSCRIPTIONGROUP: self.process_delete_subscription_group,
            R.INVOKE_BROKER_TO_RESET_OFFSET: self.process_reset_offset,
            R.CLONE_GROUP_OFFSET: self.process_clone_group_offset,
            R.GET_BROKER_CONSUME_STATS: self.process_broker_consume_stats,
            R.SET_MESSAGE_REQUEST_MODE: self.process_set_message_request_mode,
            R.GET_ALL_MESSAGE_REQUEST_MODE: self.process_get_all_message_request_mode,
            R.GET_PRODUCER_CONNECTION_LIST: self.process_producer_connection_list,
            R.GET_ALL_PRODUCER_INFO: self.process_all_producer_info,
            R.GET_CONSUMER_RUNNING_INFO: self.process_call_consumer,
            R.CONSUME_MESSAGE_DIRECTLY: self.process_call_consumer,
            R.SEND_REPLY_MESSAGE: self.process_send_reply,
            R.SEND_REPLY_MESSAGE_V2: self.process_send_reply,
        }
