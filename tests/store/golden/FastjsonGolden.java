// Writes the golden config texts of tests/store/golden with the real fastjson 1.2.83 (the version
// RocketMQ 5.x uses), from bean classes that mirror RocketMQ's getters. Regenerate with:
//   mvn dependency:get -Dartifact=com.alibaba:fastjson:1.2.83
//   javac -cp fastjson-1.2.83.jar FastjsonGolden.java && java -cp fastjson-1.2.83.jar:. FastjsonGolden
// and split the output at the "=====name" lines into name.json (no trailing newline).
import com.alibaba.fastjson.JSON;
import java.util.*;
import java.util.concurrent.*;
import java.util.concurrent.atomic.AtomicLong;

public class FastjsonGolden {
    public static class DataVersion {
        private long stateVersion = 0L; private long timestamp = 1700000000000L; private AtomicLong counter = new AtomicLong(0);
        public long getStateVersion() { return stateVersion; } public void setStateVersion(long v) { stateVersion = v; }
        public long getTimestamp() { return timestamp; } public void setTimestamp(long v) { timestamp = v; }
        public AtomicLong getCounter() { return counter; } public void setCounter(AtomicLong c) { counter = c; }
    }
    public static class Offsets {
        DataVersion dataVersion = new DataVersion();
        ConcurrentMap<String, ConcurrentMap<Integer, Long>> offsetTable = new ConcurrentHashMap<>(512);
        public DataVersion getDataVersion() { return dataVersion; }
        public ConcurrentMap<String, ConcurrentMap<Integer, Long>> getOffsetTable() { return offsetTable; }
        public Map<String, Set<String>> getGroupTopicMap() {
            Map<String, Set<String>> ret = new HashMap<>(128);
            for (String key : offsetTable.keySet()) { String[] a = key.split("@"); if (a.length == 2) ret.computeIfAbsent(a[1], k -> new HashSet<>(8)).add(a[0]); }
            return ret;
        }
    }
    public static class Delay {
        DataVersion dataVersion = new DataVersion();
        ConcurrentMap<Integer, Long> offsetTable = new ConcurrentHashMap<>(32);
        public DataVersion getDataVersion() { return dataVersion; }
        public ConcurrentMap<Integer, Long> getOffsetTable() { return offsetTable; }
    }
    public enum TopicFilterType { SINGLE_TAG, MULTI_TAG }
    public static class TopicConfig {
        String topicName; int readQueueNums = 16, writeQueueNums = 16, perm = 6, topicSysFlag = 0; boolean order;
        TopicFilterType topicFilterType = TopicFilterType.SINGLE_TAG; Map<String, String> attributes = new HashMap<>();
        TopicConfig(String n, int q) { topicName = n; readQueueNums = q; writeQueueNums = q; }
        public String getTopicName() { return topicName; } public int getReadQueueNums() { return readQueueNums; }
        public int getWriteQueueNums() { return writeQueueNums; } public int getPerm() { return perm; }
        public TopicFilterType getTopicFilterType() { return topicFilterType; } public int getTopicSysFlag() { return topicSysFlag; }
        public boolean isOrder() { return order; } public Map<String, String> getAttributes() { return attributes; }
    }
    public static class Topics {
        ConcurrentMap<String, TopicConfig> topicConfigTable = new ConcurrentHashMap<>(1024);
        DataVersion dataVersion = new DataVersion();
        public ConcurrentMap<String, TopicConfig> getTopicConfigTable() { return topicConfigTable; }
        public DataVersion getDataVersion() { return dataVersion; }
    }
    public enum GroupRetryPolicyType { EXPONENTIAL, CUSTOMIZED }
    public static class GroupRetryPolicy { GroupRetryPolicyType type = GroupRetryPolicyType.CUSTOMIZED; Object exponentialRetryPolicy; Object customizedRetryPolicy;
        public GroupRetryPolicyType getType() { return type; } public Object getExponentialRetryPolicy() { return exponentialRetryPolicy; } public Object getCustomizedRetryPolicy() { return customizedRetryPolicy; } }
    public static class SGC {
        String groupName; boolean consumeEnable = true, consumeFromMinEnable = true, consumeBroadcastEnable = true, consumeMessageOrderly = false;
        int retryQueueNums = 1, retryMaxTimes = 16; GroupRetryPolicy groupRetryPolicy = new GroupRetryPolicy(); long brokerId = 0, whichBrokerWhenConsumeSlowly = 1;
        boolean notifyConsumerIdsChangedEnable = true; int groupSysFlag = 0, consumeTimeoutMinute = 15; Set<Object> subscriptionDataSet; Map<String, String> attributes = new HashMap<>();
        SGC(String g) { groupName = g; }
        public String getGroupName() { return groupName; } public boolean isConsumeEnable() { return consumeEnable; } public boolean isConsumeFromMinEnable() { return consumeFromMinEnable; }
        public boolean isConsumeBroadcastEnable() { return consumeBroadcastEnable; } public boolean isConsumeMessageOrderly() { return consumeMessageOrderly; }
        public int getRetryQueueNums() { return retryQueueNums; } public int getRetryMaxTimes() { return retryMaxTimes; } public GroupRetryPolicy getGroupRetryPolicy() { return groupRetryPolicy; }
        public long getBrokerId() { return brokerId; } public long getWhichBrokerWhenConsumeSlowly() { return whichBrokerWhenConsumeSlowly; } public boolean isNotifyConsumerIdsChangedEnable() { return notifyConsumerIdsChangedEnable; }
        public int getGroupSysFlag() { return groupSysFlag; } public int getConsumeTimeoutMinute() { return consumeTimeoutMinute; } public Set<Object> getSubscriptionDataSet() { return subscriptionDataSet; } public Map<String, String> getAttributes() { return attributes; }
    }
    public static class Subs {
        ConcurrentMap<String, SGC> subscriptionGroupTable = new ConcurrentHashMap<>(1024);
        ConcurrentMap<String, ConcurrentMap<String, Integer>> forbiddenTable = new ConcurrentHashMap<>(4);
        DataVersion dataVersion = new DataVersion();
        public ConcurrentMap<String, SGC> getSubscriptionGroupTable() { return subscriptionGroupTable; }
        public ConcurrentMap<String, ConcurrentMap<String, Integer>> getForbiddenTable() { return forbiddenTable; }
        public DataVersion getDataVersion() { return dataVersion; }
    }
    static void emit(String name, Object o) { System.out.print("=====" + name + "\n" + JSON.toJSONString(o, true) + "\n"); }
    public static void main(String[] a) {
        Offsets o = new Offsets();
        ConcurrentMap<Integer, Long> m = new ConcurrentHashMap<>(); m.put(0, 250L); m.put(1, 251L); m.put(2, 250L); m.put(3, 250L);
        o.offsetTable.put("TopicTest@groupA", m);
        ConcurrentMap<Integer, Long> r = new ConcurrentHashMap<>(); r.put(0, 0L); o.offsetTable.put("%RETRY%groupA@groupA", r);
        emit("consumerOffset", o);
        emit("consumerOffset_empty", new Offsets());
        Offsets o2 = new Offsets(); o2.offsetTable.put("T1@g", new ConcurrentHashMap<>()); emit("consumerOffset_emptyinner", o2);
        Delay d = new Delay(); d.offsetTable.put(1, 3L); d.offsetTable.put(2, 0L); d.offsetTable.put(3, 12L); emit("delayOffset", d);
        Topics t = new Topics(); t.topicConfigTable.put("TopicTest", new TopicConfig("TopicTest", 4));
        TopicConfig tc = new TopicConfig("DelayTopic", 2); tc.attributes.put("+message.type", "DELAY"); tc.perm = 7; tc.order = true;
        t.topicConfigTable.put("DelayTopic", tc);
        t.dataVersion.counter.set(3); emit("topics", t);
        Subs s = new Subs(); s.subscriptionGroupTable.put("groupA", new SGC("groupA")); emit("subscriptionGroup", s);
        emit("escapes", Collections.singletonMap("k", "a\"b\\c/d\u00e9\u0001\t\n"));
    }
}
