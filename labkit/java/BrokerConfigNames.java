// Prints every broker configuration name this Kafka version knows, one a line, so labkit can reject a
// misspelled setting before a broker refuses to start. Run once per cached distribution
// (java BrokerConfigNames.java, classpath = Kafka's jars).
//
// With --definitions, each name with its type and the values Kafka's own validator accepts, so labkit can
// reject a bad value before any JVM starts too (issue 26: log_retention_ms="abc" and num_partitions=-1 were
// caught by the broker, seconds later). Tab-separated:
//   name  TYPE  range   MIN  MAX     a number between MIN and MAX (either may be empty: unbounded)
//   name  TYPE  choice  A,B,...      one of these (a LIST: each item one of these); a fifth field
//                                    "ignorecase" when Kafka compares them ignoring case
//   name  TYPE  any                  a validator labkit cannot read (Kafka checks the value at start)
// TYPE is ConfigDef.Type: BOOLEAN, STRING, INT, SHORT, LONG, DOUBLE, LIST, CLASS, PASSWORD.
import java.lang.reflect.Field;
import java.util.Collection;
import java.util.List;
import java.util.TreeSet;

import org.apache.kafka.common.config.ConfigDef;

public class BrokerConfigNames {
    public static void main(String[] args) throws Exception {
        ConfigDef def = org.apache.kafka.server.config.AbstractKafkaConfig.CONFIG_DEF;
        boolean definitions = args.length > 0 && args[0].equals("--definitions");
        for (String name : new TreeSet<>(def.names())) {
            if (!definitions) {
                System.out.println(name);
                continue;
            }
            ConfigDef.ConfigKey key = def.configKeys().get(name);
            System.out.println(name + "\t" + key.type + "\t" + accepts(key.validator));
        }
    }

    // The validators' fields are package-private or private; Kafka's jars are on the classpath (the unnamed
    // module), so reflection reads them.
    static Object field(Object owner, String name) throws Exception {
        Field field = owner.getClass().getDeclaredField(name);
        field.setAccessible(true);
        return field.get(owner);
    }

    static String accepts(ConfigDef.Validator validator) throws Exception {
        if (validator instanceof ConfigDef.Range) {
            Object min = field(validator, "min"), max = field(validator, "max");
            return "range\t" + (min == null ? "" : min) + "\t" + (max == null ? "" : max);
        }
        if (validator instanceof ConfigDef.ValidString) {
            return choice((Collection<?>) field(validator, "validStrings"));
        }
        if (validator instanceof ConfigDef.CaseInsensitiveValidString) {
            String choice = choice((Collection<?>) field(validator, "validStrings"));
            return choice.equals("any") ? choice : choice + "\tignorecase";
        }
        if (validator instanceof ConfigDef.ValidList) {
            return accepts((ConfigDef.Validator) field(validator, "validString"));
        }
        return "any";
    }

    static String choice(Collection<?> values) {
        if (values.isEmpty()) {
            return "any";
        }
        List<String> names = values.stream().map(String::valueOf).sorted().toList();
        return "choice\t" + String.join(",", names);
    }
}
