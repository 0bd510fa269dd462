package rmqtool.interop;

import java.io.File;
import java.io.FileDescriptor;
import java.io.FileOutputStream;
import java.io.IOException;
import java.io.PrintStream;
import java.net.InetSocketAddress;
import java.nio.ByteBuffer;
import java.nio.MappedByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.StandardOpenOption;
import java.util.Arrays;
import org.apache.rocketmq.common.message.MessageDecoder;
import org.apache.rocketmq.common.message.MessageExt;

/**
 * Reads every CommitLog file of a directory with Apache's own {@link MessageDecoder}, CRC checking on,
 * and prints one JSON object per record (or per problem) on stdout.
 *
 * <p>The walk is the one CommitLog recovery does: records back to back from each file's start, a
 * blank magic ends the file, a zero totalSize ends the log. A record MessageDecoder refuses (it returns
 * null, e.g. on a CRC mismatch) is reported as {"error": ...} and the walk stops, as recovery would.
 */
public final class DecodeCommitLog {
    static final int BLANK_MAGIC_CODE = -875286124; // 0xCBD43194

    public static void main(String[] args) throws IOException {
        if (args.length != 1) {
            System.err.println("usage: DecodeCommitLog COMMITLOG_DIR");
            System.exit(2);
        }
        // RocketMQ's logging prints status lines on System.out: keep stdout for our JSON only.
        PrintStream out = new PrintStream(new FileOutputStream(FileDescriptor.out), false, StandardCharsets.UTF_8);
        System.setOut(System.err);
        File[] files = new File(args[0]).listFiles(f -> f.isFile() && f.getName().matches("\\d{20}"));
        if (files == null) {
            System.err.println("not a directory: " + args[0]);
            System.exit(2);
        }
        Arrays.sort(files);
        int problems = 0;
        outer:
        for (File f : files) {
            long base = Long.parseLong(f.getName());
            try (FileChannel ch = FileChannel.open(f.toPath(), StandardOpenOption.READ)) {
                MappedByteBuffer mb = ch.map(FileChannel.MapMode.READ_ONLY, 0, ch.size());
                int pos = 0;
                while (pos + 8 <= mb.limit()) {
                    int total = mb.getInt(pos);
                    int magic = mb.getInt(pos + 4);
                    if (magic == BLANK_MAGIC_CODE) {
                        out.println(new Json().put("blank", base + pos).put("size", total));
                        break;
                    }
                    if (total == 0 && magic == 0) {
                        break outer;
                    }
                    if (total < 0 || pos + total > mb.limit()) {
                        out.println(new Json().put("error", "bad totalSize " + total).put("offset", base + pos));
                        problems++;
                        break outer;
                    }
                    ByteBuffer one = mb.slice(pos, total);
                    MessageExt m = MessageDecoder.decode(one, true, true, false, false, true);
                    if (m == null) {
                        out.println(new Json().put("error", "MessageDecoder.decode returned null (CRC or layout)")
                            .put("offset", base + pos));
                        problems++;
                        break outer;
                    }
                    if (one.position() != total) {
                        out.println(new Json().put("error", "decoder consumed " + one.position() + " of " + total)
                            .put("offset", base + pos));
                        problems++;
                    }
                    out.println(toJson(m));
                    pos += total;
                }
            }
        }
        out.flush();
        System.exit(problems == 0 ? 0 : 1);
    }

    static String host(java.net.SocketAddress a) {
        InetSocketAddress s = (InetSocketAddress) a;
        return s.getAddress().getHostAddress() + ":" + s.getPort();
    }

    static Json toJson(MessageExt m) {
        return new Json()
            .put("topic", m.getTopic())
            .put("queueId", m.getQueueId())
            .put("queueOffset", m.getQueueOffset())
            .put("commitLogOffset", m.getCommitLogOffset())
            .put("storeSize", m.getStoreSize())
            .put("bodyCRC", m.getBodyCRC())
            .put("flag", m.getFlag())
            .put("sysFlag", m.getSysFlag())
            .put("bornTimestamp", m.getBornTimestamp())
            .put("bornHost", host(m.getBornHost()))
            .put("storeTimestamp", m.getStoreTimestamp())
            .put("storeHost", host(m.getStoreHost()))
            .put("reconsumeTimes", m.getReconsumeTimes())
            .put("preparedTransactionOffset", m.getPreparedTransactionOffset())
            .put("msgId", m.getMsgId())
            .put("tags", m.getTags())
            .put("keys", m.getKeys())
            .put("properties", m.getProperties())
            .put("bodyBase64", m.getBody() == null ? new byte[0] : m.getBody());
    }

    private DecodeCommitLog() {
    }

}
