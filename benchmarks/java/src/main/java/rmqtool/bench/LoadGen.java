package rmqtool.bench;

import io.nats.client.Connection;
import io.nats.client.JetStream;
import io.nats.client.JetStreamSubscription;
import io.nats.client.Nats;
import io.nats.client.PullSubscribeOptions;
import io.nats.client.api.AckPolicy;
import io.nats.client.api.ConsumerConfiguration;
import io.nats.client.api.DeliverPolicy;
import io.nats.client.api.PublishAck;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.atomic.AtomicLong;
import org.apache.rocketmq.client.consumer.DefaultMQPullConsumer;
import org.apache.rocketmq.client.consumer.PullResult;
import org.apache.rocketmq.client.consumer.PullStatus;
import org.apache.rocketmq.client.exception.MQBrokerException;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.client.producer.SendStatus;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.common.message.MessageQueue;

/**
 * One load-generator process of benchmarks/serve.py.
 *
 * <p>Real clients, so that the servers are measured and not a Python generator: Apache RocketMQ's
 * Java client (5.3.3) for rmqtool serve and Apache's broker, NATS' Java client for JetStream. Each
 * producer thread has its own client instance (its own connection) and one request in flight, like
 * an application's synchronous producer. Queues are chosen round robin per thread, explicitly, so
 * every server sees the same spread.
 *
 * <pre>
 *   LoadGen rocketmq|nats produce single|batch ADDR TOPIC FIRST_IDX THREADS START_AT_MS DURATION_S [WARMUP_S]
 *   LoadGen rocketmq|nats consume ADDR TOPIC QUEUE[,QUEUE...]
 * </pre>
 *
 * ADDR is the name server (RocketMQ) or the NATS server, host:port. Producers send from WARMUP_S
 * (default 0) before START_AT_MS on, unmeasured: the send path is compiled by the JIT before the
 * window opens, so a case does not time this JVM's warm-up. Prints one JSON line:
 * {"count":N,"busy":B,"lat":[seconds,...]} (latencies of a sample of requests).
 */
public final class LoadGen {
    static final int MSG_SIZE = 1024;
    static final int BATCH = 32;
    static final int QUEUES = 8;
    static final int LAT_KEEP = 20_000; // latencies kept per thread
    static final byte[] BODY = new byte[MSG_SIZE];

    static {
        for (int i = 0; i < MSG_SIZE; i++) {
            BODY[i] = (byte) ((i * 7) % 251);
        }
    }

    private LoadGen() {
    }

    /** What one thread measured. */
    static final class Tally {
        long count;
        long busy;
        final double[] lat = new double[LAT_KEEP];
        int nlat;
        long seen;

        void latency(long nanos) {
            seen++;
            if (nlat < LAT_KEEP) {
                lat[nlat++] = nanos / 1e9;
            } else { // reservoir: a uniform sample of the whole run
                long j = java.util.concurrent.ThreadLocalRandom.current().nextLong(seen);
                if (j < LAT_KEEP) {
                    lat[(int) j] = nanos / 1e9;
                }
            }
        }
    }

    interface Body {
        void run(int thread, Tally t) throws Exception;
    }

    public static void main(String[] args) throws Exception {
        System.setProperty("rocketmq.client.logUseSlf4j", "false");
        System.setProperty("rocketmq.client.logLevel", "ERROR");
        String kind = args[0];
        String action = args[1];
        List<Tally> tallies;
        Thread clock = new Thread(LoadGen::markWindowStart); // reads the CPU clock when the window opens
        clock.setDaemon(true);
        if (action.equals("produce")) {
            String mode = args[2];
            String addr = args[3];
            String topic = args[4];
            int first = Integer.parseInt(args[5]);
            int threads = Integer.parseInt(args[6]);
            long startAt = Long.parseLong(args[7]);
            double duration = Double.parseDouble(args[8]);
            WARMUP_MS = args.length > 9 ? (long) (Double.parseDouble(args[9]) * 1000) : 0;
            Body body = kind.equals("nats")
                ? natsProducer(addr, topic, mode, first, startAt, duration)
                : rocketmqProducer(addr, topic, mode, first, startAt, duration);
            WINDOW_START_MS = startAt;
            clock.start();
            tallies = runThreads(threads, body);
        } else {
            String addr = args[2];
            String topic = args[3];
            String[] qs = args[4].split(",");
            int[] queues = new int[qs.length];
            for (int i = 0; i < qs.length; i++) {
                queues[i] = Integer.parseInt(qs[i]);
            }
            READY = new java.util.concurrent.CountDownLatch(queues.length);
            Body body = kind.equals("nats") ? natsPuller(addr, topic, queues) : rocketmqPuller(addr, topic, queues);
            clock.start();
            tallies = runThreads(queues.length, body);
        }
        long cpuEnd = processCpuNanos();
        long windowEnd = System.currentTimeMillis();
        clock.join();
        StringBuilder out = new StringBuilder();
        long count = 0;
        long busy = 0;
        for (Tally t : tallies) {
            count += t.count;
            busy += t.busy;
        }
        // the measured window (epoch ms) and this process's CPU in it: client start-up (JVM, client
        // instances, route look-ups) is outside it, so the server is timed and the client's cost shown
        out.append("{\"count\":").append(count).append(",\"busy\":").append(busy)
            .append(",\"t0\":").append(windowStart).append(",\"t1\":").append(windowEnd)
            .append(",\"cpu\":").append(String.format("%.6f", (cpuEnd - windowCpu) / 1e9)).append(",\"lat\":[");
        boolean firstLat = true;
        for (Tally t : tallies) {
            for (int i = 0; i < t.nlat; i++) {
                if (!firstLat) {
                    out.append(',');
                }
                firstLat = false;
                out.append(String.format("%.6f", t.lat[i]));
            }
        }
        out.append("]}");
        System.out.println(out);
        System.out.flush();
        Runtime.getRuntime().halt(0); // client threads need not wind down
    }

    static long WARMUP_MS; // produce: unmeasured sending before the window
    static volatile long WINDOW_START_MS; // produce: the agreed start; consume: set when every puller is ready
    static java.util.concurrent.CountDownLatch READY; // consume: counted down by each puller once it has its queue
    static volatile long windowStart;
    static volatile long windowCpu;

    static long processCpuNanos() {
        return ((com.sun.management.OperatingSystemMXBean) java.lang.management.ManagementFactory
            .getOperatingSystemMXBean()).getProcessCpuTime();
    }

    static void markWindowStart() {
        try {
            if (READY != null) {
                READY.await(120, java.util.concurrent.TimeUnit.SECONDS);
            } else {
                waitUntil(WINDOW_START_MS);
            }
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
        windowCpu = processCpuNanos();
        windowStart = System.currentTimeMillis();
    }

    static void ready() throws InterruptedException {
        READY.countDown();
        READY.await(120, java.util.concurrent.TimeUnit.SECONDS); // a puller that failed does not hold the rest
    }

    static List<Tally> runThreads(int n, Body body) throws Exception {
        List<Tally> tallies = new ArrayList<>();
        List<Thread> threads = new ArrayList<>();
        List<Exception> errors = new ArrayList<>();
        for (int i = 0; i < n; i++) {
            Tally t = new Tally();
            tallies.add(t);
            final int idx = i;
            Thread th = new Thread(() -> {
                try {
                    body.run(idx, t);
                } catch (Exception e) {
                    synchronized (errors) {
                        errors.add(e);
                    }
                }
            });
            threads.add(th);
            th.start();
        }
        for (Thread th : threads) {
            th.join();
        }
        if (!errors.isEmpty()) {
            System.out.println("{\"error\":\"" + errors.get(0).toString().replace("\"", "'").replace("\n", " ") + "\"}");
            System.out.flush();
            Runtime.getRuntime().halt(1);
        }
        return tallies;
    }

    /** Waits until the warm-up begins; returns the window's start in System.nanoTime() terms. */
    static long awaitWarmup(long startAt) throws InterruptedException {
        waitUntil(startAt - WARMUP_MS);
        return System.nanoTime() + (startAt - System.currentTimeMillis()) * 1_000_000L;
    }

    static void waitUntil(long epochMs) throws InterruptedException {
        long d = epochMs - System.currentTimeMillis();
        if (d > 0) {
            Thread.sleep(d);
        }
    }

    static final AtomicLong UNIQUE = new AtomicLong();

    static Body rocketmqProducer(String namesrv, String topic, String mode, int first, long startAt,
                                 double duration) {
        return (thread, t) -> {
            int idx = first + thread;
            DefaultMQProducer p = new DefaultMQProducer("bench_pg");
            p.setNamesrvAddr(namesrv);
            p.setInstanceName("bench_" + ProcessHandle.current().pid() + "_" + idx); // its own connection
            p.setSendMsgTimeout(30_000);
            p.setCompressMsgBodyOverHowmuch(Integer.MAX_VALUE);
            p.setMaxMessageSize(8 << 20);
            p.start();
            try {
                List<MessageQueue> mqs = new ArrayList<>(p.fetchPublishMessageQueues(topic));
                mqs.sort(null);
                long startNs = awaitWarmup(startAt);
                long stopAt = startNs + (long) (duration * 1e9);
                long sent = 0;
                long turn = 0;
                while (System.nanoTime() < stopAt) {
                    MessageQueue mq = mqs.get((int) ((idx + turn) % mqs.size()));
                    long t0 = System.nanoTime();
                    boolean counted = t0 >= startNs;
                    SendResult r;
                    int n;
                    try {
                        if (mode.equals("single")) {
                            Message m = new Message(topic, "bench", BODY);
                            r = p.send(m, mq);
                            n = 1;
                        } else {
                            List<Message> batch = new ArrayList<>(BATCH);
                            for (int k = 0; k < BATCH; k++) {
                                batch.add(new Message(topic, "bench", BODY));
                            }
                            r = p.send(batch, mq);
                            n = BATCH;
                        }
                    } catch (MQBrokerException e) {
                        if (e.getResponseCode() == 2 || e.getResponseCode() == 14) { // busy: flow control
                            if (counted) {
                                t.busy++;
                            }
                            Thread.sleep(1);
                            continue;
                        }
                        throw e;
                    }
                    if (r.getSendStatus() != SendStatus.SEND_OK) {
                        throw new IllegalStateException("send status " + r.getSendStatus());
                    }
                    turn += n;
                    if (counted) {
                        t.latency(System.nanoTime() - t0);
                        sent += n;
                    }
                }
                t.count = sent;
            } finally {
                p.shutdown();
            }
        };
    }

    static Body rocketmqPuller(String namesrv, String topic, int[] queues) {
        DefaultMQPullConsumer c = new DefaultMQPullConsumer("bench_cg");
        c.setNamesrvAddr(namesrv);
        c.setInstanceName("bench_pull_" + ProcessHandle.current().pid());
        return (thread, t) -> {
            synchronized (c) {
                if (!c.getDefaultMQPullConsumerImpl().getServiceState().name().equals("RUNNING")) {
                    c.start();
                }
            }
            MessageQueue mq = null;
            for (MessageQueue q : c.fetchSubscribeMessageQueues(topic)) {
                if (q.getQueueId() == queues[thread]) {
                    mq = q;
                }
            }
            if (mq == null) {
                throw new IllegalStateException("no queue " + queues[thread] + " of " + topic);
            }
            long max = c.maxOffset(mq);
            ready();
            long off = 0;
            while (off < max) {
                long t0 = System.nanoTime();
                PullResult r = c.pull(mq, "*", off, 32);
                t.latency(System.nanoTime() - t0);
                if (r.getPullStatus() != PullStatus.FOUND) {
                    break;
                }
                t.count += r.getMsgFoundList().size();
                off = r.getNextBeginOffset();
            }
        };
    }

    static Body natsProducer(String addr, String stream, String mode, int first, long startAt, double duration) {
        return (thread, t) -> {
            int idx = first + thread;
            try (Connection nc = Nats.connect("nats://" + addr)) {
                JetStream js = nc.jetStream();
                long startNs = awaitWarmup(startAt);
                long stopAt = startNs + (long) (duration * 1e9);
                long sent = 0;
                long turn = 0;
                while (System.nanoTime() < stopAt) {
                    String subject = stream + ".q" + ((idx + turn) % QUEUES);
                    long t0 = System.nanoTime();
                    boolean counted = t0 >= startNs;
                    int n;
                    if (mode.equals("single")) {
                        js.publish(subject, BODY);
                        n = 1;
                    } else {
                        List<CompletableFuture<PublishAck>> acks = new ArrayList<>(BATCH);
                        for (int k = 0; k < BATCH; k++) {
                            acks.add(js.publishAsync(subject, BODY));
                        }
                        for (CompletableFuture<PublishAck> a : acks) {
                            a.get();
                        }
                        n = BATCH;
                    }
                    turn += n;
                    if (counted) {
                        t.latency(System.nanoTime() - t0);
                        sent += n;
                    }
                }
                t.count = sent;
            }
        };
    }

    static Body natsPuller(String addr, String stream, int[] queues) {
        return (thread, t) -> {
            int q = queues[thread];
            try (Connection nc = Nats.connect("nats://" + addr)) {
                JetStream js = nc.jetStream();
                ConsumerConfiguration cc = ConsumerConfiguration.builder().durable("jpull" + q)
                    .ackPolicy(AckPolicy.None).deliverPolicy(DeliverPolicy.All)
                    .filterSubject(stream + ".q" + q).build();
                JetStreamSubscription sub = js.subscribe(stream + ".q" + q,
                    PullSubscribeOptions.builder().configuration(cc).build());
                ready();
                while (true) {
                    long t0 = System.nanoTime();
                    List<io.nats.client.Message> got = sub.fetch(32, Duration.ofMillis(100));
                    t.latency(System.nanoTime() - t0);
                    if (got.isEmpty()) {
                        break;
                    }
                    t.count += got.size();
                }
            }
        };
    }
}
