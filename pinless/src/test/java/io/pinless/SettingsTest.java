package io.pinless;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.io.InputStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Paths;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

/**
 * Settings are read once per JVM, so a bad one is tried in a JVM of its own: every use fails with
 * an {@link IllegalArgumentException} naming it, again and again, not with the class failing to
 * load.
 */
class SettingsTest {
  /** Uses the settings three times and prints what each use threw. */
  public static void main(String[] args) {
    List<Runnable> uses = List.of(Settings::readBudgetBytes, Settings::readBudgetBytes,
        Settings::enabled);
    for (Runnable use : uses) {
      try {
        use.run();
        System.out.println("no error");
      } catch (Throwable t) {
        System.out.println(t.getClass().getSimpleName() + ": " + t.getMessage());
      }
    }
  }

  @Test
  void aBadSettingFailsEveryUseWithAnErrorNamingIt() throws IOException, InterruptedException {
    Process child = new ProcessBuilder(
            Paths.get(System.getProperty("java.home"), "bin", "java").toString(),
            "-Dpinless.read.budgetBytes=64MiB",
            "-cp", System.getProperty("java.class.path"), SettingsTest.class.getName())
        .redirectErrorStream(true)
        .start();
    String output;
    try (InputStream out = child.getInputStream()) {
      output = new String(out.readAllBytes(), StandardCharsets.UTF_8);
    }
    assertTrue(child.waitFor(1, TimeUnit.MINUTES), "the child JVM ended");
    assertEquals(0, child.exitValue(), output);
    String expected =
        "IllegalArgumentException: pinless.read.budgetBytes=64MiB is not a positive number";
    assertEquals(List.of(expected, expected, expected), output.lines().toList(), output);
  }
}
