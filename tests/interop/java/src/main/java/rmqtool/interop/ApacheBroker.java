package rmqtool.interop;

import java.io.BufferedReader;
import java.io.File;
import java.io.FileDescriptor;
import java.io.FileOutputStream;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.nio.charset.StandardCharsets;
import java.util.Properties;
import java.util.concurrent.atomic.AtomicBoolean;
import org.apache.rocketmq.broker.BrokerController;
import org.apache.rocketmq.common.BrokerConfig;
import org.apache.rocketmq.common.MQVersion;
import org.apache.rocketmq.common.MixAll;
import org.apache.rocketmq.common.namesrv.NamesrvConfig;
import org.apache.rocketmq.namesrv.NamesrvController;
import org.apache.rocketmq.remoting.netty.NettyClientConfig;
import org.apache.rocketmq.remoting.netty.NettyServerConfig;
import org.apache.rocketmq.remoting.protocol.RemotingCommand;
import org.apache.rocketmq.store.config.FlushDiskType;
import org.apache.rocketmq.store.config.MessageStoreConfig;

/**
 * Apache RocketMQ's own name server and broker (5.3.3), in one small JVM, on loopback.
 *
 * <p>Usage: {@code ApacheBroker --store DIR [--namesrv-port P] [--broker-port Q] [key=value ...]}
 * where each key=value is a broker.conf property (BrokerConfig, MessageStoreConfig, NettyServerConfig
 * names), e.g. {@code mappedFileSizeCommitLog=67108864}. Ports default to free ephemeral ones (the
 * broker also needs Q-2 free: its "fast" remoting port). Prints one line on stdout when ready:
 * {@code READY namesrv=127.0.0.1:P broker=127.0.0.1:Q store=DIR}. With {@code namesrvAddr=H:P} it starts
 * no name server and registers the broker with that one instead. It shuts down cleanly (flush,
 * checkpoint, abort file removed) when stdin closes, a "stop" line arrives, or on SIGTERM, then
 * prints {@code STOPPED}.
 */
public final class ApacheBroker {
    private static final String HOST = "127.0.0.1";

    public static void main(String[] args) {
        try {
            run(args);
        } catch (Throwable t) {
            // a start that failed (a port taken meanwhile, say) must end the JVM: the broker's and
            // name server's threads it already started would otherwise keep it alive, never READY
            t.printStackTrace();
            System.exit(1);
        }
    }

    static void run(String[] args) throws Exception {
        PrintStream out = new PrintStream(new FileOutputStream(FileDescriptor.out), true, StandardCharsets.UTF_8);
        System.setOut(System.err); // RocketMQ's logging chatter must not reach our protocol line
        // What NamesrvStartup/BrokerStartup do first: without it requests carry version 0 and the name
        // server reads the broker's registration as a pre-3.0.11 body (no topics, so no routes).
        System.setProperty(RemotingCommand.REMOTING_VERSION_KEY, Integer.toString(MQVersion.CURRENT_VERSION));
        String store = null;
        int nsPort = 0;
        int brokerPort = 0;
        Properties conf = new Properties();
        for (int i = 0; i < args.length; i++) {
            switch (args[i]) {
                case "--store": store = args[++i]; break;
                case "--namesrv-port": nsPort = Integer.parseInt(args[++i]); break;
                case "--broker-port": brokerPort = Integer.parseInt(args[++i]); break;
                default:
                    int eq = args[i].indexOf('=');
                    if (eq <= 0) {
                        System.err.println("unknown argument " + args[i]);
                        System.exit(2);
                    }
                    conf.setProperty(args[i].substring(0, eq), args[i].substring(eq + 1));
            }
        }
        if (store == null) {
            System.err.println("usage: ApacheBroker --store DIR [--namesrv-port P] [--broker-port Q] [key=value ...]");
            System.exit(2);
        }
        File root = new File(store).getAbsoluteFile();
        root.mkdirs();
        File home = new File(root.getParentFile(), root.getName() + ".home");
        home.mkdirs();
        if (nsPort == 0) {
            nsPort = freePort(0);
        }
        if (brokerPort == 0) {
            brokerPort = freePort(2);
        }

        // namesrvAddr=HOST:PORT: join that (rmqtool's) name server instead of starting one
        String external = conf.getProperty("namesrvAddr");
        NamesrvController namesrv = external == null ? startNamesrv(home, nsPort) : null;

        BrokerConfig brokerConfig = new BrokerConfig();
        brokerConfig.setRocketmqHome(home.getPath());
        brokerConfig.setNamesrvAddr(HOST + ":" + nsPort);
        brokerConfig.setBrokerIP1(HOST);
        brokerConfig.setBrokerIP2(HOST);
        brokerConfig.setBrokerName("broker-a");
        brokerConfig.setAutoCreateTopicEnable(true);
        brokerConfig.setAutoCreateSubscriptionGroup(true);
        brokerConfig.setEnablePropertyFilter(true);
        brokerConfig.setTransactionCheckInterval(1000); // check-backs within seconds, not a minute
        brokerConfig.setTransactionTimeOut(1000);
        // Tests run many JVMs on 2 cores: don't answer "broker busy" after 200 ms in the send queue.
        brokerConfig.setWaitTimeMillsInSendQueue(10_000);
        brokerConfig.setWaitTimeMillsInPullQueue(10_000);
        brokerConfig.setWaitTimeMillsInLitePullQueue(10_000);
        MessageStoreConfig storeConfig = new MessageStoreConfig();
        storeConfig.setStorePathRootDir(root.getPath());
        storeConfig.setStorePathCommitLog(new File(root, "commitlog").getPath());
        storeConfig.setMappedFileSizeCommitLog(64 * 1024 * 1024);
        storeConfig.setMappedFileSizeConsumeQueue(300_000 * 20);
        storeConfig.setMappedFileSizeTimerLog(8 * 1024 * 1024);
        storeConfig.setFlushDiskType(FlushDiskType.ASYNC_FLUSH);
        NettyServerConfig brokerNetty = new NettyServerConfig();
        brokerNetty.setBindAddress(HOST);
        brokerNetty.setListenPort(brokerPort);
        MixAll.properties2Object(conf, brokerConfig);
        MixAll.properties2Object(conf, storeConfig);
        MixAll.properties2Object(conf, brokerNetty);
        if (conf.containsKey("storePathRootDir") && !conf.containsKey("storePathCommitLog")) {
            storeConfig.setStorePathCommitLog(new File(storeConfig.getStorePathRootDir(), "commitlog").getPath());
        }

        BrokerController broker = new BrokerController(brokerConfig, brokerNetty, new NettyClientConfig(), storeConfig);
        if (!broker.initialize()) {
            if (namesrv != null) {
                namesrv.shutdown();
            }
            throw new IllegalStateException("BrokerController.initialize failed (store " + root + ")");
        }
        broker.start();

        AtomicBoolean stopped = new AtomicBoolean();
        Runnable stop = () -> {
            if (stopped.compareAndSet(false, true)) {
                broker.shutdown();
                if (namesrv != null) {
                    namesrv.shutdown();
                }
                out.println("STOPPED");
            }
        };
        Runtime.getRuntime().addShutdownHook(new Thread(stop, "apache-broker-stop"));
        if (namesrv != null) {
            waitUntilRegistered(broker, namesrv);
        } else {
            broker.registerBrokerAll(true, false, true);
        }
        out.println("READY namesrv=" + (namesrv != null ? HOST + ":" + nsPort : external) + " broker=" + HOST + ":"
            + brokerPort + " store=" + root);

        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        String line;
        while ((line = in.readLine()) != null) {
            if (line.trim().equals("stop")) {
                break;
            }
        }
        stop.run();
        System.exit(0);
    }

    static NamesrvController startNamesrv(File home, int nsPort) throws Exception {
        NamesrvConfig nsConfig = new NamesrvConfig();
        nsConfig.setRocketmqHome(home.getPath());
        nsConfig.setKvConfigPath(new File(home, "kvConfig.json").getPath());
        nsConfig.setConfigStorePath(new File(home, "namesrv.properties").getPath());
        NettyServerConfig nsNetty = new NettyServerConfig();
        nsNetty.setBindAddress(HOST);
        nsNetty.setListenPort(nsPort);
        NamesrvController namesrv = new NamesrvController(nsConfig, nsNetty, new NettyClientConfig());
        if (!namesrv.initialize()) {
            throw new IllegalStateException("NamesrvController.initialize failed");
        }
        namesrv.start();
        return namesrv;
    }

    /**
     * Waits until the name server routes TBW102 (the broker has registered its topics), registering
     * again every 2 s: on a loaded machine the broker's first registration can time out unnoticed,
     * and clients would then find no route for the next 30 s.
     */
    private static void waitUntilRegistered(BrokerController broker, NamesrvController namesrv)
        throws InterruptedException {
        long deadline = System.currentTimeMillis() + 60_000;
        long nextRegister = 0;
        while (System.currentTimeMillis() < deadline) {
            if (namesrv.getRouteInfoManager().pickupTopicRouteData("TBW102") != null) {
                return;
            }
            if (System.currentTimeMillis() >= nextRegister) {
                broker.registerBrokerAll(true, false, true);
                nextRegister = System.currentTimeMillis() + 2000;
            }
            Thread.sleep(50);
        }
        throw new IllegalStateException("the name server never routed TBW102");
    }

    /** A free loopback port p such that p - gap is free too (the broker's fast port is listenPort - 2). */
    static int freePort(int gap) throws IOException {
        for (int attempt = 0; attempt < 50; attempt++) {
            int p;
            try (ServerSocket s = new ServerSocket()) {
                s.bind(new InetSocketAddress(InetAddress.getByName(HOST), 0));
                p = s.getLocalPort();
            }
            if (gap == 0) {
                return p;
            }
            if (p - gap > 1024 && isFree(p - gap) && isFree(p)) {
                return p;
            }
        }
        throw new IOException("no free port pair found");
    }

    private static boolean isFree(int port) {
        try (ServerSocket s = new ServerSocket()) {
            s.setReuseAddress(false);
            s.bind(new InetSocketAddress(InetAddress.getByName(HOST), port));
            return true;
        } catch (IOException e) {
            return false;
        }
    }

    private ApacheBroker() {
    }
}
