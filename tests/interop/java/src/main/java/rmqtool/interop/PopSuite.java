package rmqtool.interop;

import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.apache.rocketmq.client.consumer.AckCallback;
import org.apache.rocketmq.client.consumer.AckResult;
import org.apache.rocketmq.client.consumer.AckStatus;
import org.apache.rocketmq.client.consumer.PopCallback;
import org.apache.rocketmq.client.consumer.PopResult;
import org.apache.rocketmq.client.consumer.PopStatus;
import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.common.constant.ConsumeInitMode;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.common.message.MessageConst;
import org.apache.rocketmq.common.message.MessageExt;
import org.apache.rocketmq.remoting.protocol.header.AckMessageRequestHeader;
import org.apache.rocketmq.remoting.protocol.header.ChangeInvisibleTimeRequestHeader;
import org.apache.rocketmq.remoting.protocol.header.ExtraInfoUtil;
import org.apache.rocketmq.remoting.protocol.header.PopMessageRequestHeader;

/**
 * Apache RocketMQ's Java client 5.3.3 in POP mode: the calls its pop push consumer and Apache's
 * proxy make ({@code MQClientAPIImpl.popMessageAsync}, {@code ackMessageAsync},
 * {@code batchAckMessageAsync}, {@code changeInvisibleTimeAsync}) against one broker. One JSON
 * line per scenario on stdout ({@code {"scenario", "ok", "detail", "ms"}}); exit 1 if any failed.
 *
 * <p>Usage: {@code PopSuite --namesrv HOST:PORT --broker HOST:PORT --run ID}. Scenarios: pop-ack (every
 * message once, body, tags, keys and properties intact, then nothing), long-poll (a held pop answers
 * when a message arrives), redelivery (only the unacked message comes back, reconsumeTimes 1,
 * 1ST_POP_TIME kept, acked by its retry receipt handle), change-invisible (a message brought back
 * sooner), batch-ack (nothing comes back), orderly (the queue stays blocked until acked).
 */
public final class PopSuite {
    static ScenarioRunner suite;
    static String brokerName;

    public static void main(String[] args) throws Exception {
        suite = new ScenarioRunner(args, "pop_suite_producer_");
        suite.scenario("pop-ack", PopSuite::popAck);
        suite.scenario("long-poll", PopSuite::longPoll);
        suite.scenario("redelivery", PopSuite::redelivery);
        suite.scenario("change-invisible", PopSuite::changeInvisible);
        suite.scenario("batch-ack", PopSuite::batchAck);
        suite.scenario("orderly", PopSuite::orderly);
        suite.exit();
    }

    static final java.util.Set<String> created = new java.util.HashSet<>();

    /** Sends n messages to a one-queue topic (created on first use, as mqadmin updateTopic would). */
    static List<SendResult> send(String topic, int n) throws Exception {
        if (created.add(topic)) {
            suite.producer.createTopic("TBW102", topic, 1, null);
        }
        List<SendResult> sent = new ArrayList<>();
        for (int i = 0; i < n; i++) {
            Message m = new Message(topic, "tg", "key" + i, ("body-" + i + "-\u00e9").getBytes(StandardCharsets.UTF_8));
            m.putUserProperty("color", "r\u00f6t" + i);
            SendResult r = suite.send(m);
            if (r.getMessageQueue().getQueueId() != 0) {
                throw new IllegalStateException("sent to queue " + r.getMessageQueue() + ", the topic has one");
            }
            sent.add(r);
        }
        if (brokerName == null) {
            brokerName = sent.get(0).getMessageQueue().getBrokerName();
        }
        return sent;
    }

    static PopResult pop(String topic, String group, int queueId, int max, long invisible, long poll, boolean order)
        throws Exception {
        PopMessageRequestHeader h = new PopMessageRequestHeader();
        h.setConsumerGroup(group);
        h.setTopic(topic);
        h.setQueueId(queueId);
        h.setMaxMsgNums(max);
        h.setInvisibleTime(invisible);
        h.setPollTime(poll);
        h.setBornTime(System.currentTimeMillis());
        h.setInitMode(ConsumeInitMode.MIN);
        h.setExpType("TAG");
        h.setExp("*");
        h.setOrder(order);
        CompletableFuture<PopResult> f = new CompletableFuture<>();
        suite.api.popMessageAsync(brokerName, suite.broker, h, poll + 10_000, new PopCallback() {
            public void onSuccess(PopResult r) {
                f.complete(r);
            }

            public void onException(Throwable e) {
                f.completeExceptionally(e);
            }
        });
        return f.get(poll + 15_000, TimeUnit.MILLISECONDS);
    }

    static CompletableFuture<AckResult> ackFuture() {
        return new CompletableFuture<>();
    }

    static AckCallback callback(CompletableFuture<AckResult> f) {
        return new AckCallback() {
            public void onSuccess(AckResult r) {
                f.complete(r);
            }

            public void onException(Throwable e) {
                f.completeExceptionally(e);
            }
        };
    }

    /** Ack as the pop push consumer does: the header carries the real topic (the retry topic for a redelivery). */
    static AckStatus ack(String topic, String group, MessageExt m) throws Exception {
        String extra = m.getProperty(MessageConst.PROPERTY_POP_CK);
        String[] f = ExtraInfoUtil.split(extra);
        AckMessageRequestHeader h = new AckMessageRequestHeader();
        h.setConsumerGroup(group);
        h.setTopic(ExtraInfoUtil.getRealTopic(f, topic, group));
        h.setQueueId(ExtraInfoUtil.getQueueId(f));
        h.setExtraInfo(extra);
        h.setOffset(ExtraInfoUtil.getQueueOffset(f));
        CompletableFuture<AckResult> r = ackFuture();
        suite.api.ackMessageAsync(suite.broker, 5000, callback(r), h);
        return r.get(10, TimeUnit.SECONDS).getStatus();
    }

    static List<MessageExt> popUntil(String topic, String group, int want, long invisible, long seconds)
        throws Exception {
        List<MessageExt> got = new ArrayList<>();
        long deadline = System.currentTimeMillis() + seconds * 1000;
        while (got.size() < want && System.currentTimeMillis() < deadline) {
            PopResult r = pop(topic, group, -1, 32, invisible, 1000, false);
            if (r.getPopStatus() == PopStatus.FOUND) {
                got.addAll(r.getMsgFoundList());
            }
        }
        return got;
    }

    static String checkMessage(MessageExt m, int i, String topic) {
        String body = new String(m.getBody(), StandardCharsets.UTF_8);
        if (!body.equals("body-" + i + "-\u00e9") || !"tg".equals(m.getTags()) || !("key" + i).equals(m.getKeys())
            || !("r\u00f6t" + i).equals(m.getUserProperty("color")) || !topic.equals(m.getTopic())) {
            return "message " + i + " changed: " + m;
        }
        if (m.getProperty(MessageConst.PROPERTY_POP_CK) == null) {
            return "no receipt handle (POP_CK) on message " + i;
        }
        return null;
    }

    static String popAck() throws Exception {
        String topic = "PopJ_" + suite.run, group = "cg_popj_" + suite.run;
        send(topic, 4);
        // a broker may dispatch a moment after it answered the send: pop until all four came
        List<MessageExt> got = popUntil(topic, group, 4, 60_000, 10);
        if (got.size() != 4) {
            return "pops gave " + got.size() + " messages, want 4";
        }
        for (int i = 0; i < 4; i++) {
            MessageExt m = got.get(i);
            String bad = checkMessage(m, i, topic);
            if (bad != null) {
                return bad;
            }
            if (ack(topic, group, m) != AckStatus.OK) {
                return "ack of message " + i + " refused";
            }
        }
        PopResult again = pop(topic, group, 0, 32, 60_000, 1000, false);
        if (again.getPopStatus() != PopStatus.POLLING_NOT_FOUND) {
            return "after acking all: " + again;
        }
        return null;
    }

    static String longPoll() throws Exception {
        String topic = "PopJL_" + suite.run, group = "cg_popjl_" + suite.run;
        send(topic, 1);  // the topic exists with this one message
        List<MessageExt> first = popUntil(topic, group, 1, 60_000, 10);
        if (first.size() != 1 || ack(topic, group, first.get(0)) != AckStatus.OK) {
            return "could not take the first message: " + first;
        }
        CompletableFuture<PopResult> held = CompletableFuture.supplyAsync(() -> {
            try {
                return pop(topic, group, -1, 32, 60_000, 8000, false);
            } catch (Exception e) {
                throw new RuntimeException(e);
            }
        });
        Thread.sleep(1000);
        long t0 = System.currentTimeMillis();
        send(topic, 1);
        PopResult r = held.get(20, TimeUnit.SECONDS);
        long waited = System.currentTimeMillis() - t0;
        if (r.getPopStatus() != PopStatus.FOUND || waited > 4000) {
            return "held pop answered " + r.getPopStatus() + " after " + waited + " ms";
        }
        return ack(topic, group, r.getMsgFoundList().get(0)) == AckStatus.OK ? null : "ack refused";
    }

    static String redelivery() throws Exception {
        String topic = "PopJR_" + suite.run, group = "cg_popjr_" + suite.run;
        send(topic, 2);
        List<MessageExt> first = popUntil(topic, group, 2, 2000, 10);
        if (first.size() != 2) {
            return "first pops: " + first.size() + " messages";
        }
        long popTime = Long.parseLong(ExtraInfoUtil.split(first.get(0).getProperty(MessageConst.PROPERTY_POP_CK))[1]);
        if (ack(topic, group, first.get(0)) != AckStatus.OK) {
            return "ack refused";
        }
        List<MessageExt> back = popUntil(topic, group, 1, 60_000, 40);
        if (back.size() != 1) {
            return "came back: " + back.size() + " messages, want 1";
        }
        MessageExt m = back.get(0);
        String body = new String(first.get(1).getBody(), StandardCharsets.UTF_8);
        if (!new String(m.getBody(), StandardCharsets.UTF_8).equals(body) || m.getReconsumeTimes() != 1
            || !topic.equals(m.getTopic()) || !String.valueOf(popTime).equals(m.getProperty("1ST_POP_TIME"))) {
            return "redelivered message: " + m;
        }
        if (!"1".equals(ExtraInfoUtil.getRetry(ExtraInfoUtil.split(m.getProperty(MessageConst.PROPERTY_POP_CK))))) {
            return "redelivery not from the retry topic: " + m.getProperty(MessageConst.PROPERTY_POP_CK);
        }
        if (ack(topic, group, m) != AckStatus.OK) {
            return "ack of the redelivery refused";
        }
        List<MessageExt> more = popUntil(topic, group, 1, 60_000, 6);
        return more.isEmpty() ? null : "acked messages came back: " + more;
    }

    static String changeInvisible() throws Exception {
        String topic = "PopJC_" + suite.run, group = "cg_popjc_" + suite.run;
        send(topic, 1);
        List<MessageExt> first = popUntil(topic, group, 1, 300_000, 10);
        if (first.size() != 1) {
            return "first pop: " + first;
        }
        MessageExt m = first.get(0);
        String extra = m.getProperty(MessageConst.PROPERTY_POP_CK);
        String[] f = ExtraInfoUtil.split(extra);
        ChangeInvisibleTimeRequestHeader h = new ChangeInvisibleTimeRequestHeader();
        h.setConsumerGroup(group);
        h.setTopic(ExtraInfoUtil.getRealTopic(f, topic, group));
        h.setQueueId(ExtraInfoUtil.getQueueId(f));
        h.setExtraInfo(extra);
        h.setOffset(ExtraInfoUtil.getQueueOffset(f));
        h.setInvisibleTime(1000L);
        CompletableFuture<AckResult> r = ackFuture();
        suite.api.changeInvisibleTimeAsync(brokerName, suite.broker, h, 5000, callback(r));
        AckResult ar = r.get(10, TimeUnit.SECONDS);
        if (ar.getStatus() != AckStatus.OK || ar.getExtraInfo() == null) {
            return "change invisible time: " + ar;
        }
        long t0 = System.currentTimeMillis();
        List<MessageExt> back = popUntil(topic, group, 1, 60_000, 30);
        if (back.size() != 1 || System.currentTimeMillis() - t0 > 25_000) {
            return "came back: " + back.size() + " after " + (System.currentTimeMillis() - t0) + " ms";
        }
        return ack(topic, group, back.get(0)) == AckStatus.OK ? null : "ack refused";
    }

    static String batchAck() throws Exception {
        String topic = "PopJB_" + suite.run, group = "cg_popjb_" + suite.run;
        send(topic, 3);
        List<MessageExt> got = popUntil(topic, group, 3, 2000, 10);
        if (got.size() != 3) {
            return "pops: " + got.size() + " messages";
        }
        List<String> extras = new ArrayList<>();
        for (MessageExt m : got) {
            extras.add(m.getProperty(MessageConst.PROPERTY_POP_CK));
        }
        CompletableFuture<AckResult> r = ackFuture();
        suite.api.batchAckMessageAsync(suite.broker, 5000, callback(r), topic, group, extras);
        if (r.get(10, TimeUnit.SECONDS).getStatus() != AckStatus.OK) {
            return "batch ack refused";
        }
        Thread.sleep(3000);
        List<MessageExt> more = popUntil(topic, group, 1, 60_000, 6);
        return more.isEmpty() ? null : "batch-acked messages came back: " + more.size();
    }

    static String orderly() throws Exception {
        String topic = "PopJO_" + suite.run, group = "cg_popjo_" + suite.run;
        send(topic, 3);
        PopResult r = null;
        for (int i = 0; i < 10 && (r == null || r.getPopStatus() != PopStatus.FOUND); i++) {
            r = pop(topic, group, 0, 2, 60_000, 1000, true);
        }
        if (r.getPopStatus() != PopStatus.FOUND || r.getMsgFoundList().size() != 2) {
            return "orderly pop: " + r;
        }
        Map<Integer, String> bodies = new HashMap<>();
        for (MessageExt m : r.getMsgFoundList()) {
            bodies.put(bodies.size(), new String(m.getBody(), StandardCharsets.UTF_8));
        }
        if (!bodies.get(0).startsWith("body-0") || !bodies.get(1).startsWith("body-1")) {
            return "out of order: " + bodies;
        }
        PopResult blocked = pop(topic, group, 0, 2, 60_000, 0, true);
        if (blocked.getPopStatus() == PopStatus.FOUND) {
            return "queue not blocked: " + blocked.getMsgFoundList();
        }
        for (MessageExt m : r.getMsgFoundList()) {
            if (ack(topic, group, m) != AckStatus.OK) {
                return "orderly ack refused";
            }
        }
        PopResult next = pop(topic, group, 0, 2, 60_000, 1000, true);
        if (next.getPopStatus() != PopStatus.FOUND || next.getMsgFoundList().size() != 1
            || !new String(next.getMsgFoundList().get(0).getBody(), StandardCharsets.UTF_8).startsWith("body-2")) {
            return "after the acks: " + next;
        }
        return ack(topic, group, next.getMsgFoundList().get(0)) == AckStatus.OK ? null : "ack refused";
    }
}
