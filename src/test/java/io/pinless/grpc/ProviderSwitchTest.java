package io.pinless.grpc;

import static org.junit.jupiter.api.Assertions.assertEquals;

import java.io.PrintWriter;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
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
  @Test
  @Timeout(value = 5, unit = TimeUnit.MINUTES)
  void switchedOnPinlessServesTheRegistries() throws Exception {
    assertPassesInItsOwnJvm(SwitchedOnRegistryCalls.class, "-Dpinless.provider=true");
  }

  @Test
  @Timeout(value = 5, unit = TimeUnit.MINUTES)
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
    // Returns when the child closes its output, as it exits.
    String output = new String(child.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
    assertEquals(0, child.waitFor(), tests.getSimpleName() + " in its own JVM:\n" + output);
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
