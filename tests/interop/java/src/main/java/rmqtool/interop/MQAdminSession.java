package rmqtool.interop;

import java.io.BufferedReader;
import java.io.ByteArrayOutputStream;
import java.io.FileDescriptor;
import java.io.FileOutputStream;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.util.Arrays;
import org.apache.rocketmq.tools.command.MQAdminStartup;

/**
 * Apache's mqadmin ({@link MQAdminStartup}, exactly what bin/mqadmin runs) for many commands in one JVM.
 *
 * <p>Each stdin line is one mqadmin command line, its arguments separated by tabs; for each, one JSON
 * object {"args", "out", "err", "ms"} goes to stdout with what the command printed on System.out and
 * System.err. EOF ends the session. One JVM per session instead of one per command: a JVM start with
 * this classpath costs more than most commands, and the caller can interleave its own work (produce,
 * consume) between commands of one session.
 */
public final class MQAdminSession {
    public static void main(String[] args) throws IOException {
        PrintStream out = new PrintStream(new FileOutputStream(FileDescriptor.out), true, StandardCharsets.UTF_8);
        PrintStream realErr = System.err;
        // Logback prints its status lines on System.out when it first starts: let that happen now,
        // onto stderr, so that no command's output carries them.
        System.setOut(realErr);
        org.apache.rocketmq.logging.org.slf4j.LoggerFactory.getLogger(MQAdminSession.class);
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        for (String line = in.readLine(); line != null; line = in.readLine()) {
            if (line.isEmpty()) {
                continue;
            }
            String[] cmd = line.split("\t");
            ByteArrayOutputStream o = new ByteArrayOutputStream();
            ByteArrayOutputStream e = new ByteArrayOutputStream();
            long t0 = System.nanoTime();
            System.setOut(new PrintStream(o, true, StandardCharsets.UTF_8));
            System.setErr(new PrintStream(e, true, StandardCharsets.UTF_8));
            try {
                MQAdminStartup.main0(cmd, null); // main() is main0(args, null); neither exits
            } catch (Throwable t) {
                t.printStackTrace();
            } finally {
                System.out.flush();
                System.err.flush();
                System.setOut(realErr);
                System.setErr(realErr);
            }
            out.println(new Json().put("args", Arrays.asList(cmd))
                .put("out", o.toString(StandardCharsets.UTF_8))
                .put("err", e.toString(StandardCharsets.UTF_8))
                .put("ms", (System.nanoTime() - t0) / 1_000_000));
        }
    }
}
