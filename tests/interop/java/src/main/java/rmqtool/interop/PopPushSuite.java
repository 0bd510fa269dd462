package rmqtool.interop;

import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicInteger;
import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.consumer.listener.ConsumeConcurrentlyStatus;
import org.apache.rocketmq.client.consumer.listener.MessageListenerConcurrently;
import org.apache.rocketmq.common.consumer.ConsumeFromWhere;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.common.message.MessageConst;
import org.apache.rocketmq.common.message.MessageExt;
import org.apache.rocketmq.common.message.MessageQueue;
import org.apache.rocketmq.common.message.MessageRequestMode;

/**
 * Apache RocketMQ's classic push consumer (DefaultMQPushConsumer, Java client 5.3.3) in POP mode:
 * the group is switched to POP for the topic with SET_MESSAGE_REQUEST_MODE (what
 * {@code mqadmin setConsumeMode -m POP -q N} sends), the consumer has {@code setClientRebalance(false)},
 * so its rebalance asks the broker (QUERY_ASSIGNMENT) and, told POP, pops queueId -1, acks what
 * it consumed and changes the invisible time of what it returns RECONSUME_LATER for. One JSON
 * line per scenario on stdout ({@code {"scenario", "ok", "detail", "ms"}}); exit 1 if any failed.
 *
 * <p>Usage: {@code PopPushSuite --namesrv HOST:PORT --broker HOST:PORT --run ID}. Scenarios:
 * consume-all (every one of 20 messages on 4 queues once, each with a POP_CK receipt handle, the
 * process queues are the broker's POP assignment, nothing redelivered after the invisible time),
 * reconsume-later (a message answered RECONSUME_LATER comes back with reconsumeTimes 1, is then
 * consumed and does not come back again).
 */
public final class PopPushSuite {
    static ScenarioRunner suite;

    public static void main(String[] args) throws Exception {
        suite = new ScenarioRunner(args, "pop_push_producer_");
        suite.scenario("consume-all", PopPushSuite::consumeAll);
        suite.scenario("reconsume-later", PopPushSuite::reconsumeLater);
        suite.exit();
    }

    /** A topic of {@code queues} queues, its group in POP mode for it (popShareQueueNum {@code share}). */
    static void prepare(String topic, String group, int queues, int share) throws Exception {
        suite.producer.createTopic("TBW102", topic, queues, null);
        suite.api.setMessageRequestMode(suite.broker, topic, group, MessageRequestMode.POP, share, 5000);
    }

    static List<String> send(String topic, int n) throws Exception {
        List<String> bodies = new ArrayList<>();
        for (int i = 0; i < n; i++) {
            String body = "pop-push-" + i + "-\u00e9";
            Message m = new Message(topic, "tg", "key" + i, body.getBytes(StandardCharsets.UTF_8));
            suite.send(m);
            bodies.add(body);
        }
        return bodies;
    }

    static DefaultMQPushConsumer consumer(String group, String topic, MessageListenerConcurrently listener)
        throws Exception {
        DefaultMQPushConsumer c = new DefaultMQPushConsumer(group);
        c.setNamesrvAddr(suite.namesrv);
        c.setInstanceName("pop_push_" + group);
        c.setClientRebalance(false);  // the broker assigns the queues and says POP
        c.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET);  // initMode MIN: sent before start
        c.setPopInvisibleTime(5000);
        c.setPopBatchNums(8);
        c.subscribe(topic, "*");
        c.registerMessageListener(listener);
        c.start();
        return c;
    }

    static String consumeAll() throws Exception {
        String topic = "PopPush_all_" + suite.run;
        String group = "pop_push_all_" + suite.run;
        prepare(topic, group, 4, 0);
        List<String> sent = send(topic, 20);
        Map<String, AtomicInteger> seen = new ConcurrentHashMap<>();
        Set<String> noHandle = ConcurrentHashMap.newKeySet();
        DefaultMQPushConsumer c = consumer(group, topic, (msgs, ctx) -> {
            for (MessageExt m : msgs) {
                String body = new String(m.getBody(), StandardCharsets.UTF_8);
                seen.computeIfAbsent(body, k -> new AtomicInteger()).incrementAndGet();
                if (m.getProperty(MessageConst.PROPERTY_POP_CK) == null) {
                    noHandle.add(body);
                }
            }
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
        });
        try {
            long deadline = System.currentTimeMillis() + 60_000;
            while (seen.size() < sent.size() && System.currentTimeMillis() < deadline) {
                Thread.sleep(200);
            }
            if (seen.size() < sent.size()) {
                Set<String> missing = new TreeSet<>(sent);
                missing.removeAll(seen.keySet());
                return "consumed " + seen.size() + " of " + sent.size() + ", missing " + missing;
            }
            Set<MessageQueue> popQueues = new TreeSet<>(
                c.getDefaultMQPushConsumerImpl().getRebalanceImpl().getPopProcessQueueTable().keySet());
            Set<MessageQueue> pullQueues = new TreeSet<>();
            for (MessageQueue mq : c.getDefaultMQPushConsumerImpl().getRebalanceImpl().getProcessQueueTable().keySet()) {
                if (mq.getTopic().equals(topic)) {
                    pullQueues.add(mq);
                }
            }
            if (popQueues.isEmpty() || !pullQueues.isEmpty()) {
                return "not in POP mode: pop queues " + popQueues + ", pulled queues " + pullQueues;
            }
            for (MessageQueue mq : popQueues) {
                if (mq.getQueueId() != -1 || !mq.getTopic().equals(topic)) {
                    return "POP assignment with popShareQueueNum 0 is not queueId -1: " + popQueues;
                }
            }
            if (!noHandle.isEmpty()) {
                return "delivered without a POP_CK receipt handle: " + noHandle;
            }
            Thread.sleep(8_000);  // past the 5 s invisible time and a revive scan: acked ones stay acked
            for (Map.Entry<String, AtomicInteger> e : seen.entrySet()) {
                if (e.getValue().get() != 1) {
                    return e.getKey() + " delivered " + e.getValue().get() + " times, acked after the first";
                }
            }
            return null;
        } finally {
            c.shutdown();
        }
    }

    static String reconsumeLater() throws Exception {
        String topic = "PopPush_later_" + suite.run;
        String group = "pop_push_later_" + suite.run;
        prepare(topic, group, 2, 0);
        List<String> sent = send(topic, 2);
        Map<String, List<Integer>> times = new ConcurrentHashMap<>();
        DefaultMQPushConsumer c = consumer(group, topic, (msgs, ctx) -> {
            boolean later = false;
            for (MessageExt m : msgs) {
                String body = new String(m.getBody(), StandardCharsets.UTF_8);
                times.computeIfAbsent(body, k -> java.util.Collections.synchronizedList(new ArrayList<>()))
                    .add(m.getReconsumeTimes());
                later |= body.equals(sent.get(0)) && m.getReconsumeTimes() == 0;
            }
            return later ? ConsumeConcurrentlyStatus.RECONSUME_LATER : ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
        });
        try {
            // RECONSUME_LATER changes the invisible time to the first pop delay level, 10 s
            long deadline = System.currentTimeMillis() + 60_000;
            while (System.currentTimeMillis() < deadline
                && (times.getOrDefault(sent.get(0), List.of()).size() < 2 || !times.containsKey(sent.get(1)))) {
                Thread.sleep(200);
            }
            List<Integer> first = times.getOrDefault(sent.get(0), List.of());
            if (first.size() < 2) {
                return "the message answered RECONSUME_LATER was delivered " + first + " (reconsumeTimes), not again";
            }
            if (first.get(0) != 0 || first.get(1) != 1) {
                return "reconsumeTimes of the redelivered message: " + first + ", expected [0, 1]";
            }
            Thread.sleep(8_000);  // acked the second time: past its 5 s invisible time it has not come back
            first = new ArrayList<>(times.get(sent.get(0)));
            List<Integer> second = new ArrayList<>(times.getOrDefault(sent.get(1), List.of()));
            if (first.size() != 2) {
                return "after its successful redelivery the message came back again: " + first;
            }
            if (second.size() != 1) {
                return "the message consumed at once was delivered " + second.size() + " times: " + second;
            }
            return null;
        } finally {
            c.shutdown();
        }
    }
}
