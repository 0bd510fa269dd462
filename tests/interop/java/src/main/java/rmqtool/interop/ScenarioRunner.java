package rmqtool.interop;

import java.io.FileDescriptor;
import java.io.FileOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import org.apache.rocketmq.client.impl.MQClientAPIImpl;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.common.message.Message;

/**
 * What {@link PopSuite} and {@link PopPushSuite} share: their arguments ({@code --namesrv HOST:PORT
 * --broker HOST:PORT --run ID}), a started producer and its {@code MQClientAPIImpl}, one JSON line
 * per scenario on stdout ({@code {"scenario", "ok", "detail", "ms"}}, the client's own output sent
 * to stderr) and the exit code (1 if any scenario failed).
 */
final class ScenarioRunner {
    interface Scenario {
        /** null when the scenario passed, else what went wrong. */
        String run() throws Exception;
    }

    final PrintStream out;
    String namesrv;
    String broker;
    String run;
    final DefaultMQProducer producer;
    final MQClientAPIImpl api;
    boolean failed;

    /** Parses {@code args} and starts a producer of group {@code producerGroupPrefix + run}. */
    ScenarioRunner(String[] args, String producerGroupPrefix) throws Exception {
        out = new PrintStream(new FileOutputStream(FileDescriptor.out), true, StandardCharsets.UTF_8);
        System.setOut(System.err);
        System.setProperty("rocketmq.client.logUseSlf4j", "false");
        for (int i = 0; i < args.length; i++) {
            switch (args[i]) {
                case "--namesrv": namesrv = args[++i]; break;
                case "--broker": broker = args[++i]; break;
                case "--run": run = args[++i]; break;
                default: throw new IllegalArgumentException("unknown argument " + args[i]);
            }
        }
        producer = new DefaultMQProducer(producerGroupPrefix + run);
        producer.setNamesrvAddr(namesrv);
        producer.start();
        api = producer.getDefaultMQProducerImpl().getMqClientFactory().getMQClientAPIImpl();
    }

    void scenario(String name, Scenario s) {
        long t0 = System.currentTimeMillis();
        String detail;
        boolean ok;
        try {
            detail = s.run();
            ok = detail == null;
        } catch (Throwable e) {
            ok = false;
            detail = e.toString();
        }
        failed |= !ok;
        out.println(new Json().put("scenario", name).put("ok", ok).put("detail", detail)
            .put("ms", System.currentTimeMillis() - t0));
    }

    /** Sends {@code m}, retrying for ~10 s: the route of a topic just created may take a moment. */
    SendResult send(Message m) throws Exception {
        for (int attempt = 0; ; attempt++) {
            try {
                return producer.send(m);
            } catch (Exception e) {
                if (attempt > 20) {
                    throw e;
                }
                Thread.sleep(500);
            }
        }
    }

    void exit() {
        producer.shutdown();
        System.exit(failed ? 1 : 0);
    }
}
