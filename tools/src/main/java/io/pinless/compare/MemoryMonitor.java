package io.pinless.compare;

import com.google.gson.JsonObject;
import com.sun.management.GarbageCollectionNotificationInfo;
import java.lang.management.CompilationMXBean;
import java.lang.management.GarbageCollectorMXBean;
import java.lang.management.ManagementFactory;
import java.lang.management.MemoryPoolMXBean;
import java.lang.management.MemoryType;
import java.lang.management.MemoryUsage;
import java.lang.reflect.Method;
import java.util.HashSet;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.LongSupplier;
import javax.management.NotificationEmitter;
import javax.management.openmbean.CompositeData;

/**
 * What one process holds and spends while a phase runs. Every {@value #SAMPLE_MILLIS} ms it samples
 * the heap as the last collection left it (what is live, not garbage waiting to be collected), the
 * pooled direct bytes live buffers pin, the direct memory the pools reserved (the chunks they took
 * from the OS), and the buffers pinless's read budgets track. Over the whole window it counts the
 * process's CPU time and the heap bytes its threads allocated. The client's process and the server
 * end's each run one, over their own pools; so does each client process of the Cloud Storage
 * download benchmark ({@code io.pinless.grpc.storage.StorageDownloads}).
 */
public final class MemoryMonitor implements AutoCloseable {
  static final long SAMPLE_MILLIS = 50;

  private static final AtomicLong HEAP_AFTER_GC = new AtomicLong(-1);
  private static boolean listening;

  private final LongSupplier pinnedDirect;
  private final LongSupplier reservedDirect;
  private final Thread sampler;
  private final long allocatedAtStart;
  private final long cpuAtStart;
  private final long jitAtStart;
  private volatile boolean running = true;
  /** The figures when {@link #stop} was first called; null before. */
  private JsonObject stopped;
  // the samples and each series below are guarded by this
  private long samples;
  private final Series heap = new Series();
  private final Series pinned = new Series();
  private final Series reserved = new Series();
  private final Series inUse = new Series();
  /**
   * The capacity of the buffers pinless's read budgets track: what gRPC still holds of what
   * pinless's read path handed on (0 for the stock variants, which have no such budgets).
   */
  private final Series tracked = new Series();

  /**
   * Starts watching this process: {@code pinnedDirect} reads the direct bytes its pools' live
   * buffers pin, {@code reservedDirect} the direct memory those pools reserved.
   */
  public MemoryMonitor(LongSupplier pinnedDirect, LongSupplier reservedDirect) {
    listenToCollections();
    if (HEAP_AFTER_GC.get() < 0) {
      System.gc();
    }
    this.pinnedDirect = pinnedDirect;
    this.reservedDirect = reservedDirect;
    this.allocatedAtStart = allocatedBytes();
    this.cpuAtStart = processCpuNanos();
    this.jitAtStart = jitMillis();
    this.sampler = new Thread(this::sample, "pinless-compare-memory");
    sampler.setDaemon(true);
    sampler.start();
  }

  /** A sampled figure's sum and peak. */
  private static final class Series {
    private double sum;
    private long peak;

    void add(long value) {
      sum += value;
      peak = Math.max(peak, value);
    }
  }

  /** CPU time this process has used so far, every thread, in nanoseconds. */
  static long processCpuNanos() {
    return ((com.sun.management.OperatingSystemMXBean) ManagementFactory.getOperatingSystemMXBean())
        .getProcessCpuTime();
  }

  /** Milliseconds the JIT compilers have spent so far (-1 if the JVM does not say). */
  static long jitMillis() {
    CompilationMXBean jit = ManagementFactory.getCompilationMXBean();
    return jit != null && jit.isCompilationTimeMonitoringSupported()
        ? jit.getTotalCompilationTime() : -1;
  }

  /**
   * {@code com.sun.management.ThreadMXBean.getTotalThreadAllocatedBytes()}, looked up at run time:
   * every JDK pinless runs on (17 and later) has it, but compiling for release 17 on a later JDK
   * does not see it (that JDK's record of the release 17 API lacks it), so a direct call would not
   * build there.
   */
  private static final Method TOTAL_ALLOCATED;

  static {
    try {
      TOTAL_ALLOCATED =
          com.sun.management.ThreadMXBean.class.getMethod("getTotalThreadAllocatedBytes");
    } catch (NoSuchMethodException e) {
      throw new ExceptionInInitializerError(e);
    }
  }

  /** Heap bytes allocated by every thread of this JVM so far. */
  static long allocatedBytes() {
    try {
      return (Long) TOTAL_ALLOCATED.invoke(ManagementFactory.getThreadMXBean());
    } catch (ReflectiveOperationException e) {
      throw new IllegalStateException("cannot read the JVM's allocated bytes", e);
    }
  }

  /** The last line of a class histogram: instances and bytes of every live object. */
  private static final java.util.regex.Pattern HISTOGRAM_TOTAL =
      java.util.regex.Pattern.compile("^Total\\s+\\d+\\s+(\\d+)\\s*$", java.util.regex.Pattern.MULTILINE);

  /**
   * Heap bytes of live objects: the total of the JVM's class histogram (the diagnostic command
   * {@code GC.class_histogram}, what {@code jmap -histo:live} prints, after a full collection),
   * which counts objects rather than reading the heap's occupancy; where that command is not
   * available, the smallest occupancy after a few {@code System.gc()}. Finalizes what is pending
   * first.
   */
  static long heapAfterFullCollection() {
    // Objects waiting for finalization (the OpenSSL engines of closed connections) are still
    // reachable: finalizing them first keeps them out of this figure and of the next one.
    System.gc();
    System.runFinalization();
    try {
      String histogram =
          (String)
              ManagementFactory.getPlatformMBeanServer()
                  .invoke(
                      new javax.management.ObjectName("com.sun.management:type=DiagnosticCommand"),
                      "gcClassHistogram",
                      new Object[] {new String[0]},
                      new String[] {String[].class.getName()});
      java.util.regex.Matcher total = HISTOGRAM_TOTAL.matcher(histogram);
      if (total.find()) {
        return Long.parseLong(total.group(1));
      }
    } catch (javax.management.JMException | RuntimeException e) {
      // fall back to the heap's occupancy
    }
    Runtime rt = Runtime.getRuntime();
    long used = Long.MAX_VALUE;
    for (int i = 0; i < 3; i++) {
      System.gc();
      used = Math.min(used, rt.totalMemory() - rt.freeMemory());
    }
    return used;
  }

  private static synchronized void listenToCollections() {
    if (listening) {
      return;
    }
    listening = true;
    Set<String> heapPools = new HashSet<>();
    for (MemoryPoolMXBean pool : ManagementFactory.getMemoryPoolMXBeans()) {
      if (pool.getType() == MemoryType.HEAP) {
        heapPools.add(pool.getName());
      }
    }
    for (GarbageCollectorMXBean gc : ManagementFactory.getGarbageCollectorMXBeans()) {
      ((NotificationEmitter) gc).addNotificationListener((notification, handback) -> {
        if (!GarbageCollectionNotificationInfo.GARBAGE_COLLECTION_NOTIFICATION.equals(notification.getType())) {
          return;
        }
        GarbageCollectionNotificationInfo info =
            GarbageCollectionNotificationInfo.from((CompositeData) notification.getUserData());
        long used = 0;
        for (Map.Entry<String, MemoryUsage> pool : info.getGcInfo().getMemoryUsageAfterGc().entrySet()) {
          if (heapPools.contains(pool.getKey())) {
            used += pool.getValue().getUsed();
          }
        }
        HEAP_AFTER_GC.set(used);
      }, null, null);
    }
  }

  private void sample() {
    while (running) {
      long heapNow = Math.max(0, HEAP_AFTER_GC.get());
      long pinnedNow = pinnedDirect.getAsLong();
      long reservedNow = reservedDirect.getAsLong();
      long trackedNow = io.pinless.PinlessMetrics.Metric.TRACKED_BYTES.value();
      synchronized (this) {
        samples++;
        heap.add(heapNow);
        pinned.add(pinnedNow);
        reserved.add(reservedNow);
        inUse.add(heapNow + pinnedNow);
        tracked.add(trackedNow);
      }
      try {
        Thread.sleep(SAMPLE_MILLIS);
      } catch (InterruptedException e) {
        return;
      }
    }
  }

  /**
   * Stops watching and returns what was seen, as JSON fields: this process's id and JVM
   * arguments; mean and peak of each sampled figure, in bytes; the CPU nanoseconds the process
   * used, the heap bytes it allocated and the seconds its JIT compilers spent since the start.
   * Later calls return the same figures; call it from one thread.
   *
   * <p>The sampled figures are {@code pooledDirectPinned}, {@code poolReserved}, {@code
   * heapAfterGc}, {@code inUse} and {@code pinlessHeldDownstream}, each as {@code <name>MeanBytes}
   * and {@code <name>PeakBytes}; the totals are {@code cpuNanos}, {@code heapAllocatedBytes} and
   * {@code jitSeconds}.
   */
  public JsonObject stop() throws InterruptedException {
    if (stopped != null) {
      return stopped;
    }
    long cpu = processCpuNanos() - cpuAtStart;
    long allocated = allocatedBytes() - allocatedAtStart;
    long jit = jitAtStart < 0 ? -1 : jitMillis() - jitAtStart;
    close();
    stopped = figures(cpu, allocated, jit);
    return stopped;
  }

  private synchronized JsonObject figures(long cpu, long allocated, long jitMillis) {
    long n = Math.max(1, samples);
    JsonObject o = new JsonObject();
    o.addProperty("pid", ProcessHandle.current().pid());
    o.addProperty("jvmArguments",
        String.join(" ", ManagementFactory.getRuntimeMXBean().getInputArguments()));
    o.addProperty("samples", samples);
    add(o, "pooledDirectPinned", pinned, n);
    add(o, "poolReserved", reserved, n);
    add(o, "heapAfterGc", heap, n);
    add(o, "inUse", inUse, n);
    add(o, "pinlessHeldDownstream", tracked, n);
    o.addProperty("cpuNanos", cpu);
    o.addProperty("heapAllocatedBytes", allocated);
    if (jitMillis >= 0) {
      o.addProperty("jitSeconds", jitMillis / 1e3);
    }
    return o;
  }

  private static void add(JsonObject o, String name, Series series, long samples) {
    o.addProperty(name + "MeanBytes", Math.round(series.sum / samples));
    o.addProperty(name + "PeakBytes", series.peak);
  }

  /** Stops sampling (the figures stay until {@link #stop}). */
  @Override
  public void close() throws InterruptedException {
    running = false;
    sampler.interrupt();
    sampler.join();
  }
}
