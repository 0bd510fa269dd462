"""GET_CONSUMER_RUNNING_INFO (307), passed by the broker to the consumer (`mqadmin consumerStatus`):
rmqtool's push consumer answers with a ConsumerRunningInfo, through serve and through Apache's
broker alike."""

from __future__ import annotations

import threading
import time

from rmqtool.client import ConsumeStatus, Message, Producer, PushConsumer
from rmqtool.remoting import fastjson
from rmqtool.remoting.command import RemotingCommand


def test_push_consumer_answers_running_info_through_the_broker(server, unique):
    topic, group = unique("Trun"), unique("grun")
    consumed = threading.Event()

    def listener(msgs, ctx):  # type: ignore[no-untyped-def]
        consumed.set()
        return ConsumeStatus.CONSUME_SUCCESS

    with Producer(unique("pg"), server.namesrv) as p:
        p.send(Message(topic, b"route"))
        consumer = PushConsumer(group, server.namesrv).subscribe(topic, "*")
        consumer.register_listener(listener).start()
        try:
            deadline = time.time() + 30
            while not consumed.is_set() and time.time() < deadline:  # until a message went through
                p.send(Message(topic, b"x"))
                consumed.wait(1.0)
            assert consumed.is_set()
            client_id = consumer.instance.client_id
            ask = {"consumerGroup": group, "clientId": client_id, "jstackEnable": "false"}
            deadline = time.time() + 30
            while True:
                r = p.instance.run(p.instance.invoke(server.broker, RemotingCommand.request(307, ask)))
                info = fastjson.loads(r.body) if r.code == 0 and r.body else {}
                if info.get("mqTable") or time.time() > deadline:
                    break
                time.sleep(0.5)
            assert r.code == 0, r
            props = info["properties"]
            assert props["PROP_CONSUME_TYPE"] == "CONSUME_PASSIVELY" and props["PROP_CONSUMEORDERLY"] == "false"
            assert int(props["PROP_CONSUMER_START_TIMESTAMP"]) > 0 and props["consumerGroup"] == group
            assert topic in {s["topic"] for s in info["subscriptionSet"]}
            assert info["mqTable"], info
            pqs = list(info["mqTable"].values())
            assert all(q["lastConsumeTimestamp"] > 0 and not q["droped"] for q in pqs), pqs
            assert any(q["lastPullTimestamp"] > 0 for q in pqs), pqs  # the queue the message is in
            r = p.instance.run(p.instance.invoke(server.broker, RemotingCommand.request(
                307, {**ask, "consumerGroup": unique("gnone")})))
            assert r.code == 1  # not online: the broker answers for the consumer
        finally:
            consumer.shutdown()
