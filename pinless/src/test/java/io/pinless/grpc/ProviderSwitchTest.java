package io.pinless.grpc;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.fail;

import java.io.IOException;
import java.io.PrintWriter;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.platform.engine.discovery.DiscoverySelectors;
import org.junit.platform.launcher.core.LauncherDiscoveryRequestBuilder;
import org.junit.platform.launcher.core.LauncherFactory;
import org.junit.platform.launcher.listeners.SummaryGeneratingListener;
import org.junit.platform.launcher.listeners.TestExecutionSummary;

/**
 * gRPC's default registries with the provider switch set, each case in a JVM of its own: pinless
 * reads its settings and gRPC its providers once per JVM, and this one runs with the switch off.
 * The child JVM runs a test class through JUnit with Netty's leak detector at PARANOID, and passes
 * only if every test in it ran and succeeded.
 */
class ProviderSwitchTest {
  /** Far more than the child needs (under 30 s on a loaded 2-core machine). */
  private static final long CHILD_MINUTES = 4;

  @Test
  void switchedOnPinlessServesTheRegistries() throws Exception {
    assertPassesInItsOwnJvm(SwitchedOnRegistryCalls.class, "-Dpinless.provider=true");
  }

  @Test
  void rollbackSwitchLeavesTheRegistriesToGrpcNetty() throws Exception {
    assertPassesInItsOwnJvm(
        RolledBackRegistryCalls.class, "-Dpinless.provider=true", "-Dpinless.enabled=false");
  }

  private static void assertPassesInItsOwnJvm(Class<?> tests, String... properties)
      throws Exception {
    List<String> command = new ArrayList<>();
    command.add(Path.of(System.getProperty("java.home"), "bin", "java").toString());
    command.add("-Xmx512m");
    command.add("-Dio.netty.leakDetection.level=PARANOID");
    command.add("-Dio.netty.leakDetection.targetRecords=8");
    command.addAll(List.of(properties));
    command.add("-cp");
    command.add(System.getProperty("java.class.path"));
    command.add(ProviderSwitchTest.class.getName());
    command.add(tests.getName());
    Process child = new ProcessBuilder(command).redirectErrorStream(true).start();
    CompletableFuture<String> output = CompletableFuture.supplyAsync(() -> {
      try {
        return new String(child.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
      } catch (IOException e) {
        throw new UncheckedIOException(e);
      }
    });
    if (!child.waitFor(CHILD_MINUTES, TimeUnit.MINUTES)) {
      child.destroyForcibly();
      fail(tests.getSimpleName() + " did not finish in " + CHILD_MINUTES + " minutes");
    }
    assertEquals(0, child.exitValue(), tests.getSimpleName() + " in its own JVM:\n"
        + output.get(1, TimeUnit.MINUTES));
  }

  /**
   * The child JVM: runs the test class named by {@code args[0]} and exits with 0 when every test
   * found ran and succeeded, else 1, having printed the failures.
   */
  public static void main(String[] args) throws Exception {
    SummaryGeneratingListener listener = new SummaryGeneratingListener();
    LauncherFactory.create().execute(LauncherDiscoveryRequestBuilder.request()
        .selectors(DiscoverySelectors.selectClass(Class.forName(args[0])))
        .configurationParameter("junit.jupiter.extensions.autodetection.enabled", "true")
        .build(), listener);
    TestExecutionSummary summary = listener.getSummary();
    PrintWriter out = new PrintWriter(System.out, true);
    summary.printTo(out);
    summary.printFailuresTo(out, 40);
    out.flush();
    boolean passed = summary.getTestsFoundCount() > 0
        && summary.getTestsSucceededCount() == summary.getTestsFoundCount()
        && summary.getTotalFailureCount() == 0;
    System.exit(passed ? 0 : 1);
  }
}
