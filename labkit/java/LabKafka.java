// Starts one Kafka node for labkit: formats its storage first, in the same JVM, when asked to.
//
//   java -cp labkit-launcher.jar:<Kafka's jars> LabKafka [--format ARGS_FILE] server.properties
//   java -cp ... LabKafka --check        (prints "ok": labkit's class-data archive check runs this)
//
// ARGS_FILE holds, one per line, what `kafka-storage format` takes (--ignore-formatted
// -t CLUSTER_ID -c server.properties [--add-scram ...]: in a file, not on the command line,
// so a SCRAM credential does not stay visible in `ps` for the broker's lifetime). The
// formatter is Kafka's own kafka.tools.StorageTool, the class behind kafka-storage.sh: one
// JVM per node now does what two did before (a `kafka-storage format` JVM, then a `kafka` JVM).
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;

public final class LabKafka {
    static final String FAILED = "labkit: formatting the storage failed";

    public static void main(String[] args) throws Exception {
        if (args.length == 1 && args[0].equals("--check")) {
            System.out.println("ok");
            return;
        }
        if (args.length > 2 && args[0].equals("--format")) {
            int rc;
            try {
                List<String> format = new ArrayList<>();
                format.add("format");
                for (String line : Files.readAllLines(Paths.get(args[1]), StandardCharsets.UTF_8)) {
                    if (!line.isEmpty()) {
                        format.add(line);
                    }
                }
                rc = kafka.tools.StorageTool.execute(format.toArray(new String[0]), System.out);
            } catch (Throwable e) {
                System.out.println(FAILED + ": " + e);
                rc = 1;
            }
            if (rc != 0) {
                System.out.println(FAILED + " (exit code " + rc + ")");
                System.out.flush();
                System.exit(rc);
            }
            args = Arrays.copyOfRange(args, 2, args.length);
        }
        kafka.Kafka.main(args);
    }
}
