"""The 5.x gRPC front of `rmqtool serve`: the `apache.rocketmq.v2.MessagingService` in-process.

Apache's proxy (proxy/ grpc/v2 of apache/rocketmq) in cluster mode turns each gRPC call into
remoting requests to brokers. This package does the same against the broker of the same
process: every call becomes the RemotingCommand Apache's proxy would send (SEND_MESSAGE_V2,
END_TRANSACTION, HEART_BEAT, ...) and goes through `BrokerController.handle`, so the broker's
checks, codes and store writes are the ones remoting clients get; the answers are mapped to
gRPC statuses as the proxy's ResponseBuilder / *Activity classes map them.

Message definitions: the generated `apache.rocketmq.v2` modules shipped by PyPI
`rocketmq-python-client` (Apache's own Python SDK, `rocketmq.grpc_protocol`), pinned in
pyproject.toml. Apache keeps them in step with rocketmq-apis, so we neither copy .proto files
nor maintain a second set of descriptors; the same package is the SDK our tests drive. The only
import of it is `rmqtool.proxy.pb`.

Layering: proxy imports broker/ and remoting/; nothing below imports proxy except serve's
wiring (`rmqtool.broker.server` starts `GrpcServer` when `--grpc-port` is not -1).
"""
