package io.pinless.grpc;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.pinless.grpc.HostileFraming.Handshaker;
import io.pinless.grpc.HostileFraming.Shape;
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.nio.file.Paths;
import java.util.HashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.MethodSource;

/**
 * A pinless server holds at most {@link #BOUND} bytes per payload byte of incomplete messages a
 * hostile client sends in the smallest pieces it may ({@link HostileFraming}: 1-byte and 100-byte
 * DATA frames interleaved across four streams, 1-byte and 100-byte ALTS and TLS records), over
 * plaintext, ALTS and TLS on each engine.
 *
 * <p>The figures come from one run of {@link HostileFraming#main} in a JVM of its own with Netty's
 * leak detector off: at PARANOID the detector's stack traces of every buffer's accesses would be
 * most of the heap measured. Its G1 regions are 32 MiB, so the pool's 4 MiB heap chunks are
 * ordinary objects: as humongous ones each would take a region more than its size, a megabyte the
 * figure would count whenever a chunk is added. Each shape then runs here too, at PARANOID, so
 * its buffers are checked for leaks.
 */
class HostileFramingTest {
  /** Bytes held per payload byte received, at most. */
  private static final double BOUND = 1.5;
  /** Payload per stream at the two points of the run here, which checks leaks, not memory. */
  private static final int LEAK_RUN_FIRST = 1_000;
  private static final int LEAK_RUN_SECOND = 5_000;

  private static final Map<String, Double> FIGURES = new HashMap<>();
  private static Handshaker handshakers;

  @BeforeAll
  static void measureInAJvmOfItsOwn() throws Exception {
    Process child = new ProcessBuilder(
            Paths.get(System.getProperty("java.home"), "bin", "java").toString(),
            "-Xmx1g", "-XX:G1HeapRegionSize=32m", "-Dio.netty.leakDetection.level=disabled",
            "-cp", System.getProperty("java.class.path"), HostileFraming.class.getName())
        .redirectErrorStream(true)
        .start();
    StringBuilder output = new StringBuilder();
    try (BufferedReader lines = new BufferedReader(
        new InputStreamReader(child.getInputStream(), StandardCharsets.UTF_8))) {
      String line;
      while ((line = lines.readLine()) != null) {
        output.append(line).append('\n');
        String[] f = line.split(" ");
        if (f.length >= 5 && f[0].equals(HostileFraming.LINE)) {
          FIGURES.put(f[1] + " " + f[2] + " " + f[3], Double.parseDouble(f[4]));
          System.out.println(line);
        }
      }
    }
    assertTrue(child.waitFor(1, TimeUnit.MINUTES), "the measuring JVM ended");
    assertEquals(0, child.exitValue(), "the measuring JVM failed:\n" + tail(output));
    handshakers = Handshaker.start();
  }

  @AfterAll
  static void stopHandshakers() throws Exception {
    if (handshakers != null) {
      handshakers.close();
    }
  }

  static Stream<Shape> shapes() {
    return HostileFraming.shapes(false).stream();
  }

  @ParameterizedTest(name = "{0}")
  @MethodSource("shapes")
  void holdsAtMostOneAndAHalfBytesPerPayloadByte(Shape shape) throws Exception {
    Double figure = FIGURES.get(shape.toString());
    assertNotNull(figure, shape + " was measured");
    // The same exchange at PARANOID: the connection stays up and nothing leaks.
    HostileFraming.heldPerPayloadByte(shape, handshakers, LEAK_RUN_FIRST, LEAK_RUN_SECOND);
    String held = String.format(Locale.ROOT,
        "%s: %.3f bytes held per payload byte, bound %.1f", shape, figure, BOUND);
    assertTrue(figure <= BOUND, held);
  }

  /** The last lines of {@code output}, for a failure message. */
  private static String tail(CharSequence output) {
    List<String> lines = List.of(output.toString().split("\n"));
    return String.join("\n", lines.subList(Math.max(0, lines.size() - 30), lines.size()));
  }
}
