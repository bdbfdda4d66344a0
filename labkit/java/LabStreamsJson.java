// JSON written by labkit's Kafka Streams launcher (LabStreams): strings escaped, values typed, and a
// topology's description as data (subtopologies, nodes with their topics and stores, edges).
import java.util.ArrayList;
import java.util.List;
import java.util.Set;
import org.apache.kafka.streams.TopologyDescription;

final class LabStreamsJson {
    private LabStreamsJson() {
    }

    static String str(String s) {
        StringBuilder out = new StringBuilder("\"");
        for (char c : s.toCharArray()) {
            switch (c) {
                case '"': out.append("\\\""); break;
                case '\\': out.append("\\\\"); break;
                case '\n': out.append("\\n"); break;
                case '\r': out.append("\\r"); break;
                case '\t': out.append("\\t"); break;
                default:
                    if (c < 0x20) {
                        out.append(String.format("\\u%04x", (int) c));
                    } else {
                        out.append(c);
                    }
            }
        }
        return out.append('"').toString();
    }

    /** A number as a JSON number (NaN and infinities: null), anything else as its string. */
    static String value(Object v) {
        if (v == null) {
            return "null";
        }
        if (v instanceof Number) {
            double d = ((Number) v).doubleValue();
            if (!Double.isFinite(d)) {
                return "null";
            }
            return v instanceof Double || v instanceof Float ? Double.toString(d) : v.toString();
        }
        return str(v.toString());
    }

    static String list(Iterable<String> items) {
        List<String> out = new ArrayList<>();
        for (String s : items) {
            out.add(str(s));
        }
        return "[" + String.join(",", out) + "]";
    }

    static List<String> names(Set<TopologyDescription.Node> nodes) {
        List<String> out = new ArrayList<>();
        for (TopologyDescription.Node n : nodes) {
            out.add(n.name());
        }
        out.sort(null);
        return out;
    }

    static String node(TopologyDescription.Node n) {
        StringBuilder out = new StringBuilder("{\"name\":" + str(n.name()));
        if (n instanceof TopologyDescription.Source) {
            TopologyDescription.Source s = (TopologyDescription.Source) n;
            out.append(",\"type\":\"source\",\"topics\":").append(list(s.topicSet() == null ? List.of() : s.topicSet()));
            if (s.topicPattern() != null) {
                out.append(",\"pattern\":").append(str(s.topicPattern().pattern()));
            }
        } else if (n instanceof TopologyDescription.Sink) {
            TopologyDescription.Sink s = (TopologyDescription.Sink) n;
            out.append(",\"type\":\"sink\",\"topics\":").append(list(s.topic() == null ? List.of() : List.of(s.topic())));
        } else if (n instanceof TopologyDescription.Processor) {
            out.append(",\"type\":\"processor\",\"stores\":")
               .append(list(new ArrayList<>(((TopologyDescription.Processor) n).stores())));
        }
        out.append(",\"predecessors\":").append(list(names(n.predecessors())))
           .append(",\"successors\":").append(list(names(n.successors()))).append("}");
        return out.toString();
    }

    static String topology(TopologyDescription d) {
        StringBuilder out = new StringBuilder("{\"subtopologies\":[");
        String sep = "";
        for (TopologyDescription.Subtopology s : d.subtopologies()) {
            out.append(sep).append("{\"id\":").append(s.id()).append(",\"nodes\":[");
            String nsep = "";
            for (TopologyDescription.Node n : s.nodes()) {
                out.append(nsep).append(node(n));
                nsep = ",";
            }
            out.append("]}");
            sep = ",";
        }
        out.append("],\"global_stores\":[");
        sep = "";
        for (TopologyDescription.GlobalStore g : d.globalStores()) {
            out.append(sep).append("{\"id\":").append(g.id()).append(",\"source\":").append(node(g.source()))
               .append(",\"processor\":").append(node(g.processor())).append("}");
            sep = ",";
        }
        return out.append("]}").toString();
    }
}
