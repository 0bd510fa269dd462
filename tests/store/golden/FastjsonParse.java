// Checks what fastjson 1.2.83 (RocketMQ 5.x) accepts when loading consumerOffset.json-shaped text.
// Result (run with the same class path as FastjsonGolden.java): unquoted integer keys, quoted
// ("0":5) keys and free whitespace all load, and the keys come back as Integer. So rmqtool may read
// either spelling; it writes the unquoted one, as the broker does.
import com.alibaba.fastjson.JSON;
import java.util.concurrent.*;
public class FastjsonParse {
    public static class Offsets {
        ConcurrentMap<String, ConcurrentMap<Integer, Long>> offsetTable = new ConcurrentHashMap<>();
        public ConcurrentMap<String, ConcurrentMap<Integer, Long>> getOffsetTable() { return offsetTable; }
        public void setOffsetTable(ConcurrentMap<String, ConcurrentMap<Integer, Long>> t) { offsetTable = t; }
    }
    public static void main(String[] a) {
        for (String s : new String[]{"{\"offsetTable\":{\"T@g\":{0:5,1:6}}}", "{\"offsetTable\":{\"T@g\":{\"0\":5,\"1\":6}}}",
                                     "{\n  \"offsetTable\" : {\n    \"T@g\" : { 0 : 5 ,\n 1: 6 }\n  }\n}"}) {
            Offsets o = JSON.parseObject(s, Offsets.class);
            Object k = o.offsetTable.get("T@g").keySet().iterator().next();
            System.out.println(o.offsetTable + " keyClass=" + k.getClass().getSimpleName() + " get(0)=" + o.offsetTable.get("T@g").get(0));
        }
    }
}
