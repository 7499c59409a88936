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

  /**
   * Regression (review): a GCE_METADATA_HOST with a port of its own (emulators set
   * {@code 127.0.0.1:9}) made the default address {@code 127.0.0.1:9:8080}, which no builder
   * checked: it failed only when a connection reached the handshaker.
   */
  @Test
  void aMetadataHostThatMakesNoAddressIsRefusedWhenTheDefaultIsBuilt() throws Exception {
    String out = inAnotherJvm("-Dpinless.alts.crypto=jdk", "127.0.0.1:9", "default");
    assertTrue(out.contains("client refused: ") && out.contains("server refused: "), out);
    assertTrue(out.contains("GCE_METADATA_HOST") && out.contains("127.0.0.1:9"), out);
    assertEquals("client built\nserver built\n",
        inAnotherJvm("-Dpinless.alts.crypto=jdk", "127.0.0.1:9", "explicit"),
        "an explicit address does not depend on GCE_METADATA_HOST");
  }

  /** Runs {@link BuildAlts} in a JVM of its own with {@code property}; returns what it prints. */
  private static String inAnotherJvm(String property) throws Exception {
    return inAnotherJvm(property, null, "explicit");
  }

  /**
   * Runs {@link BuildAlts} with {@code property}, GCE_METADATA_HOST set to {@code metadataHost}
   * (null: unset) and {@code address} ({@code default} or {@code explicit}).
   */
  private static String inAnotherJvm(String property, String metadataHost, String address)
      throws Exception {
    String java = String.join(File.separator, System.getProperty("java.home"), "bin", "java");
    ProcessBuilder builder = new ProcessBuilder(java, property, "-cp",
        System.getProperty("java.class.path"), BuildAlts.class.getName(), address);
    builder.environment().remove("GCE_METADATA_HOST");
    if (metadataHost != null) {
      builder.environment().put("GCE_METADATA_HOST", metadataHost);
    }
    // Standard error (where libraries on the test class path may warn) goes to the test's log.
    Process p = builder.redirectError(ProcessBuilder.Redirect.INHERIT).start();
    ByteArrayOutputStream out = new ByteArrayOutputStream();
    p.getInputStream().transferTo(out);
    assertTrue(p.waitFor(60, TimeUnit.SECONDS), "the JVM ends");
    return out.toString(StandardCharsets.UTF_8);
  }

  /**
   * Builds both ALTS credentials and prints whether each was refused; {@code args[0]} is {@code
   * default} for the default handshaker address, else an explicit one.
   */
  static final class BuildAlts {
    public static void main(String[] args) {
      boolean explicit = !args[0].equals("default");
      try {
        PinlessChannelCredentials.AltsBuilder client = PinlessChannelCredentials.altsBuilder();
        (explicit ? client.handshakerAddress("127.0.0.1:1") : client).build();
        System.out.println("client built");
      } catch (IllegalArgumentException e) {
        System.out.println("client refused: " + e.getMessage());
      }
      try {
        PinlessServerCredentials.AltsBuilder server = PinlessServerCredentials.altsBuilder();
        (explicit ? server.handshakerAddress("127.0.0.1:1") : server).build();
        System.out.println("server built");
      } catch (IllegalArgumentException e) {
        System.out.println("server refused: " + e.getMessage());
      }
    }
  }
}
