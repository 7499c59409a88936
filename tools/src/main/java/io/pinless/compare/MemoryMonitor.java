package io.pinless.compare;

import com.sun.management.GarbageCollectionNotificationInfo;
import io.pinless.read.ReadBudget;
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
 * In-use memory while a phase runs: the heap as the last collection left it (what is live, not
 * garbage waiting to be collected) plus the pooled direct bytes that live buffers pin, sampled
 * every {@value #SAMPLE_MILLIS} ms; and the heap bytes allocated by all threads.
 */
final class MemoryMonitor implements AutoCloseable {
  static final long SAMPLE_MILLIS = 50;

  private static final AtomicLong HEAP_AFTER_GC = new AtomicLong(-1);
  private static boolean listening;

  private final LongSupplier pinnedDirect;
  private final LongSupplier clientPinnedDirect;
  private final Thread sampler;
  private final long allocatedAtStart;
  private volatile boolean running = true;
  private long samples;
  private double heapSum;
  private double pinnedSum;
  private double inUseSum;
  private double clientPinnedSum;
  private long clientPinnedPeak;
  private long heapPeak;
  private long pinnedPeak;
  private final long cpuAtStart;
  private long inUsePeak;
  /**
   * The capacity of the buffers pinless's read budgets track (what gRPC still holds of what
   * pinless's read path handed on; 0 for the stock variants, which have no such budgets).
   */
  private double trackedSum;
  private long trackedPeak;

  /**
   * Starts sampling; {@code pinnedDirect} reads the pinned direct bytes of both ends' pools,
   * {@code clientPinnedDirect} those of the clients' (the receiving end of a download).
   */
  MemoryMonitor(LongSupplier pinnedDirect, LongSupplier clientPinnedDirect) {
    listenToCollections();
    if (HEAP_AFTER_GC.get() < 0) {
      System.gc();
    }
    this.pinnedDirect = pinnedDirect;
    this.clientPinnedDirect = clientPinnedDirect;
    this.allocatedAtStart = allocatedBytes();
    this.cpuAtStart = processCpuNanos();
    this.sampler = new Thread(this::sample, "pinless-compare-memory");
    sampler.setDaemon(true);
    sampler.start();
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
      long heap = Math.max(0, HEAP_AFTER_GC.get());
      long pinned = pinnedDirect.getAsLong();
      long clientPinned = clientPinnedDirect.getAsLong();
      long tracked = io.pinless.PinlessMetrics.Metric.TRACKED_BYTES.value();
      synchronized (this) {
        trackedSum += tracked;
        trackedPeak = Math.max(trackedPeak, tracked);
        clientPinnedSum += clientPinned;
        clientPinnedPeak = Math.max(clientPinnedPeak, clientPinned);
        samples++;
        heapSum += heap;
        pinnedSum += pinned;
        inUseSum += heap + pinned;
        heapPeak = Math.max(heapPeak, heap);
        pinnedPeak = Math.max(pinnedPeak, pinned);
        inUsePeak = Math.max(inUsePeak, heap + pinned);
      }
      try {
        Thread.sleep(SAMPLE_MILLIS);
      } catch (InterruptedException e) {
        return;
      }
    }
  }

  /** What was sampled, as JSON fields in bytes. */
  synchronized com.google.gson.JsonObject summary() {
    long n = Math.max(1, samples);
    com.google.gson.JsonObject o = new com.google.gson.JsonObject();
    o.addProperty("samples", samples);
    o.addProperty("inUseAvgBytes", Math.round(inUseSum / n));
    o.addProperty("inUsePeakBytes", inUsePeak);
    o.addProperty("heapAfterGcAvgBytes", Math.round(heapSum / n));
    o.addProperty("heapAfterGcPeakBytes", heapPeak);
    o.addProperty("pooledDirectPinnedAvgBytes", Math.round(pinnedSum / n));
    o.addProperty("pooledDirectPinnedPeakBytes", pinnedPeak);
    o.addProperty("clientPooledDirectPinnedAvgBytes", Math.round(clientPinnedSum / n));
    o.addProperty("clientPooledDirectPinnedPeakBytes", clientPinnedPeak);
    o.addProperty("pinlessHeldDownstreamAvgBytes", Math.round(trackedSum / n));
    o.addProperty("pinlessHeldDownstreamPeakBytes", trackedPeak);
    return o;
  }

  /**
   * CPU nanoseconds this process used since this monitor started (client and server together,
   * and this monitor's own sampling): unlike throughput, it does not count time the machine did
   * not give the process a CPU.
   */
  long cpuNanosSinceStart() {
    return processCpuNanos() - cpuAtStart;
  }

  /** Heap bytes allocated since this monitor started. */
  long allocatedSinceStart() {
    return allocatedBytes() - allocatedAtStart;
  }

  @Override
  public void close() throws InterruptedException {
    running = false;
    sampler.interrupt();
    sampler.join();
  }
}
