// Java's own murmur2, for comparing labkit's (and learners') Python with the real thing.
// Reads hex-encoded keys, one per line (an empty line is the empty key), from stdin;
// prints Utils.murmur2 of each as a signed int, one per line.
// Run: java -cp "<kafka libs>/*" Murmur2.java   (single-file source launch, JDK 11+)

import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.util.HexFormat;

import org.apache.kafka.common.utils.Utils;

public class Murmur2 {
    public static void main(String[] args) throws IOException {
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in));
        StringBuilder out = new StringBuilder();
        HexFormat hex = HexFormat.of();
        String line;
        while ((line = in.readLine()) != null) {
            out.append(Utils.murmur2(hex.parseHex(line.trim()))).append('\n');
        }
        System.out.print(out);
    }
}
