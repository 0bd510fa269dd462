"""The proxy's pure parts, without a server: message mapping both ways (SendMessageActivity,
GrpcConverter), Guava's consistent hash for message groups, settings merge, topic message type
checks, and ProxyConfig from broker.conf names (receipt handles: test_receipt_handle.py)."""

from __future__ import annotations

import pytest

pytest.importorskip("rocketmq.grpc_protocol")

from rmqtool.layouts.javahash import java_string_hash  # noqa: E402
from rmqtool.layouts.message import MessageExt  # noqa: E402
from rmqtool.layouts.net import Host  # noqa: E402
from rmqtool.proxy.config import ProxyConfig  # noqa: E402
from rmqtool.proxy.convert import build_message, build_properties, build_sys_flag, check_message_type  # noqa: E402
from rmqtool.proxy.producer import consistent_hash  # noqa: E402
from rmqtool.proxy.status import ProxyError  # noqa: E402
from tests.proxy.conftest import d, message  # noqa: E402

GUAVA = [  # (key, buckets, Hashing.consistentHash(key.hashCode(), buckets)) from Guava 32.0.1
    ('order-1', 2, 0), ('order-1', 4, 3), ('order-1', 7, 3), ('order-1', 16, 3), ('order-1', 100, 3),
    ('order-2', 2, 0), ('order-2', 4, 2), ('order-2', 7, 2), ('order-2', 16, 11), ('order-2', 100, 46),
    ('', 2, 0), ('', 4, 0), ('', 7, 0), ('', 16, 0), ('', 100, 0), ('a', 2, 0), ('a', 4, 0), ('a', 7, 0),
    ('a', 16, 0), ('a', 100, 29), ('group-x', 2, 1), ('group-x', 4, 1), ('group-x', 7, 1),
    ('group-x', 16, 15), ('group-x', 100, 80), ('中文', 2, 0), ('中文', 4, 3), ('中文', 7, 3), ('中文', 16, 3),
    ('中文', 100, 80), ('zzzzzzzzzzzzzzzzzzzz', 2, 1), ('zzzzzzzzzzzzzzzzzzzz', 4, 3),
    ('zzzzzzzzzzzzzzzzzzzz', 7, 3), ('zzzzzzzzzzzzzzzzzzzz', 16, 10), ('zzzzzzzzzzzzzzzzzzzz', 100, 44),
]


@pytest.mark.parametrize("key, buckets, want", GUAVA)
def test_consistent_hash_is_guavas(key, buckets, want):
    assert consistent_hash(java_string_hash(key), buckets) == want


def test_properties_as_the_proxy_sets_them():
    m = message("T", b"b", tag="TagA", keys=["k1", "k2"], message_id="ID1", message_group="g", trace_context="tc",
                born_host="10.1.2.3", delivery_attempt=2)
    m.user_properties["color"] = "red"
    m.system_properties.born_timestamp.seconds = 1_700_000_000
    m.system_properties.born_timestamp.nanos = 123_000_000
    props = build_properties(m, "T", "127.0.0.1:5555", ProxyConfig())
    assert props == {"color": "red", "TAGS": "TagA", "KEYS": "k1 k2", "UNIQ_KEY": "ID1", "RECONSUME_TIME": "2",
                     "PGROUP": "T", "__SHARDINGKEY": "g", "TRACE_CONTEXT": "tc", "__BORNHOST": "10.1.2.3",
                     "BORN_TIMESTAMP": "1700000000123"}
    # no born host from the client: the peer's address
    assert build_properties(message("T"), "T", "127.0.0.1:5555", ProxyConfig())["__BORNHOST"] == "127.0.0.1:5555"


def test_delay_and_transaction_properties():
    m = message("T", message_type=d.TRANSACTION)
    m.system_properties.orphaned_transaction_recovery_duration.seconds = 30
    m.system_properties.delivery_timestamp.seconds = 1_700_000_060
    props = build_properties(m, "T", "h:1", ProxyConfig(), now_ms=1_700_000_000_000)
    assert props["TRAN_MSG"] == "true" and props["CHECK_IMMUNITY_TIME_IN_SECONDS"] == "30"
    assert props["TIMER_DELIVER_MS"] == "1700000060000"
    assert build_sys_flag(m) == 0x4
    gz = message("T", body_encoding=d.GZIP)
    assert build_sys_flag(gz) == 0x1
    far = message("T")
    far.system_properties.delivery_timestamp.seconds = 1_700_000_000 + 86_401
    with pytest.raises(ProxyError) as e:
        build_properties(far, "T", "h:1", ProxyConfig(), now_ms=1_700_000_000_000)
    assert e.value.code == d.ILLEGAL_DELIVERY_TIME and e.value.message.endswith("max is 86400000")


@pytest.mark.parametrize("mutate, code", [
    (lambda m: m.user_properties.update({f"k{i}": "v" for i in range(129)}), d.MESSAGE_PROPERTIES_TOO_LARGE),
    (lambda m: m.user_properties.update({"k": "v" * 16384}), d.MESSAGE_PROPERTIES_TOO_LARGE),
    (lambda m: m.user_properties.update({"k\u0001": "v"}), d.ILLEGAL_MESSAGE_PROPERTY_KEY),
    (lambda m: m.user_properties.update({"k": "v\u0085"}), d.ILLEGAL_MESSAGE_PROPERTY_KEY),
    (lambda m: m.user_properties.update({"TAGS": "g"}), d.ILLEGAL_MESSAGE_PROPERTY_KEY),
    (lambda m: setattr(m.system_properties, "tag", " "), d.ILLEGAL_MESSAGE_TAG),
    (lambda m: setattr(m.system_properties, "tag", "a\tb"), d.ILLEGAL_MESSAGE_TAG),
    (lambda m: m.system_properties.keys.append("a\nb"), d.ILLEGAL_MESSAGE_KEY),
    (lambda m: setattr(m.system_properties, "message_group", " "), d.ILLEGAL_MESSAGE_GROUP),
    (lambda m: setattr(m.system_properties, "message_id", " "), d.ILLEGAL_MESSAGE_ID),
])
def test_property_refusals(mutate, code):
    m = message("T")
    mutate(m)
    with pytest.raises(ProxyError) as e:
        build_properties(m, "T", "h:1", ProxyConfig())
    assert e.value.code == code


def test_message_type_check():
    check_message_type("NORMAL", "NORMAL")
    check_message_type("MIXED", "FIFO")
    for topic_type, actual in (("FIFO", "NORMAL"), ("UNSPECIFIED", "NORMAL"), ("NORMAL", "UNSPECIFIED")):
        with pytest.raises(ProxyError) as e:
            check_message_type(topic_type, actual)
        assert e.value.code == d.MESSAGE_PROPERTY_CONFLICT_WITH_TYPE


def test_stored_message_as_grpc_message():
    props = {"TAGS": "T", "KEYS": "a b", "UNIQ_KEY": "U1", "__SHARDINGKEY": "g", "TIMER_DELIVER_MS": "5000",
             "TRACE_CONTEXT": "tc", "POP_CK": "0 1 2 3 0 b 0 7 99", "colour": "blue", "DLQ_ORIGIN_TOPIC": "O",
             "DLQ_ORIGIN_MESSAGE_ID": "M"}
    m = MessageExt("Topic", b"body", 3, 0, props, 1, 1000, Host("10.0.0.9", 4444), 2000, Host("10.0.0.1", 10911),
                   reconsume_times=2, queue_offset=7)
    g = build_message(m)
    sp = g.system_properties
    # as in Java, __SHARDINGKEY and TRACE_CONTEXT are not in MessageConst.STRING_HASH_SET: user properties too
    assert g.topic.name == "Topic" and g.body == b"body"
    assert dict(g.user_properties) == {"colour": "blue", "__SHARDINGKEY": "g", "TRACE_CONTEXT": "tc"}
    assert (sp.tag, list(sp.keys), sp.message_id, sp.message_group) == ("T", ["a", "b"], "U1", "g")
    assert sp.body_encoding == d.GZIP and sp.message_type == d.DELAY
    assert sp.body_digest.type == d.MD5 and sp.body_digest.checksum == "841A2D689AD86BD1611447453C22C6FC"
    assert sp.born_host == "10.0.0.9" and sp.store_host == "10.0.0.1:10911"
    assert sp.born_timestamp.seconds == 1 and sp.store_timestamp.seconds == 2 and sp.delivery_timestamp.seconds == 5
    assert (sp.queue_id, sp.queue_offset, sp.delivery_attempt) == (3, 7, 3)
    assert sp.receipt_handle == "0 1 2 3 0 b 0 7 99" and sp.trace_context == "tc"
    assert (sp.dead_letter_queue.topic, sp.dead_letter_queue.message_id) == ("O", "M")


def test_proxy_config_from_broker_conf_names():
    cfg = ProxyConfig.from_properties({"maxMessageSize": "1024", "enableTopicMessageTypeCheck": "false",
                                       "grpcClientProducerMaxAttempts": "x"})
    assert cfg.max_message_size == 1024 and cfg.enable_topic_message_type_check is False
    assert cfg.grpc_client_producer_max_attempts == 3  # a bad value keeps the default


def test_a_closed_channel_takes_its_settings_along():
    import asyncio

    from rmqtool.proxy.context import ProxyCore

    class NoBroker:
        broker_name = "b"

    core = ProxyCore(NoBroker())
    host = Host("127.0.0.1", 1)
    ch = core.channels.create("client-1", host, host)
    assert core.channels.create("client-1", host, host) is ch  # one channel per client id
    core.settings.table["client-1"] = d.Settings(client_type=d.PRODUCER)
    asyncio.run(ch.close())  # as the broker's 120 s expiry closes it
    assert core.channels.get("client-1") is None and core.settings.raw("client-1") is None
    assert core.channels.create("client-1", host, host) is not ch


def test_channel_relays_thread_stack_and_verify_requests():
    """A broker -> client GET_CONSUMER_RUNNING_INFO (jstack) or CONSUME_MESSAGE_DIRECTLY becomes a
    Telemetry command with a nonce; the client's answer becomes the remoting response."""
    import asyncio
    import json

    from rmqtool.layouts.message import encode_record
    from rmqtool.proxy.channel import GrpcClientChannel
    from rmqtool.proxy.transaction import TransactionDataManager
    from rmqtool.remoting.command import RemotingCommand
    from tests.proxy.conftest import s

    async def run():
        host = Host("127.0.0.1", 1)
        ch = GrpcClientChannel("c1", host, host, TransactionDataManager())
        outbox: asyncio.Queue = asyncio.Queue()
        ch.attach(outbox)

        async def client():
            for _ in range(2):
                cmd = await outbox.get()
                if cmd.HasField("print_thread_stack_trace_command"):
                    nonce = cmd.print_thread_stack_trace_command.nonce
                    ch.answer(nonce, d.Status(code=d.OK), s.ThreadStackTrace(nonce=nonce, thread_stack_trace="main: ..."))
                else:
                    assert cmd.verify_message_command.message.body == b"v"
                    ch.answer(cmd.verify_message_command.nonce, d.Status(code=d.FAILED_TO_CONSUME_MESSAGE),
                              s.VerifyMessageResult(nonce=cmd.verify_message_command.nonce))

        task = asyncio.ensure_future(client())
        r1 = await ch.request(RemotingCommand.request(307, {"consumerGroup": "g", "clientId": "c1",
                                                             "jstackEnable": "true"}), 5)
        body = encode_record(MessageExt("T", b"v", 0, 0, {"UNIQ_KEY": "U"}, 0, 1, host, 2, host))
        r2 = await ch.request(RemotingCommand.request(309, {"consumerGroup": "g", "clientId": "c1"}, body), 5)
        await task
        return r1, r2

    r1, r2 = asyncio.run(run())
    assert r1.code == 0 and json.loads(r1.body)["jstack"] == "main: ..."
    assert r2.code == 0 and json.loads(r2.body)["consumeResult"] == "CR_LATER"
    assert json.loads(r2.body)["remark"] == "from gRPC client"


def test_a_consumer_listed_while_its_heartbeat_waits_already_answers_relayed_requests():
    """The broker lists a new consumer before its heartbeat is answered (the group's retry topic
    is answered once on disk); a jstack request relayed in that wait reaches the client's stream
    instead of failing with "the gRPC client did not answer"."""
    import asyncio

    from rmqtool.proxy.client import ClientActivity
    from rmqtool.proxy.context import ProxyContext, ProxyCore
    from rmqtool.remoting.command import RemotingCommand

    class NoConfigs:
        def find(self, name):
            return None

        select = find

    class SlowDiskBroker:
        broker_name = "b"

        def __init__(self) -> None:
            self.local = type("Local", (), {"subscriptions": NoConfigs(), "topics": NoConfigs()})()
            self.listed: asyncio.Event = asyncio.Event()
            self.on_disk: asyncio.Event = asyncio.Event()

        def handle(self, cmd, conn):
            async def heartbeat():
                self.listed.set()  # registered: GET_CONSUMER_LIST_BY_GROUP names the client now
                await self.on_disk.wait()
                return cmd.response()
            return heartbeat()

    async def run():
        broker = SlowDiskBroker()
        activity = ClientActivity()
        activity.core = ProxyCore(broker)
        ctx = ProxyContext("client-1", "JAVA", "5.0.7", Host("127.0.0.1", 1))
        settings = d.Settings(client_type=d.PUSH_CONSUMER, subscription=d.Subscription(
            group=d.Resource(name="g"), subscriptions=[d.SubscriptionEntry(
                topic=d.Resource(name="T"), expression=d.FilterExpression(type=d.TAG, expression="*"))]))
        outbox: asyncio.Queue = asyncio.Queue()
        registering = asyncio.ensure_future(activity._client_settings(ctx, settings, outbox))
        await broker.listed.wait()
        ch = activity.core.channels.get("client-1")
        asked = asyncio.ensure_future(ch.request(RemotingCommand.request(307, {"jstackEnable": "true"}), 5))
        cmd = await asyncio.wait_for(outbox.get(), 5)
        nonce = cmd.print_thread_stack_trace_command.nonce
        ch.answer(nonce, d.Status(code=d.OK), s.ThreadStackTrace(nonce=nonce, thread_stack_trace="main: ..."))
        answer = await asyncio.wait_for(asked, 5)
        broker.on_disk.set()
        await registering
        return answer, await outbox.get()

    from tests.proxy.conftest import s

    answer, settings_reply = asyncio.run(run())
    assert (answer.code, answer.remark) == (0, None)
    assert settings_reply.HasField("settings")
