package rmqtool.interop;

import org.apache.rocketmq.store.ha.DefaultHAService;

/**
 * An HA service that never listens: the stock one binds its replication port on every interface,
 * and these tests run a single master on loopback only. Loaded by RocketMQ's ServiceProvider through
 * META-INF/service/org.apache.rocketmq.store.ha.HAService.
 */
public class LoopbackHAService extends DefaultHAService {
    @Override
    public void start() {
        // single master, no slaves: nothing to accept or transfer
    }

    @Override
    public void shutdown() {
        // nothing was started
    }
}
