"""Classic master/slave replication (RocketMQ's store/ha: DefaultHAService, DefaultHAConnection,
DefaultHAClient), wire compatible with Apache RocketMQ 4.x/5.x brokers in either role."""

from rmqtool.store.ha.appender import ReplicaAppender, ReplicaDiverged, ReplicaError
from rmqtool.store.ha.client import HAClient
from rmqtool.store.ha.service import HAConnectionInfo, HAService

__all__ = ["HAClient", "HAConnectionInfo", "HAService", "ReplicaAppender", "ReplicaDiverged", "ReplicaError"]
