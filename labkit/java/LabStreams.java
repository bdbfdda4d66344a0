// Runs one instance of a learner's Kafka Streams application for labkit (labkit/services/streams.py).
//
//   java -cp <launcher>:<Kafka's jars>:<kafka-streams, rocksdbjni> LabStreams streams.properties CLASS DIR [JAR]
//
// CLASS has `public static void build(StreamsBuilder builder)`: labkit generates it around the learner's
// cell (labkit/services/streamsbuild.py). It is loaded from JAR, in a class loader of its own, so that the
// application class path is the same for every topology: the class-data archive recorded for it then maps. The launcher builds the topology, writes its description into DIR
// (topology.txt as Kafka prints it, topology.json as data), starts KafkaStreams and serves on a loopback port,
// written to DIR/port (bound to port 0: no race for a free port), what the notebook reads:
//   GET /state          {"state", "threads": [{"name", "state", "active": [...], "standby": [...]}], "error"}
//   GET /metrics        every metric whose group starts with ?prefix= (default "stream"), as JSON rows
//   GET /restores       every restoration of a store (StateRestoreListener): store, partition, records, ms
//   GET /standby        what each standby task loaded (StandbyUpdateListener): store, partition, records
//   GET /store?name=    the contents of a key-value or window store this instance hosts (interactive query)
// Lines starting with "LABKIT " in the output are for labkit: state changes, restorations, the error that
// stopped the instance. SIGTERM closes the instance and leaves its group (CloseOptions LEAVE_GROUP, KIP-1153),
// so the others take its tasks at once instead of after the session timeout; SIGKILL is a crash.
import com.sun.net.httpserver.HttpExchange;
import com.sun.net.httpserver.HttpServer;
import java.io.FileInputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.lang.reflect.InvocationTargetException;
import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.nio.file.StandardCopyOption;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CountDownLatch;
import java.util.function.Supplier;
import org.apache.kafka.common.Metric;
import org.apache.kafka.common.MetricName;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.streams.CloseOptions;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.KeyValue;
import org.apache.kafka.streams.StoreQueryParameters;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.TaskMetadata;
import org.apache.kafka.streams.ThreadMetadata;
import org.apache.kafka.streams.Topology;
import org.apache.kafka.streams.errors.InvalidStateStoreException;
import org.apache.kafka.streams.errors.StreamsUncaughtExceptionHandler;
import org.apache.kafka.streams.kstream.Windowed;
import org.apache.kafka.streams.processor.StandbyUpdateListener;
import org.apache.kafka.streams.processor.StateRestoreListener;
import org.apache.kafka.streams.processor.TaskId;
import org.apache.kafka.streams.state.KeyValueIterator;
import org.apache.kafka.streams.state.QueryableStoreTypes;
import org.apache.kafka.streams.state.RocksDBConfigSetter;
import org.rocksdb.BlockBasedTableConfig;
import org.rocksdb.LRUCache;
import org.rocksdb.Options;

public final class LabStreams {
    static final String MARK = "LABKIT ";
    static volatile String error = null;
    static final List<String> restores = new ArrayList<>();
    static final Map<String, long[]> standby = new ConcurrentHashMap<>();

    public static void main(String[] args) throws Exception {
        Properties props = new Properties();
        try (InputStream in = new FileInputStream(args[0])) {
            props.load(in);
        }
        Path dir = Paths.get(args[2]);
        StreamsBuilder builder = new StreamsBuilder();
        Topology topology;
        try {
            ClassLoader loader = LabStreams.class.getClassLoader();
            if (args.length > 3) {
                loader = new java.net.URLClassLoader(new java.net.URL[]{Paths.get(args[3]).toUri().toURL()}, loader);
                Thread.currentThread().setContextClassLoader(loader);  // Kafka makes configured classes with it
            }
            Class.forName(args[1], true, loader).getMethod("build", StreamsBuilder.class).invoke(null, builder);
            topology = builder.build(props);
        } catch (InvocationTargetException e) {
            fail(e.getCause());
            return;
        } catch (RuntimeException e) {
            fail(e);
            return;
        }
        write(dir.resolve("topology.txt"), topology.describe().toString());
        write(dir.resolve("topology.json"), LabStreamsJson.topology(topology.describe()));

        KafkaStreams streams;
        try {
            streams = new KafkaStreams(topology, props);
        } catch (RuntimeException e) {
            fail(e);
            return;
        }
        CountDownLatch done = new CountDownLatch(1);
        streams.setStateListener((now, before) -> {
            say("state " + before + " -> " + now);
            if (now == KafkaStreams.State.NOT_RUNNING || now == KafkaStreams.State.ERROR) {
                done.countDown();
            }
        });
        streams.setUncaughtExceptionHandler(e -> {
            error = describe(e);
            say("error " + error);
            return StreamsUncaughtExceptionHandler.StreamThreadExceptionResponse.SHUTDOWN_CLIENT;
        });
        streams.setGlobalStateRestoreListener(new Restores());
        streams.setStandbyUpdateListener(new Standbys());

        HttpServer server = HttpServer.create(new InetSocketAddress("127.0.0.1", 0), 0);
        serve(server, "/state", ex -> state(streams));
        serve(server, "/metrics", ex -> metrics(streams, query(ex, "prefix", "stream")));
        serve(server, "/restores", ex -> {
            synchronized (restores) {
                return "[" + String.join(",", restores) + "]";
            }
        });
        serve(server, "/standby", ex -> standbys());
        serve(server, "/store", ex -> store(streams, query(ex, "name", "")));
        server.start();
        write(dir.resolve("port"), Integer.toString(server.getAddress().getPort()));

        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            streams.close(CloseOptions.groupMembershipOperation(CloseOptions.GroupMembershipOperation.LEAVE_GROUP)
                    .withTimeout(Duration.ofSeconds(20)));
            say("closed");
        }, "labkit-close"));
        try {
            streams.start();
        } catch (RuntimeException e) {
            fail(e);
            return;
        }
        done.await();
        if (streams.state() == KafkaStreams.State.ERROR || error != null) {
            System.out.flush();
            Runtime.getRuntime().halt(3);  // not exit(): the shutdown hook would wait on a client that is gone
        }
    }

    /** The topology could not be built or the client not started: say why on one line, exit 2. */
    static void fail(Throwable e) {
        error = describe(e);
        say("error " + error);
        System.exit(2);
    }

    /** The exception and its causes on one line (the learner reads the first; a stack trace is in the log). */
    static String describe(Throwable e) {
        StringBuilder out = new StringBuilder(e.getClass().getName() + ": " + e.getMessage());
        for (Throwable c = e.getCause(); c != null && c != c.getCause(); c = c.getCause()) {
            out.append(" | caused by ").append(c.getClass().getName()).append(": ").append(c.getMessage());
        }
        return out.toString().replace('\n', ' ');
    }

    static void say(String line) {
        System.out.println(MARK + line);
        System.out.flush();
    }

    static void write(Path path, String text) throws IOException {
        Path tmp = path.resolveSibling(path.getFileName() + ".tmp");
        Files.write(tmp, text.getBytes(StandardCharsets.UTF_8));
        Files.move(tmp, path, StandardCopyOption.REPLACE_EXISTING, StandardCopyOption.ATOMIC_MOVE);
    }

    interface Page {
        String render(HttpExchange ex) throws Exception;
    }

    static void serve(HttpServer server, String path, Page page) {
        server.createContext(path, ex -> {
            int status = 200;
            String body;
            try {
                body = page.render(ex);
            } catch (Exception e) {
                status = 500;
                body = "{\"error\":" + LabStreamsJson.str(describe(e)) + "}";
            }
            byte[] bytes = body.getBytes(StandardCharsets.UTF_8);
            ex.getResponseHeaders().set("Content-Type", "application/json");
            ex.sendResponseHeaders(status, bytes.length);
            try (OutputStream out = ex.getResponseBody()) {
                out.write(bytes);
            }
        });
    }

    static String query(HttpExchange ex, String name, String fallback) {
        String q = ex.getRequestURI().getQuery();
        if (q != null) {
            for (String part : q.split("&")) {
                if (part.startsWith(name + "=")) {
                    return part.substring(name.length() + 1);
                }
            }
        }
        return fallback;
    }

    static String state(KafkaStreams streams) {
        StringBuilder out = new StringBuilder("{\"state\":" + LabStreamsJson.str(streams.state().name()) + ",\"threads\":[");
        String sep = "";
        for (ThreadMetadata t : streams.metadataForLocalThreads()) {
            out.append(sep).append("{\"name\":").append(LabStreamsJson.str(t.threadName()))
               .append(",\"state\":").append(LabStreamsJson.str(t.threadState()))
               .append(",\"active\":").append(tasks(t.activeTasks()))
               .append(",\"standby\":").append(tasks(t.standbyTasks())).append("}");
            sep = ",";
        }
        return out.append("],\"error\":").append(error == null ? "null" : LabStreamsJson.str(error)).append("}").toString();
    }

    static String tasks(java.util.Set<TaskMetadata> tasks) {
        List<String> ids = new ArrayList<>();
        for (TaskMetadata t : tasks) {
            ids.add(t.taskId().toString());
        }
        ids.sort(null);
        return LabStreamsJson.list(ids);
    }

    static String metrics(KafkaStreams streams, String prefix) {
        List<String> rows = new ArrayList<>();
        for (Map.Entry<MetricName, ? extends Metric> e : streams.metrics().entrySet()) {
            MetricName n = e.getKey();
            if (!n.group().startsWith(prefix)) {
                continue;
            }
            Object value;
            try {
                value = e.getValue().metricValue();
            } catch (RuntimeException ignored) {
                continue;
            }
            StringBuilder tags = new StringBuilder("{");
            String sep = "";
            for (Map.Entry<String, String> t : n.tags().entrySet()) {
                tags.append(sep).append(LabStreamsJson.str(t.getKey())).append(":").append(LabStreamsJson.str(t.getValue()));
                sep = ",";
            }
            rows.add("{\"group\":" + LabStreamsJson.str(n.group()) + ",\"name\":" + LabStreamsJson.str(n.name())
                     + ",\"tags\":" + tags + "},\"value\":" + LabStreamsJson.value(value) + "}");
        }
        return "[" + String.join(",", rows) + "]";
    }

    /** Every entry of a store this instance hosts as an active task: key-value stores first, then window stores. */
    static String store(KafkaStreams streams, String name) {
        List<String> rows = new ArrayList<>();
        try {
            try (KeyValueIterator<Object, Object> it = streams.store(
                    StoreQueryParameters.fromNameAndType(name, QueryableStoreTypes.keyValueStore())).all()) {
                while (it.hasNext()) {
                    KeyValue<Object, Object> kv = it.next();
                    rows.add("{\"key\":" + LabStreamsJson.value(kv.key) + ",\"value\":" + LabStreamsJson.value(kv.value) + "}");
                }
            }
        } catch (InvalidStateStoreException notKeyValue) {
            try (KeyValueIterator<Windowed<Object>, Object> it = streams.store(
                    StoreQueryParameters.fromNameAndType(name, QueryableStoreTypes.windowStore())).all()) {
                while (it.hasNext()) {
                    KeyValue<Windowed<Object>, Object> kv = it.next();
                    rows.add("{\"key\":" + LabStreamsJson.value(kv.key.key()) + ",\"window_start\":" + kv.key.window().start()
                             + ",\"window_end\":" + kv.key.window().end() + ",\"value\":" + LabStreamsJson.value(kv.value) + "}");
                }
            }
        }
        return "[" + String.join(",", rows) + "]";
    }

    static String standbys() {
        List<String> rows = new ArrayList<>();
        for (Map.Entry<String, long[]> e : standby.entrySet()) {
            String[] parts = e.getKey().split("\u0000");
            rows.add("{\"store\":" + LabStreamsJson.str(parts[0]) + ",\"topic\":" + LabStreamsJson.str(parts[1])
                     + ",\"partition\":" + parts[2] + ",\"records\":" + e.getValue()[0] + ",\"offset\":" + e.getValue()[1] + "}");
        }
        return "[" + String.join(",", rows) + "]";
    }

    static final class Restores implements StateRestoreListener {
        final Map<TopicPartition, Long> started = new ConcurrentHashMap<>();

        @Override
        public void onRestoreStart(TopicPartition tp, String store, long start, long end) {
            started.put(tp, System.nanoTime());
            say("restore-start " + store + " " + tp + " from " + start + " to " + end);
        }

        @Override
        public void onBatchRestored(TopicPartition tp, String store, long batchEnd, long records) {
        }

        @Override
        public void onRestoreEnd(TopicPartition tp, String store, long total) {
            Long t0 = started.remove(tp);
            double ms = t0 == null ? -1 : (System.nanoTime() - t0) / 1e6;
            say("restore-end " + store + " " + tp + " " + total + " records in " + ms + " ms");
            synchronized (restores) {
                restores.add("{\"store\":" + LabStreamsJson.str(store) + ",\"topic\":" + LabStreamsJson.str(tp.topic())
                             + ",\"partition\":" + tp.partition() + ",\"records\":" + total + ",\"ms\":" + ms + "}");
            }
        }
    }

    static final class Standbys implements StandbyUpdateListener {
        static String key(TopicPartition tp, String store) {
            return store + "\u0000" + tp.topic() + "\u0000" + tp.partition();
        }

        @Override
        public void onUpdateStart(TopicPartition tp, String store, long startOffset) {
            standby.putIfAbsent(key(tp, store), new long[]{0, startOffset});
        }

        @Override
        public void onBatchLoaded(TopicPartition tp, String store, TaskId task, long batchEnd, long size, long end) {
            long[] seen = standby.computeIfAbsent(key(tp, store), k -> new long[]{0, 0});
            seen[0] += size;
            seen[1] = batchEnd;
        }

        @Override
        public void onUpdateSuspended(TopicPartition tp, String store, long storeOffset, long end, SuspendReason why) {
            say("standby-suspended " + store + " " + tp + " at " + storeOffset + " (" + why + ")");
        }
    }

    /**
     * RocksDB sized for a laptop running several instances: one 8 MB block cache shared by every store of
     * this JVM and 2 write buffers of 2 MB per store, instead of RocksDB's 50 MB cache and 16 MB x 3 buffers
     * per store (Kafka Streams' memory management guide: "rocksdb.config.setter").
     */
    public static final class SmallRocksDB implements RocksDBConfigSetter {
        static final Supplier<LRUCache> CACHE = new Supplier<>() {
            private LRUCache cache;

            @Override
            public synchronized LRUCache get() {
                if (cache == null) {
                    cache = new LRUCache(8L << 20);
                }
                return cache;
            }
        };

        @Override
        public void setConfig(String storeName, Options options, Map<String, Object> configs) {
            BlockBasedTableConfig table = (BlockBasedTableConfig) options.tableFormatConfig();
            table.setBlockCache(CACHE.get());
            options.setTableFormatConfig(table);
            options.setWriteBufferSize(2L << 20);
            options.setMaxWriteBufferNumber(2);
        }

        @Override
        public void close(String storeName, Options options) {
        }
    }
}
