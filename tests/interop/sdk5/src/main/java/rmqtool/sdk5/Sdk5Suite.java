package rmqtool.sdk5;

import java.io.FileDescriptor;
import java.io.FileOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import org.apache.rocketmq.client.apis.ClientConfiguration;
import org.apache.rocketmq.client.apis.ClientServiceProvider;
import org.apache.rocketmq.client.apis.consumer.ConsumeResult;
import org.apache.rocketmq.client.apis.consumer.FilterExpression;
import org.apache.rocketmq.client.apis.consumer.FilterExpressionType;
import org.apache.rocketmq.client.apis.consumer.PushConsumer;
import org.apache.rocketmq.client.apis.consumer.SimpleConsumer;
import org.apache.rocketmq.client.apis.message.Message;
import org.apache.rocketmq.client.apis.message.MessageView;
import org.apache.rocketmq.client.apis.producer.Producer;
import org.apache.rocketmq.client.apis.producer.SendReceipt;
import org.apache.rocketmq.client.apis.producer.Transaction;
import org.apache.rocketmq.client.apis.producer.TransactionResolution;

/**
 * The 5.x Java SDK (rocketmq-client-java, gRPC) through Apache's proxy: producer (normal, FIFO with a
 * message group, delay, transaction with check-back), simple consumer (receive, ack, change invisible
 * duration, redelivery after the invisible duration, DLQ after max attempts), push consumer. One JSON
 * line per scenario on stdout; exit 1 if any failed.
 *
 * <p>Usage: {@code Sdk5Suite --endpoint HOST:PORT --run ID}. Topics {@code Sdk5_<scenario>_<run>} and
 * groups {@code cg_sdk5_<scenario>_<run>} are created beforehand by the test (the proxy does not create them).
 */
public final class Sdk5Suite {
    static PrintStream out;
    static ClientServiceProvider provider;
    static ClientConfiguration conf;
    static String run;
    static boolean failed;

    public static void main(String[] args) throws Exception {
        out = new PrintStream(new FileOutputStream(FileDescriptor.out), true, StandardCharsets.UTF_8);
        System.setOut(System.err);
        String endpoint = null;
        Set<String> only = null;
        for (int i = 0; i < args.length; i++) {
            switch (args[i]) {
                case "--endpoint": endpoint = args[++i]; break;
                case "--run": run = args[++i]; break;
                case "--only": only = new HashSet<>(List.of(args[++i].split(","))); break;
                default: throw new IllegalArgumentException("unknown argument " + args[i]);
            }
        }
        provider = ClientServiceProvider.loadService();
        conf = ClientConfiguration.newBuilder().setEndpoints(endpoint).enableSsl(false)
            .setRequestTimeout(Duration.ofSeconds(10)).build();
        Map<String, Scenario> all = new java.util.LinkedHashMap<>();
        all.put("normal", Sdk5Suite::normal);
        all.put("fifo", Sdk5Suite::fifo);
        all.put("delay", Sdk5Suite::delay);
        all.put("transaction", Sdk5Suite::transaction);
        all.put("simple", Sdk5Suite::simple);
        all.put("redelivery", Sdk5Suite::redelivery);
        all.put("dlq", Sdk5Suite::dlq);
        all.put("push", Sdk5Suite::push);
        for (Map.Entry<String, Scenario> e : all.entrySet()) {
            if (only == null || only.contains(e.getKey())) {
                scenario(e.getKey(), e.getValue());
            }
        }
        System.exit(failed ? 1 : 0);
    }

    interface Scenario {
        String run() throws Exception;
    }

    static void scenario(String name, Scenario s) {
        long t0 = System.currentTimeMillis();
        String detail;
        try {
            detail = s.run();
        } catch (Throwable e) {
            detail = e.toString();
        }
        failed |= detail != null;
        out.println("{\"scenario\":\"" + name + "\",\"ok\":" + (detail == null) + ",\"detail\":"
            + (detail == null ? "null" : "\"" + detail.replace("\\", "\\\\").replace("\"", "'")
            .replace("\n", " ") + "\"") + ",\"ms\":" + (System.currentTimeMillis() - t0) + "}");
    }

    static String topic(String scenario) {
        return "Sdk5_" + scenario + "_" + run;
    }

    static String group(String scenario) {
        return "cg_sdk5_" + scenario + "_" + run;
    }

    static Message message(String topic, int i) {
        return provider.newMessageBuilder().setTopic(topic).setTag("TagA").setKeys("key" + i)
            .setBody(("body-" + i + "-\u00e9").getBytes(StandardCharsets.UTF_8)).addProperty("color", "r\u00f6t" + i)
            .build();
    }

    static String body(MessageView m) {
        byte[] b = new byte[m.getBody().remaining()];
        m.getBody().duplicate().get(b);
        return new String(b, StandardCharsets.UTF_8);
    }

    static Producer producer(String... topics) throws Exception {
        return provider.newProducerBuilder().setClientConfiguration(conf).setTopics(topics).build();
    }

    static SimpleConsumer simpleConsumer(String scenario) throws Exception {
        return provider.newSimpleConsumerBuilder().setClientConfiguration(conf).setConsumerGroup(group(scenario))
            .setAwaitDuration(Duration.ofSeconds(5))
            .setSubscriptionExpressions(Map.of(topic(scenario), new FilterExpression("*", FilterExpressionType.TAG)))
            .build();
    }

    static List<MessageView> receive(SimpleConsumer c, int want, Duration invisible, long seconds) throws Exception {
        List<MessageView> got = new ArrayList<>();
        long deadline = System.currentTimeMillis() + seconds * 1000;
        while (got.size() < want && System.currentTimeMillis() < deadline) {
            got.addAll(c.receive(16, invisible));
        }
        return got;
    }

    static String sendAndReceive(String scenario, int n) throws Exception {
        String t = topic(scenario);
        try (Producer p = producer(t); SimpleConsumer c = simpleConsumer(scenario)) {
            for (int i = 0; i < n; i++) {
                SendReceipt r = p.send(message(t, i));
                if (r.getMessageId() == null) {
                    return "no message id";
                }
            }
            List<MessageView> got = receive(c, n, Duration.ofSeconds(30), 30);
            Set<String> bodies = new HashSet<>();
            for (MessageView m : got) {
                bodies.add(body(m));
                if (!"TagA".equals(m.getTag().orElse(null)) || !m.getTopic().equals(t)) {
                    return "changed on the way: " + m;
                }
                c.ack(m);
            }
            return bodies.size() == n && got.size() == n ? null : "received " + got.size() + " of " + n;
        }
    }

    static String normal() throws Exception {
        return sendAndReceive("normal", 5);
    }

    static String fifo() throws Exception {
        String t = topic("fifo");
        try (Producer p = producer(t)) {
            Set<String> queues = new HashSet<>();
            for (int i = 0; i < 6; i++) {
                Message m = provider.newMessageBuilder().setTopic(t).setTag("TagA").setMessageGroup("order-1")
                    .setBody(("fifo-" + i).getBytes(StandardCharsets.UTF_8)).build();
                SendReceipt r = p.send(m);
                queues.add(r.getMessageId().toString().isEmpty() ? "?" : "ok");
            }
        }
        try (SimpleConsumer c = simpleConsumer("fifo")) {
            List<MessageView> got = receive(c, 6, Duration.ofSeconds(30), 30);
            List<String> order = new ArrayList<>();
            for (MessageView m : got) {
                order.add(body(m));
                c.ack(m);
            }
            List<String> want = List.of("fifo-0", "fifo-1", "fifo-2", "fifo-3", "fifo-4", "fifo-5");
            return new ArrayList<>(new java.util.TreeSet<>(order)).equals(want) ? null : "received " + order;
        }
    }

    static String delay() throws Exception {
        String t = topic("delay");
        long at = System.currentTimeMillis() + 3000;
        try (Producer p = producer(t); SimpleConsumer c = simpleConsumer("delay")) {
            p.send(provider.newMessageBuilder().setTopic(t).setTag("TagA").setDeliveryTimestamp(at)
                .setBody("later".getBytes(StandardCharsets.UTF_8)).build());
            List<MessageView> got = receive(c, 1, Duration.ofSeconds(30), 30);
            long now = System.currentTimeMillis();
            if (got.size() != 1 || now < at - 200) {
                return "got " + got.size() + " message(s) " + (at - now) + " ms before the delivery time";
            }
            c.ack(got.get(0));
            return null;
        }
    }

    static String transaction() throws Exception {
        String t = topic("transaction");
        Set<String> checked = ConcurrentHashMap.newKeySet();
        try (Producer p = provider.newProducerBuilder().setClientConfiguration(conf).setTopics(t)
            .setTransactionChecker(m -> {
                // a broker may ask about any half message whose end it has not seen yet
                checked.add(body(m));
                return body(m).equals("rollback") ? TransactionResolution.ROLLBACK : TransactionResolution.COMMIT;
            }).build(); SimpleConsumer c = simpleConsumer("transaction")) {
            Transaction commit = p.beginTransaction();
            p.send(provider.newMessageBuilder().setTopic(t).setTag("TagA").setBody("commit".getBytes()).build(), commit);
            commit.commit();
            Transaction rollback = p.beginTransaction();
            p.send(provider.newMessageBuilder().setTopic(t).setTag("TagA").setBody("rollback".getBytes()).build(),
                rollback);
            rollback.rollback();
            Transaction unknown = p.beginTransaction();
            p.send(provider.newMessageBuilder().setTopic(t).setTag("TagA").setBody("checked".getBytes()).build(),
                unknown);  // neither committed nor rolled back: the broker asks the checker
            Set<String> bodies = new HashSet<>();
            long deadline = System.currentTimeMillis() + 60_000;
            while (!bodies.containsAll(Set.of("commit", "checked")) && System.currentTimeMillis() < deadline) {
                for (MessageView m : c.receive(16, Duration.ofSeconds(30))) {
                    bodies.add(body(m));
                    c.ack(m);
                }
            }
            if (!bodies.equals(Set.of("commit", "checked"))) {
                return "received " + bodies + ", checked " + checked;
            }
            return checked.contains("checked") ? null : "the checker was not asked";
        }
    }

    static String simple() throws Exception {
        return sendAndReceive("simple", 3);
    }

    static String redelivery() throws Exception {
        String t = topic("redelivery");
        try (Producer p = producer(t); SimpleConsumer c = simpleConsumer("redelivery")) {
            p.send(message(t, 0));
            p.send(message(t, 1));
            List<MessageView> first = receive(c, 2, Duration.ofSeconds(20), 30);
            if (first.size() != 2) {
                return "first receive: " + first.size();
            }
            MessageView keep = first.get(0);
            c.ack(first.get(1));
            c.changeInvisibleDuration(keep, Duration.ofSeconds(2));
            long t0 = System.currentTimeMillis();
            List<MessageView> back = receive(c, 1, Duration.ofSeconds(20), 30);
            if (back.size() != 1 || !body(back.get(0)).equals(body(keep))) {
                return "came back: " + back.size();
            }
            if (back.get(0).getDeliveryAttempt() != 2) {
                return "delivery attempt " + back.get(0).getDeliveryAttempt();
            }
            long waited = System.currentTimeMillis() - t0;
            c.ack(back.get(0));
            List<MessageView> more = receive(c, 1, Duration.ofSeconds(20), 8);
            return more.isEmpty() ? (waited < 25_000 ? null : "came back after " + waited + " ms")
                : "acked messages came back: " + more.size();
        }
    }

    static String dlq() throws Exception {
        // the group is created with retryMaxTimes 1 by the test: two deliveries, then the DLQ
        String t = topic("dlq");
        try (Producer p = producer(t); SimpleConsumer c = simpleConsumer("dlq")) {
            p.send(message(t, 0));
            List<Integer> attempts = new ArrayList<>();
            long deadline = System.currentTimeMillis() + 90_000;
            while (System.currentTimeMillis() < deadline && attempts.size() < 3) {
                for (MessageView m : c.receive(16, Duration.ofSeconds(10))) {  // the proxy's minimum
                    attempts.add(m.getDeliveryAttempt());
                }
                if (attempts.size() == 2 && System.currentTimeMillis() > deadline - 50_000) {
                    break;
                }
            }
            return attempts.equals(List.of(1, 2)) ? null : "delivery attempts " + attempts;
        }
    }

    static String push() throws Exception {
        String t = topic("push");
        Set<String> got = ConcurrentHashMap.newKeySet();
        List<String> dup = Collections.synchronizedList(new ArrayList<>());
        try (Producer p = producer(t); PushConsumer c = provider.newPushConsumerBuilder().setClientConfiguration(conf)
            .setConsumerGroup(group("push"))
            .setSubscriptionExpressions(Map.of(t, new FilterExpression("*", FilterExpressionType.TAG)))
            .setMessageListener(m -> {
                if (!got.add(body(m))) {
                    dup.add(body(m));
                }
                return ConsumeResult.SUCCESS;
            }).build()) {
            for (int i = 0; i < 5; i++) {
                p.send(message(t, i));
            }
            long deadline = System.currentTimeMillis() + 40_000;
            while (got.size() < 5 && System.currentTimeMillis() < deadline) {
                Thread.sleep(200);
            }
        }
        return got.size() == 5 && dup.isEmpty() ? null : "push consumer got " + got + ", twice " + dup;
    }
}
