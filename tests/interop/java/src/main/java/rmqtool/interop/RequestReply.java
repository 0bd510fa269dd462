package rmqtool.interop;

import java.io.FileDescriptor;
import java.io.FileOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.consumer.listener.ConsumeConcurrentlyStatus;
import org.apache.rocketmq.client.consumer.listener.MessageListenerConcurrently;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.RequestCallback;
import org.apache.rocketmq.client.utils.MessageUtil;
import org.apache.rocketmq.common.consumer.ConsumeFromWhere;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.common.message.MessageExt;

/**
 * Request-reply with Apache's Java client (5.3.3, remoting): {@code DefaultMQProducer.request} and a
 * push consumer answering with {@code MessageUtil.createReplyMessage}.
 *
 * <p>The requests use the callback form, {@code request(msg, RequestCallback, timeout)}: in 5.3.1 to
 * 5.3.3 the blocking {@code request(msg, timeout)} gives up as soon as the broker acknowledges the send
 * (its send callback counts the reply latch down), whichever broker; fixed upstream after 5.3.3
 * ("remove wrong logic in the callback for sending messages in rpc", #9608). The callback form has
 * the same slip: the send acknowledgement calls {@code onSuccess(null)}, then the reply calls
 * {@code onSuccess(reply)}; the null is skipped here.
 *
 * <p>{@code RequestReply request --namesrv A --topic T --count N}: N requests with bodies "req-i",
 * one JSON line per reply ({@code {"i", "ok", "body", "correlation", "ms"}}); exit 1 if any failed.
 * {@code RequestReply reply --namesrv A --topic T --group G}: answers each request with
 * "reply-to:" + its body until stdin closes; prints {"ready": true} once subscribed.
 */
public final class RequestReply {
    public static void main(String[] args) throws Exception {
        PrintStream out = new PrintStream(new FileOutputStream(FileDescriptor.out), true, StandardCharsets.UTF_8);
        System.setOut(System.err);
        String mode = args[0];
        String namesrv = null;
        String topic = null;
        String group = "RR_JAVA_REPLIER";
        int count = 3;
        for (int i = 1; i < args.length; i++) {
            switch (args[i]) {
                case "--namesrv": namesrv = args[++i]; break;
                case "--topic": topic = args[++i]; break;
                case "--group": group = args[++i]; break;
                case "--count": count = Integer.parseInt(args[++i]); break;
                default:
                    System.err.println("unknown argument " + args[i]);
                    System.exit(2);
            }
        }
        if ("request".equals(mode)) {
            DefaultMQProducer producer = new DefaultMQProducer("RR_JAVA_REQUESTER");
            producer.setNamesrvAddr(namesrv);
            producer.start();
            boolean allOk = true;
            try {
                for (int i = 0; i < count; i++) {
                    long t0 = System.currentTimeMillis();
                    Message req = new Message(topic, "req", ("req-" + i).getBytes(StandardCharsets.UTF_8));
                    Json line = new Json().put("i", i);
                    try {
                        CompletableFuture<Message> got = new CompletableFuture<>();
                        producer.request(req, new RequestCallback() {
                            @Override
                            public void onSuccess(Message message) {
                                if (message != null) {
                                    got.complete(message);
                                }
                            }

                            @Override
                            public void onException(Throwable e) {
                                got.completeExceptionally(e);
                            }
                        }, 10_000);
                        Message reply = got.get(15, TimeUnit.SECONDS);
                        line.put("ok", true).put("body", new String(reply.getBody(), StandardCharsets.UTF_8))
                            .put("correlation", reply.getProperty("CORRELATION_ID"))
                            .put("replyTopic", reply.getTopic());
                    } catch (Exception e) {
                        allOk = false;
                        line.put("ok", false).put("error", e.toString());
                    }
                    out.println(line.put("ms", System.currentTimeMillis() - t0));
                }
            } finally {
                producer.shutdown();
            }
            System.exit(allOk ? 0 : 1);
        }
        DefaultMQProducer replier = new DefaultMQProducer(group + "_P");
        replier.setNamesrvAddr(namesrv);
        replier.start();
        DefaultMQPushConsumer consumer = new DefaultMQPushConsumer(group);
        consumer.setNamesrvAddr(namesrv);
        consumer.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET);
        consumer.subscribe(topic, "*");
        consumer.registerMessageListener((MessageListenerConcurrently) (msgs, ctx) -> {
            for (MessageExt m : msgs) {
                try {
                    byte[] body = ("reply-to:" + new String(m.getBody(), StandardCharsets.UTF_8))
                        .getBytes(StandardCharsets.UTF_8);
                    replier.send(MessageUtil.createReplyMessage(m, body), 5_000);
                } catch (Exception e) {
                    e.printStackTrace();
                }
            }
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
        });
        consumer.start();
        out.println(new Json().put("ready", true));
        while (System.in.read() >= 0) {
            // until the caller closes stdin
        }
        consumer.shutdown();
        replier.shutdown();
        System.exit(0);
    }
}
