package io.pinless.testing;

import java.util.List;
import org.junit.jupiter.api.extension.AfterAllCallback;
import org.junit.jupiter.api.extension.AfterEachCallback;
import org.junit.jupiter.api.extension.ExtensionContext;
import org.junit.platform.launcher.TestExecutionListener;
import org.junit.platform.launcher.TestPlan;

/**
 * Fails tests on a leak that Netty's detector reports. As a test execution listener it installs,
 * before any test class runs and loads Netty's buffers, a {@link LeakRecorder}. As an extension
 * (autodetected for every test class) it fails a test when a report arrived during it, and after
 * each class forces collection and a detector pass so leaks of that class surface there.
 * Surefire runs the tests with {@code io.netty.leakDetection.level=PARANOID}.
 */
public final class LeakDetection
    implements TestExecutionListener, AfterEachCallback, AfterAllCallback {

  @Override
  public void testPlanExecutionStarted(TestPlan plan) {
    install();
  }

  /** Installs the recording detector factory (idempotent). */
  public static void install() {
    LeakRecorder.install();
  }

  @Override
  public void afterEach(ExtensionContext context) {
    assertNoLeaks(context.getDisplayName());
  }

  @Override
  public void afterAll(ExtensionContext context) throws InterruptedException {
    collectAndDetect();
    assertNoLeaks(context.getDisplayName() + " (after collection)");
  }

  /** Collects garbage until a sentinel is enqueued, then makes the detector poll its queue. */
  public static void collectAndDetect() throws InterruptedException {
    LeakRecorder.collectAndDetect();
  }

  /** Throws if any leak was reported since the last call. */
  public static void assertNoLeaks(String where) {
    List<String> leaks = LeakRecorder.drain();
    if (!leaks.isEmpty()) {
      throw new AssertionError(
          leaks.size() + " leak(s) reported by Netty's detector in " + where + ":\n"
              + String.join("\n", leaks));
    }
  }

  static {
    // Loaded by JUnit before ByteBuf: make sure the factory is in place either way.
    install();
  }

  /** Whether the leak detector runs at PARANOID, as every test requires. */
  public static boolean paranoid() {
    return LeakRecorder.paranoid();
  }
}
