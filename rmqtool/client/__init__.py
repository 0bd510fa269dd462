"""A pure-Python RocketMQ client speaking the remoting protocol (`rmqtool.client`).

    from rmqtool.client import Producer, PushConsumer, PullConsumer, SimpleConsumer, TransactionProducer, Message
"""

from rmqtool.client.allocate import (
    AllocateMessageQueueAveragely,
    AllocateMessageQueueAveragelyByCircle,
    AllocateMessageQueueByConfig,
    AllocateMessageQueueByMachineRoom,
    AllocateMessageQueueConsistentHash,
)
from rmqtool.client.consumer import (
    BROADCASTING,
    CLUSTERING,
    CONSUME_FROM_FIRST_OFFSET,
    CONSUME_FROM_LAST_OFFSET,
    CONSUME_FROM_TIMESTAMP,
    ConsumeContext,
    PullConsumer,
    PushConsumer,
    StopConsuming,
)
from rmqtool.client.exceptions import BrokerError, ClientError
from rmqtool.client.instance import ClientConfig, ClientInstance
from rmqtool.client.message import (
    ConsumeStatus,
    LocalTransactionState,
    Message,
    MessageQueue,
    PullResult,
    PullStatus,
    SendResult,
    SendStatus,
)
from rmqtool.client.producer import Producer, TransactionListener, TransactionProducer, select_by_hash
from rmqtool.client.reply import RequestTimeoutError, create_reply_message
from rmqtool.client.simple import ReceivedMessage, SimpleConsumer
from rmqtool.layouts.message import MessageExt

__all__ = [
    "AllocateMessageQueueAveragely", "AllocateMessageQueueAveragelyByCircle", "AllocateMessageQueueByConfig",
    "AllocateMessageQueueByMachineRoom", "AllocateMessageQueueConsistentHash", "BROADCASTING", "CLUSTERING",
    "CONSUME_FROM_FIRST_OFFSET", "CONSUME_FROM_LAST_OFFSET", "CONSUME_FROM_TIMESTAMP", "BrokerError",
    "ClientConfig", "ClientError", "ClientInstance", "ConsumeContext", "ConsumeStatus", "LocalTransactionState",
    "Message", "MessageExt", "MessageQueue", "Producer", "PullConsumer", "PullResult", "PullStatus",
    "PushConsumer", "ReceivedMessage", "RequestTimeoutError", "SendResult", "SendStatus", "SimpleConsumer",
    "StopConsuming", "TransactionListener", "TransactionProducer", "create_reply_message", "select_by_hash",
]
