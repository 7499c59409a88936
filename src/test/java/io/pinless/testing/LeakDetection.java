package io.pinless.testing;

import io.netty.buffer.PooledByteBufAllocator;
import io.netty.buffer.UnpooledByteBufAllocator;
import io.netty.util.ResourceLeakDetector;
import io.netty.util.ResourceLeakDetectorFactory;
import java.lang.ref.ReferenceQueue;
import java.lang.ref.WeakReference;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ConcurrentLinkedQueue;
import org.junit.jupiter.api.extension.AfterAllCallback;
import org.junit.jupiter.api.extension.AfterEachCallback;
import org.junit.jupiter.api.extension.ExtensionContext;
import org.junit.platform.launcher.TestExecutionListener;
import org.junit.platform.launcher.TestPlan;

/**
 * Fails tests on a leak that Netty's detector reports. As a test execution listener it installs,
 * before any test class runs and loads Netty's buffers, a detector factory whose detectors record
 * every report. As an extension (autodetected for every test class) it fails a test when a report
 * arrived during it, and after each class forces collection and a detector pass so leaks of that
 * class surface there.
 * Surefire runs the tests with {@code io.netty.leakDetection.level=PARANOID}.
 */
public final class LeakDetection
    implements TestExecutionListener, AfterEachCallback, AfterAllCallback {
  private static final ConcurrentLinkedQueue<String> LEAKS = new ConcurrentLinkedQueue<>();

  @Override
  public void testPlanExecutionStarted(TestPlan plan) {
    install();
  }

  /** Installs the recording detector factory (idempotent). */
  public static synchronized void install() {
    if (ResourceLeakDetectorFactory.instance() instanceof RecordingFactory) {
      return;
    }
    ResourceLeakDetectorFactory.setResourceLeakDetectorFactory(new RecordingFactory());
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
    for (int round = 0; round < 3; round++) {
      ReferenceQueue<Object> queue = new ReferenceQueue<>();
      WeakReference<Object> sentinel = new WeakReference<>(new Object(), queue);
      while (queue.remove(100) == null) {
        System.gc();
      }
      sentinel.clear();
      // Each tracked allocation at PARANOID polls the detector's queue and reports leaks.
      PooledByteBufAllocator.DEFAULT.directBuffer(1).release();
      UnpooledByteBufAllocator.DEFAULT.heapBuffer(1).release();
    }
  }

  /** Throws if any leak was reported since the last call. */
  public static void assertNoLeaks(String where) {
    List<String> leaks = new ArrayList<>();
    String leak;
    while ((leak = LEAKS.poll()) != null) {
      leaks.add(leak);
    }
    if (!leaks.isEmpty()) {
      throw new AssertionError(
          leaks.size() + " leak(s) reported by Netty's detector in " + where + ":\n"
              + String.join("\n", leaks));
    }
  }

  private static final class RecordingFactory extends ResourceLeakDetectorFactory {
    @Override
    public <T> ResourceLeakDetector<T> newResourceLeakDetector(
        Class<T> resource, int samplingInterval, long maxActive) {
      return new ResourceLeakDetector<T>(resource, samplingInterval) {
        @Override
        protected void reportTracedLeak(String resourceType, String records) {
          LEAKS.add("LEAK " + resourceType + records);
          super.reportTracedLeak(resourceType, records);
        }

        @Override
        protected void reportUntracedLeak(String resourceType) {
          LEAKS.add("LEAK " + resourceType + " (untraced)");
          super.reportUntracedLeak(resourceType);
        }

        @Override
        protected boolean needReport() {
          return true;
        }
      };
    }
  }

  static {
    // Loaded by JUnit before ByteBuf: make sure the factory is in place either way.
    install();
  }

  /** Whether the leak detector runs at PARANOID, as every test requires. */
  public static boolean paranoid() {
    return ResourceLeakDetector.getLevel() == ResourceLeakDetector.Level.PARANOID;
  }
}
