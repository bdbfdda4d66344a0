// Prints every broker configuration name this Kafka version knows, one a line.
// Run once per cached distribution (java BrokerConfigNames.java, classpath = Kafka's jars)
// so labkit can reject a misspelled setting before a broker refuses to start.
public class BrokerConfigNames {
    public static void main(String[] args) {
        var names = new java.util.TreeSet<String>(
            org.apache.kafka.server.config.AbstractKafkaConfig.CONFIG_DEF.names());
        for (String name : names) {
            System.out.println(name);
        }
    }
}
