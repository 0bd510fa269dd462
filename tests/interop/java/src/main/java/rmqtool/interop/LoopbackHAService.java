package rmqtool.interop;

import java.lang.reflect.Field;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import org.apache.rocketmq.store.config.BrokerRole;
import org.apache.rocketmq.store.config.MessageStoreConfig;
import org.apache.rocketmq.store.ha.DefaultHAService;

/**
 * Apache's classic HA service, bound to loopback only. The stock one binds its replication port on
 * every interface, and these tests must listen on loopback alone. Loaded by RocketMQ's
 * ServiceProvider through META-INF/service/org.apache.rocketmq.store.ha.HAService.
 *
 * <p>A broker started without an explicit {@code haListenPort} (a single master, the other interop
 * tests) starts nothing, as before: many of them run at once and the default port 10912 would
 * clash. With {@code haListenPort=P} (or as a SLAVE) it is DefaultHAService unchanged (accept
 * loop, connections, GroupTransferService, DefaultHAClient) except for the listen address, which
 * AcceptSocketService keeps in a private final field set from the port alone.
 */
public class LoopbackHAService extends DefaultHAService {
    private static final int DEFAULT_HA_LISTEN_PORT = new MessageStoreConfig().getHaListenPort();
    private boolean started;

    @Override
    public void start() throws Exception {
        MessageStoreConfig config = getDefaultMessageStore().getMessageStoreConfig();
        if (config.getHaListenPort() == DEFAULT_HA_LISTEN_PORT && config.getBrokerRole() != BrokerRole.SLAVE) {
            return;
        }
        Field listen = findField(this.acceptSocketService.getClass(), "socketAddressListen");
        listen.setAccessible(true);
        listen.set(this.acceptSocketService,
            new InetSocketAddress(InetAddress.getByName("127.0.0.1"), config.getHaListenPort()));
        super.start();
        started = true;
        // 5.3.3 hands haMasterAddress to the HA service in BrokerController.initialize, before
        // DefaultMessageStore.start creates the HAClient (haService.init), so the address is lost and
        // the slave only ever learns its master from a name server's haServerAddr. Give it again here.
        String master = config.getHaMasterAddress();
        if (config.getBrokerRole() == BrokerRole.SLAVE && master != null && !master.isEmpty()) {
            updateHaMasterAddress(master);
        }
    }

    @Override
    public void shutdown() {
        if (started) {
            super.shutdown();
        }
    }

    private static Field findField(Class<?> type, String name) throws NoSuchFieldException {
        for (Class<?> c = type; c != null; c = c.getSuperclass()) {
            try {
                return c.getDeclaredField(name);
            } catch (NoSuchFieldException e) {
                // keep looking in the superclass
            }
        }
        throw new NoSuchFieldException(name);
    }
}
