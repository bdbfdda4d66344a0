// Runs a learner's Kafka Streams topology through Kafka's own TopologyTestDriver (kafka-streams-test-utils) for
// labkit/testing/topology.py: no broker, no threads, no network -- records go in, the topology processes each
// one at once, and what it wrote to each sink topic comes out.
//
//   java -cp <streams launcher>:<topology>:<Kafka's jars>:<kafka-streams, test-utils> LabTopologyTest CLASS SPEC OUT
//
// CLASS has `public static void build(StreamsBuilder builder)` (labkit/services/streamsbuild.py compiles it, as for
// a real application). SPEC is JSON: {"config": {...}, "inputs": [{"topic", "key", "value", "timestamp"}],
// "outputs": [topic, ...]}; keys and values are strings (String serdes, as the lab's Streams applications use),
// a null value is a tombstone. OUT gets {"outputs": {topic: [{"key", "value", "timestamp"}]}, "nanos": N}:
// the records in the order the topology wrote them, and the driver's time for piping and reading them.
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.io.File;
import java.time.Instant;
import java.util.HashMap;
import java.util.Iterator;
import java.util.Map;
import java.util.Properties;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.TestInputTopic;
import org.apache.kafka.streams.TestOutputTopic;
import org.apache.kafka.streams.TopologyTestDriver;
import org.apache.kafka.streams.test.TestRecord;

public final class LabTopologyTest {
    public static void main(String[] args) throws Exception {
        ObjectMapper mapper = new ObjectMapper();
        JsonNode spec = mapper.readTree(new File(args[1]));
        Properties props = new Properties();
        props.put(StreamsConfig.APPLICATION_ID_CONFIG, "topology-test");
        props.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, "no-broker:9092");  // the driver never connects
        props.put(StreamsConfig.DEFAULT_KEY_SERDE_CLASS_CONFIG, Serdes.StringSerde.class.getName());
        props.put(StreamsConfig.DEFAULT_VALUE_SERDE_CLASS_CONFIG, Serdes.StringSerde.class.getName());
        for (Iterator<Map.Entry<String, JsonNode>> it = spec.path("config").fields(); it.hasNext(); ) {
            Map.Entry<String, JsonNode> entry = it.next();
            props.put(entry.getKey(), entry.getValue().asText());
        }
        StreamsBuilder builder = new StreamsBuilder();
        Class.forName(args[0]).getMethod("build", StreamsBuilder.class).invoke(null, builder);
        ObjectNode out = mapper.createObjectNode();
        long started = System.nanoTime();
        try (TopologyTestDriver driver = new TopologyTestDriver(builder.build(props), props)) {
            Map<String, TestInputTopic<String, String>> inputs = new HashMap<>();
            for (JsonNode record : spec.path("inputs")) {
                String topic = record.get("topic").asText();
                TestInputTopic<String, String> input = inputs.computeIfAbsent(topic,
                        t -> driver.createInputTopic(t, new StringSerializer(), new StringSerializer()));
                input.pipeInput(new TestRecord<>(text(record.get("key")), text(record.get("value")),
                        Instant.ofEpochMilli(record.path("timestamp").asLong(0))));
            }
            ObjectNode outputs = out.putObject("outputs");
            for (JsonNode name : spec.path("outputs")) {
                TestOutputTopic<String, String> output = driver.createOutputTopic(name.asText(),
                        new StringDeserializer(), new StringDeserializer());
                ArrayNode records = outputs.putArray(name.asText());
                for (TestRecord<String, String> record : output.readRecordsToList()) {
                    ObjectNode row = records.addObject();
                    row.put("key", record.key());
                    row.put("value", record.value());
                    row.put("timestamp", record.timestamp());
                }
            }
        }
        out.put("nanos", System.nanoTime() - started);
        mapper.writeValue(new File(args[2]), out);
    }

    private static String text(JsonNode node) {
        return node == null || node.isNull() ? null : node.asText();
    }
}
