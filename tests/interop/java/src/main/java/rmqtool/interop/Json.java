package rmqtool.interop;

import java.util.Base64;
import java.util.Map;
import java.util.TreeMap;

/** A minimal JSON writer, so the interop programs depend on nothing but Apache RocketMQ itself. */
final class Json {
    private final StringBuilder sb = new StringBuilder("{");
    private boolean first = true;

    Json put(String key, Object value) {
        if (!first) {
            sb.append(',');
        }
        first = false;
        quote(sb, key);
        sb.append(':');
        value(sb, value);
        return this;
    }

    @Override
    public String toString() {
        return sb + "}";
    }

    @SuppressWarnings("unchecked")
    static void value(StringBuilder sb, Object v) {
        if (v == null) {
            sb.append("null");
        } else if (v instanceof Number || v instanceof Boolean) {
            sb.append(v);
        } else if (v instanceof Json) {
            sb.append(v);
        } else if (v instanceof byte[]) {
            quote(sb, Base64.getEncoder().encodeToString((byte[]) v));
        } else if (v instanceof Map) {
            sb.append('{');
            boolean f = true;
            for (Map.Entry<String, Object> e : new TreeMap<>((Map<String, Object>) v).entrySet()) {
                if (!f) {
                    sb.append(',');
                }
                f = false;
                quote(sb, e.getKey());
                sb.append(':');
                value(sb, e.getValue());
            }
            sb.append('}');
        } else if (v instanceof Iterable) {
            sb.append('[');
            boolean f = true;
            for (Object o : (Iterable<Object>) v) {
                if (!f) {
                    sb.append(',');
                }
                f = false;
                value(sb, o);
            }
            sb.append(']');
        } else {
            quote(sb, v.toString());
        }
    }

    static void quote(StringBuilder sb, String s) {
        sb.append('"');
        for (int i = 0; i < s.length(); i++) {
            char c = s.charAt(i);
            if (c == '"' || c == '\\') {
                sb.append('\\').append(c);
            } else if (c < 0x20 || c == 0x7f) {
                sb.append(String.format("\\u%04x", (int) c));
            } else {
                sb.append(c);
            }
        }
        sb.append('"');
    }
}
