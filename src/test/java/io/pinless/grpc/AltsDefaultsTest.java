package io.pinless.grpc;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.ByteArrayOutputStream;
import java.io.File;
import java.nio.charset.StandardCharsets;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

/** ALTS configuration is refused when the credentials are built, naming the setting and value. */
class AltsDefaultsTest {
  @Test
  void aHandshakerAddressWithoutAValidPortIsRefusedByBothBuilders() {
    for (String bad : List.of("localhost", "localhost:", "localhost:0", "localhost:65536",
        "localhost:http", "[::1]", "::1", ":8080", " ")) {
      IllegalArgumentException client = assertThrows(IllegalArgumentException.class,
          () -> PinlessChannelCredentials.altsBuilder().handshakerAddress(bad), bad);
      IllegalArgumentException server = assertThrows(IllegalArgumentException.class,
          () -> PinlessServerCredentials.altsBuilder().handshakerAddress(bad), bad);
      for (IllegalArgumentException e : List.of(client, server)) {
        assertTrue(e.getMessage().contains("handshakerAddress")
            && e.getMessage().contains("'" + bad + "'"), e.getMessage());
      }
    }
  }

  @Test
  void hostPortPairsAndTargetUrisAreTaken() {
    for (String good : List.of("localhost:8080", "127.0.0.1:1", "[::1]:65535",
        "metadata.google.internal.:8080", "dns:///localhost:8080", "unix:/tmp/handshaker")) {
      assertNotNull(PinlessChannelCredentials.altsBuilder().handshakerAddress(good).build(), good);
      assertNotNull(PinlessServerCredentials.altsBuilder().handshakerAddress(good).build(), good);
    }
  }

  @Test
  void aBogusCryptoSettingIsRefusedWhenTheCredentialsAreBuilt() throws Exception {
    String out = inAnotherJvm("-Dpinless.alts.crypto=bogus");
    assertTrue(out.contains("client refused: ") && out.contains("server refused: "), out);
    assertTrue(out.contains("pinless.alts.crypto") && out.contains("bogus"), out);
  }

  @Test
  void aKnownCryptoSettingBuilds() throws Exception {
    assertEquals("client built\nserver built\n", inAnotherJvm("-Dpinless.alts.crypto=JDK"));
  }

  /** Runs {@link BuildAlts} in a JVM of its own with {@code property}; returns what it prints. */
  private static String inAnotherJvm(String property) throws Exception {
    String java = String.join(File.separator, System.getProperty("java.home"), "bin", "java");
    Process p = new ProcessBuilder(java, property, "-cp", System.getProperty("java.class.path"),
            BuildAlts.class.getName())
        .redirectErrorStream(true)
        .start();
    ByteArrayOutputStream out = new ByteArrayOutputStream();
    p.getInputStream().transferTo(out);
    assertTrue(p.waitFor(60, TimeUnit.SECONDS), "the JVM ends");
    return out.toString(StandardCharsets.UTF_8);
  }

  /** Builds both ALTS credentials and prints whether each was refused. */
  static final class BuildAlts {
    public static void main(String[] args) {
      try {
        PinlessChannelCredentials.altsBuilder().handshakerAddress("127.0.0.1:1").build();
        System.out.println("client built");
      } catch (IllegalArgumentException e) {
        System.out.println("client refused: " + e.getMessage());
      }
      try {
        PinlessServerCredentials.altsBuilder().handshakerAddress("127.0.0.1:1").build();
        System.out.println("server built");
      } catch (IllegalArgumentException e) {
        System.out.println("server refused: " + e.getMessage());
      }
    }
  }
}
