package io.pinless.grpc;

import io.grpc.ManagedChannel;
import io.netty.buffer.PooledByteBufAllocator;
import io.pinless.http2.Http2FrameSlicer;
import java.lang.management.ManagementFactory;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.TimeUnit;

/**
 * Heap allocated per 16 MiB download, by thread, for pinless and stock grpc-netty in turn: the
 * exact byte counts the JVM keeps per thread ({@code ThreadMXBean.getThreadAllocatedBytes}), so
 * the two variants' read paths can be compared without a sampling profiler's noise. Threads are
 * grouped by name with their numbers dropped (the client's and the server's event loop, gRPC's
 * executor threads, ...).
 *
 * <pre>
 *   java -cp tools/target/benchmarks.jar io.pinless.grpc.HeapByThread [calls] [messageBytes] [rounds] [pinless,stock]
 * </pre>
 */
public final class HeapByThread {
  private static final int BYTES_PER_CALL = 16 << 20;
  private static final com.sun.management.ThreadMXBean THREADS =
      (com.sun.management.ThreadMXBean) ManagementFactory.getThreadMXBean();

  private static final String LOOP_PREFIX = "multiThreadIoEventLoopGroup-";

  private HeapByThread() {}

  /** Runs the comparison; see the class comment for the arguments. */
  public static void main(String[] args) throws Exception {
    int calls = args.length > 0 ? Integer.parseInt(args[0]) : 200;
    int messageBytes = args.length > 1 ? Integer.parseInt(args[1]) : 1 << 20;
    int rounds = args.length > 2 ? Integer.parseInt(args[2]) : 2;
    String[] variants = args.length > 3 ? args[3].split(",") : new String[] {"pinless", "stock"};
    for (String variant : variants) {
      if (!variant.equals("pinless") && !variant.equals("stock")) {
        throw new IllegalArgumentException("unknown variant " + variant + " (pinless or stock)");
      }
    }
    for (int round = 1; round <= rounds; round++) {
      for (String variant : variants) {
        Map<String, Long> perCall = run(variant.equals("pinless"), calls, messageBytes);
        long total = perCall.values().stream().mapToLong(Long::longValue).sum();
        System.out.printf("round %d %-8s %,10d B per call%n", round, variant, total);
        perCall.forEach((name, bytes) -> {
          if (bytes >= 64) {
            System.out.printf("    %-40s %,10d%n", name, bytes);
          }
        });
      }
    }
  }

  private static Map<String, Long> run(boolean pinless, int calls, int messageBytes)
      throws Exception {
    BenchTransport loop = new BenchTransport(BenchTransport.Kind.NIO, pinless,
        PooledByteBufAllocator.DEFAULT, BenchService.definition());
    ManagedChannel channel = loop.newChannel();
    byte[] request = BenchService.request(BYTES_PER_CALL / messageBytes, messageBytes);
    try {
      for (int i = 0; i < calls / 2; i++) {
        BenchService.download(channel, request, BYTES_PER_CALL);
      }
      Map<Long, String> names = new TreeMap<>();
      long slicedBefore = io.pinless.PinlessMetrics.Metric.DATA_BYTES_SLICED.value();
      long copiedBefore = io.pinless.PinlessMetrics.Metric.DATA_BYTES_COPIED.value();
      Map<Long, Long> before = allocatedByThread(names);
      for (int i = 0; i < calls; i++) {
        BenchService.download(channel, request, BYTES_PER_CALL);
      }
      Map<Long, Long> after = allocatedByThread(names);
      if (pinless) {
        System.out.printf("    DATA frame bytes per call: %,d sliced, %,d copied by the slicer%n",
            (io.pinless.PinlessMetrics.Metric.DATA_BYTES_SLICED.value() - slicedBefore) / calls,
            (io.pinless.PinlessMetrics.Metric.DATA_BYTES_COPIED.value() - copiedBefore) / calls);
      }
      // Event loop threads are named multiThreadIoEventLoopGroup-<group>-<n>; the server's group
      // is made first.
      int serverGroup = names.values().stream()
          .filter(n -> n.startsWith(LOOP_PREFIX))
          .mapToInt(n -> Integer.parseInt(n.split("-")[1]))
          .min().orElse(-1);
      Map<String, Long> byName = new TreeMap<>();
      after.forEach((id, bytes) -> {
        long delta = bytes - before.getOrDefault(id, 0L);
        String name = names.get(id);
        if (name.startsWith(LOOP_PREFIX)) {
          name = Integer.parseInt(name.split("-")[1]) == serverGroup
              ? "server event loop" : "client event loop";
        }
        byName.merge(name.replaceAll("[0-9]+", "#"), delta / calls, Long::sum);
      });
      return byName;
    } finally {
      channel.shutdownNow().awaitTermination(10, TimeUnit.SECONDS);
      loop.close();
    }
  }

  private static Map<Long, Long> allocatedByThread(Map<Long, String> names) {
    long[] ids = THREADS.getAllThreadIds();
    long[] bytes = THREADS.getThreadAllocatedBytes(ids);
    java.lang.management.ThreadInfo[] infos = THREADS.getThreadInfo(ids);
    Map<Long, Long> out = new TreeMap<>();
    for (int i = 0; i < ids.length; i++) {
      if (infos[i] != null && bytes[i] >= 0) {
        names.putIfAbsent(ids[i], infos[i].getThreadName());
        out.put(ids[i], bytes[i]);
      }
    }
    return out;
  }
}
