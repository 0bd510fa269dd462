"""`ClientLifecycle`: start once, shut down once, `with` for both: what every synchronous face shares.

Java keeps a `ServiceState` (CREATE_JUST, RUNNING, SHUTDOWN_ALREADY) in `DefaultMQProducerImpl`,
`DefaultMQPushConsumerImpl` and `DefaultMQPullConsumerImpl`, and each `start()` / `shutdown()` first
looks at it. `Producer`, `PushConsumer`, `PullConsumer` and `SimpleConsumer` do the same through this
mixin and only say what their own start and shutdown do, in `_start` / `_shutdown`.
"""

from __future__ import annotations

from typing import TypeVar

_F = TypeVar("_F", bound="ClientLifecycle")


class ClientLifecycle:
    """`start()` runs `_start` unless started (a `_start` that raises leaves it not started);
    `shutdown()` runs `_shutdown` once after a start; a `with` block starts and shuts down."""

    _started: bool = False

    def _start(self) -> None:
        raise NotImplementedError

    def _shutdown(self) -> None:
        raise NotImplementedError

    def start(self: _F) -> _F:
        if not self._started:
            self._start()
            self._started = True
        return self

    def shutdown(self) -> None:
        if not self._started:
            return
        self._started = False
        self._shutdown()

    def __enter__(self: _F) -> _F:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.shutdown()
