package rmqtool.interop.grpc;

import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CopyOnWriteArrayList;
import org.apache.rocketmq.client.apis.ClientConfiguration;
import org.apache.rocketmq.client.apis.ClientServiceProvider;
import org.apache.rocketmq.client.apis.consumer.ConsumeResult;
import org.apache.rocketmq.client.apis.consumer.FilterExpression;
import org.apache.rocketmq.client.apis.consumer.FilterExpressionType;
import org.apache.rocketmq.client.apis.consumer.PushConsumer;
import org.apache.rocketmq.client.apis.consumer.SimpleConsumer;
import org.apache.rocketmq.client.apis.message.Message;
import org.apache.rocketmq.client.apis.message.MessageBuilder;
import org.apache.rocketmq.client.apis.message.MessageView;
import org.apache.rocketmq.client.apis.producer.Producer;
import org.apache.rocketmq.client.apis.producer.SendReceipt;
import org.apache.rocketmq.client.apis.producer.Transaction;
import org.apache.rocketmq.client.apis.producer.TransactionResolution;

/**
 * Apache's Java 5.x SDK against one gRPC endpoint (serve's or Apache's proxy), one scenario per
 * run, what it saw printed as JSON lines on stdout for tests/interop/test_grpc.py to check:
 * <pre>
 *   send ENDPOINT TOPIC normal|fifo|delay N     one line per receipt: {"i":..,"id":..}
 *   transaction ENDPOINT TOPIC                  commit, rollback, and one left to the check-back
 *   simple ENDPOINT TOPIC GROUP N               receive, ack, change invisible duration, redelivery
 *   push ENDPOINT TOPIC GROUP N                 a push consumer until N messages
 * </pre>
 */
public final class JavaSdkSuite {
    private static final ClientServiceProvider PROVIDER = ClientServiceProvider.loadService();

    private JavaSdkSuite() {
    }

    public static void main(String[] args) throws Exception {
        ClientConfiguration cfg = ClientConfiguration.newBuilder().setEndpoints(args[1]).enableSsl(false)
            .setRequestTimeout(Duration.ofSeconds(10)).build();
        switch (args[0]) {
            case "send":
                send(cfg, args[2], args[3], Integer.parseInt(args[4]));
                break;
            case "transaction":
                transaction(cfg, args[2]);
                break;
            case "simple":
                simple(cfg, args[2], args[3], Integer.parseInt(args[4]));
                break;
            case "push":
                push(cfg, args[2], args[3], Integer.parseInt(args[4]));
                break;
            default:
                throw new IllegalArgumentException(args[0]);
        }
        System.out.flush();
        System.exit(0);  // the SDK's scheduler threads would keep the JVM up
    }

    private static void send(ClientConfiguration cfg, String topic, String kind, int n) throws Exception {
        try (Producer p = PROVIDER.newProducerBuilder().setClientConfiguration(cfg).setTopics(topic).build()) {
            for (int i = 0; i < n; i++) {
                MessageBuilder b = PROVIDER.newMessageBuilder().setTopic(topic).setTag("TagJ").setKeys("kj" + i)
                    .addProperty("seq", Integer.toString(i)).setBody(("java " + i).getBytes(StandardCharsets.UTF_8));
                if (kind.equals("fifo")) {
                    b.setMessageGroup("g" + (i % 2));
                } else if (kind.equals("delay")) {
                    b.setDeliveryTimestamp(System.currentTimeMillis() + 3000);
                }
                SendReceipt r = p.send(b.build());
                System.out.println("{\"i\":" + i + ",\"id\":" + q(r.getMessageId().toString()) + "}");
            }
        }
    }

    private static void transaction(ClientConfiguration cfg, String topic) throws Exception {
        List<String> checked = new CopyOnWriteArrayList<>();
        try (Producer p = PROVIDER.newProducerBuilder().setClientConfiguration(cfg).setTopics(topic)
            .setTransactionChecker(view -> {
                String body = StandardCharsets.UTF_8.decode(view.getBody()).toString();
                checked.add(body);
                return body.equals("rolled back") ? TransactionResolution.ROLLBACK : TransactionResolution.COMMIT;
            }).build()) {
            Transaction t1 = p.beginTransaction();
            p.send(message(topic, "committed"), t1);
            Transaction t2 = p.beginTransaction();
            p.send(message(topic, "rolled back"), t2);
            Transaction t3 = p.beginTransaction();
            p.send(message(topic, "checked"), t3);  // never ended here: the broker asks
            t1.commit();
            t2.rollback();
            long deadline = System.currentTimeMillis() + 90_000;  // a loaded broker checks late
            while (!checked.contains("checked") && System.currentTimeMillis() < deadline) {
                Thread.sleep(100);
            }
            Thread.sleep(1000);  // the EndTransaction of the check-back goes out asynchronously
            System.out.println("{\"checked\":" + list(checked) + "}");
        }
    }

    private static Message message(String topic, String body) {
        return PROVIDER.newMessageBuilder().setTopic(topic).setTag("TagT").setBody(body.getBytes(StandardCharsets.UTF_8))
            .build();
    }

    private static void simple(ClientConfiguration cfg, String topic, String group, int n) throws Exception {
        try (SimpleConsumer c = PROVIDER.newSimpleConsumerBuilder().setClientConfiguration(cfg).setConsumerGroup(group)
            .setAwaitDuration(Duration.ofSeconds(5))
            .setSubscriptionExpressions(Collections.singletonMap(topic, new FilterExpression("*", FilterExpressionType.TAG)))
            .build()) {
            List<MessageView> got = new ArrayList<>();
            long deadline = System.currentTimeMillis() + 30_000;
            while (got.size() < n && System.currentTimeMillis() < deadline) {
                got.addAll(c.receive(16, Duration.ofSeconds(15)));
            }
            for (MessageView m : got) {
                System.out.println(view(m));
            }
            if (got.isEmpty()) {
                return;
            }
            MessageView later = got.get(got.size() - 1);
            for (MessageView m : got) {
                if (m != later) {
                    c.ack(m);
                }
            }
            c.changeInvisibleDuration(later, Duration.ofSeconds(2));
            deadline = System.currentTimeMillis() + 40_000;
            List<MessageView> again = new ArrayList<>();
            while (again.isEmpty() && System.currentTimeMillis() < deadline) {
                again.addAll(c.receive(16, Duration.ofSeconds(15)));
            }
            for (MessageView m : again) {
                System.out.println("{\"redelivered\":" + q(m.getMessageId().toString()) + ",\"attempt\":"
                    + m.getDeliveryAttempt() + "}");
                c.ack(m);
            }
            System.out.println("{\"after\":" + c.receive(16, Duration.ofSeconds(15)).size() + "}");
        }
    }

    private static void push(ClientConfiguration cfg, String topic, String group, int n) throws Exception {
        List<String> bodies = new CopyOnWriteArrayList<>();
        try (PushConsumer c = PROVIDER.newPushConsumerBuilder().setClientConfiguration(cfg).setConsumerGroup(group)
            .setSubscriptionExpressions(Collections.singletonMap(topic, new FilterExpression("*", FilterExpressionType.TAG)))
            .setMessageListener(m -> {
                bodies.add(StandardCharsets.UTF_8.decode(m.getBody()).toString());
                return ConsumeResult.SUCCESS;
            }).build()) {
            long deadline = System.currentTimeMillis() + 40_000;
            while (bodies.size() < n && System.currentTimeMillis() < deadline) {
                Thread.sleep(100);
            }
            System.out.println("{\"bodies\":" + list(bodies) + "}");
        }
    }

    private static String view(MessageView m) {
        StringBuilder props = new StringBuilder("{");
        for (Map.Entry<String, String> e : m.getProperties().entrySet()) {
            if (props.length() > 1) {
                props.append(',');
            }
            props.append(q(e.getKey())).append(':').append(q(e.getValue()));
        }
        props.append('}');
        return "{\"id\":" + q(m.getMessageId().toString()) + ",\"topic\":" + q(m.getTopic()) + ",\"body\":"
            + q(StandardCharsets.UTF_8.decode(m.getBody()).toString()) + ",\"tag\":" + q(m.getTag().orElse(""))
            + ",\"keys\":" + list(new ArrayList<>(m.getKeys())) + ",\"props\":" + props + ",\"attempt\":"
            + m.getDeliveryAttempt() + ",\"group\":" + q(m.getMessageGroup().orElse("")) + "}";
    }

    private static String list(List<String> items) {
        StringBuilder b = new StringBuilder("[");
        for (String s : items) {
            if (b.length() > 1) {
                b.append(',');
            }
            b.append(q(s));
        }
        return b.append(']').toString();
    }

    private static String q(String s) {
        StringBuilder b = new StringBuilder("\"");
        for (char c : s.toCharArray()) {
            if (c == '"' || c == '\\') {
                b.append('\\').append(c);
            } else if (c < 0x20) {
                b.append(String.format("\\u%04x", (int) c));
            } else {
                b.append(c);
            }
        }
        return b.append('"').toString();
    }
}
