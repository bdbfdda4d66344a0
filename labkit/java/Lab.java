// Helpers a learner's topology may use (labkit puts them on the classpath): JSON values read and written
// without a schema, and event time taken from a JSON field instead of the record's timestamp.
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.time.Instant;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.streams.processor.TimestampExtractor;

public final class Lab {
    private static final ObjectMapper MAPPER = new ObjectMapper();

    private Lab() {
    }

    /** The JSON text {@code value} parsed (a missing or broken value: an empty object). */
    public static JsonNode json(String value) {
        try {
            return value == null ? MAPPER.createObjectNode() : MAPPER.readTree(value);
        } catch (Exception e) {
            return MAPPER.createObjectNode();
        }
    }

    /** One text field of a JSON value ({@code null} when it has none). */
    public static String field(String value, String name) {
        JsonNode node = json(value).get(name);
        return node == null || node.isNull() ? null : node.asText();
    }

    /** One number field of a JSON value (0 when it has none). */
    public static double number(String value, String name) {
        JsonNode node = json(value).get(name);
        return node == null ? 0 : node.asDouble();
    }

    /** A JSON object from name, value pairs: {@code Lab.object("page", page, "count", n)}. */
    public static String object(Object... pairs) {
        ObjectNode out = MAPPER.createObjectNode();
        for (int i = 0; i + 1 < pairs.length; i += 2) {
            out.set(String.valueOf(pairs[i]), MAPPER.valueToTree(pairs[i + 1] instanceof Instant
                    ? pairs[i + 1].toString() : pairs[i + 1]));
        }
        return out.toString();
    }

    /** Event time from an ISO-8601 field of the JSON value ("2025-01-01T12:00:03.250Z"). */
    public static TimestampExtractor eventTime(String name) {
        return (ConsumerRecord<Object, Object> record, long partitionTime) -> {
            String text = record.value() == null ? null : field(record.value().toString(), name);
            return text == null ? partitionTime : Instant.parse(text).toEpochMilli();
        };
    }
}
