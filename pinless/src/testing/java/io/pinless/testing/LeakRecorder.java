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
import java.util.concurrent.atomic.AtomicLong;

/**
 * Records every leak Netty's detector reports, for tests and benchmark mains that check for
 * leaks. {@link #install()} puts a detector factory in place whose detectors keep each report;
 * it must run before Netty's buffer classes load, since each buffer class makes its detector
 * once.
 */
public final class LeakRecorder {
  private static final ConcurrentLinkedQueue<String> LEAKS = new ConcurrentLinkedQueue<>();
  private static final AtomicLong REPORTED = new AtomicLong();

  private LeakRecorder() {}

  /** Installs the recording detector factory (idempotent). */
  public static synchronized void install() {
    if (ResourceLeakDetectorFactory.instance() instanceof RecordingFactory) {
      return;
    }
    ResourceLeakDetectorFactory.setResourceLeakDetectorFactory(new RecordingFactory());
  }

  /** Whether the recording factory is in place. */
  public static boolean installed() {
    return ResourceLeakDetectorFactory.instance() instanceof RecordingFactory;
  }

  /** Leaks reported since the process started; it only grows. */
  public static long reported() {
    return REPORTED.get();
  }

  /** Takes the reports that arrived since the last call. */
  public static List<String> drain() {
    List<String> leaks = new ArrayList<>();
    String leak;
    while ((leak = LEAKS.poll()) != null) {
      leaks.add(leak);
    }
    return leaks;
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

  /** Whether the leak detector runs at PARANOID. */
  public static boolean paranoid() {
    return ResourceLeakDetector.getLevel() == ResourceLeakDetector.Level.PARANOID;
  }

  private static void record(String leak) {
    REPORTED.incrementAndGet();
    LEAKS.add(leak);
  }

  private static final class RecordingFactory extends ResourceLeakDetectorFactory {
    @Override
    public <T> ResourceLeakDetector<T> newResourceLeakDetector(
        Class<T> resource, int samplingInterval, long maxActive) {
      return new ResourceLeakDetector<T>(resource, samplingInterval) {
        @Override
        protected void reportTracedLeak(String resourceType, String records) {
          record("LEAK " + resourceType + records);
          super.reportTracedLeak(resourceType, records);
        }

        @Override
        protected void reportUntracedLeak(String resourceType) {
          record("LEAK " + resourceType + " (untraced)");
          super.reportUntracedLeak(resourceType);
        }

        @Override
        protected boolean needReport() {
          return true;
        }
      };
    }
  }
}
