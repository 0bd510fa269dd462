"""The `apache.rocketmq.v2` messages and service base, from PyPI rocketmq-python-client.

The one place that imports the generated code (see the package docstring for why it is that
package). `available()` lets serve say clearly why the gRPC port is off when it is missing.
"""

from __future__ import annotations

try:
    from rocketmq.grpc_protocol import definition_pb2 as definition
    from rocketmq.grpc_protocol import service_pb2 as service
    from rocketmq.grpc_protocol import service_pb2_grpc as service_grpc
except ImportError as _e:  # pragma: no cover - exercised only without the dependency
    definition = service = service_grpc = None  # type: ignore[assignment]
    IMPORT_ERROR: str | None = str(_e)
else:
    IMPORT_ERROR = None

SERVICE_NAME = "apache.rocketmq.v2.MessagingService"


def available() -> bool:
    return IMPORT_ERROR is None
