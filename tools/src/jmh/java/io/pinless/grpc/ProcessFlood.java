package io.pinless.grpc;

import io.grpc.InsecureServerCredentials;
import io.grpc.ManagedChannel;
import io.grpc.Status;
import io.pinless.PinlessMetrics.Metric;
import io.pinless.read.ProcessBudget;
import io.pinless.testing.Flood;
import java.lang.management.ManagementFactory;
import java.lang.management.MemoryMXBean;
import java.util.ArrayList;
import java.util.List;
import java.util.Random;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;

/**
 * A flood at scale: many client connections upload 1 MiB messages to one server whose service
 * keeps each message a while, the server pinless with the process budget or stock grpc-netty.
 * One variant per JVM, since the budget is read once per process.
 *
 * <pre>
 *   java -Xmx4g -XX:MaxDirectMemorySize=16g -Dio.netty.leakDetection.level=disabled \
 *       -Dpinless.process.budgetBytes=268435456 \
 *       -cp tools/target/benchmarks.jar io.pinless.grpc.ProcessFlood \
 *       [pinless|stock (pinless)] [connections (2000)] [calls (2)] [messages (4)] [hold ms (200)]
 * </pre>
 *
 * <p>Every connection is made first and the clients then start together. Reports the most the
 * server's own pool pinned (sampled every 5 ms), heap used after a collection at the end less
 * before the flood, how the calls ended (completed with the right bytes, shed with {@code
 * RESOURCE_EXHAUSTED}, failed otherwise: a keepalive that failed shows as {@code UNAVAILABLE}),
 * and Jain's fairness index of the throughputs of the connections none of whose calls failed.
 * Clients keep alive every second (gRPC may lengthen it to 10 s).
 */
public final class ProcessFlood {
  private static final int MESSAGE_BYTES = 1 << 20;
  private static final long HANG_GUARD_MINUTES = 20;

  private ProcessFlood() {}

  public static void main(String[] args) throws Exception {
    String variant = args.length > 0 ? args[0] : "pinless";
    int connections = args.length > 1 ? Integer.parseInt(args[1]) : 2000;
    int calls = args.length > 2 ? Integer.parseInt(args[2]) : 2;
    int messages = args.length > 3 ? Integer.parseInt(args[3]) : 4;
    long holdMillis = args.length > 4 ? Long.parseLong(args[4]) : 200;
    boolean pinless = variant.equals("pinless");
    if (!pinless && !variant.equals("stock")) {
      throw new IllegalArgumentException("variant is pinless or stock: " + variant);
    }
    List<byte[]> bodies = new ArrayList<>();
    Random random = new Random(1);
    for (int i = 0; i < messages; i++) {
      byte[] body = new byte[MESSAGE_BYTES];
      random.nextBytes(body);
      bodies.add(body);
    }
    long crc = Flood.crc(bodies);
    MemoryMXBean memory = ManagementFactory.getMemoryMXBean();
    System.gc();
    long heapBefore = memory.getHeapMemoryUsage().getUsed();
    long shedBefore = Metric.STREAMS_SHED.value();
    long slowedBefore = Metric.PEERS_SLOWED.value();
    long start = System.nanoTime();
    List<Flood.Client> done = new ArrayList<>();
    long pinned = 0;
    try (Flood flood = new Flood(
        pinless ? PinlessServerCredentials.insecure() : InsecureServerCredentials.create(),
        pinless ? LoadShedding.interceptor() : null, holdMillis, 2)) {
      List<ManagedChannel> channels = new ArrayList<>();
      for (int i = 0; i < connections; i++) {
        channels.add(flood.connect());
      }
      Flood.awaitReady(channels, TimeUnit.MINUTES.toSeconds(HANG_GUARD_MINUTES));
      start = System.nanoTime();
      List<CompletableFuture<Flood.Client>> clients = new ArrayList<>();
      for (ManagedChannel channel : channels) {
        clients.add(flood.uploads(channel, calls, bodies, crc));
      }
      CompletableFuture<Void> all =
          CompletableFuture.allOf(clients.toArray(new CompletableFuture<?>[0]));
      long guard = System.nanoTime() + TimeUnit.MINUTES.toNanos(HANG_GUARD_MINUTES);
      while (!all.isDone() && System.nanoTime() - guard < 0) {
        pinned = Math.max(pinned, flood.serverPinnedBytes());
        try {
          all.get(5, TimeUnit.MILLISECONDS);
        } catch (TimeoutException e) {
          // Sample again.
        }
      }
      for (CompletableFuture<Flood.Client> c : clients) {
        done.add(c.get(1, TimeUnit.SECONDS));
      }
    }
    double seconds = (System.nanoTime() - start) / 1e9;
    System.gc();
    long heapAfter = memory.getHeapMemoryUsage().getUsed();
    report(variant, connections, done, pinned, heapAfter - heapBefore, seconds,
        Metric.STREAMS_SHED.value() - shedBefore, Metric.PEERS_SLOWED.value() - slowedBefore);
  }

  private static void report(String variant, int connections, List<Flood.Client> clients,
      long pinned, long heapGrowth, double seconds, long shed, long slowed) {
    long ok = 0;
    long exhausted = 0;
    long unavailable = 0;
    long other = 0;
    long bytes = 0;
    for (Flood.Client c : clients) {
      for (Flood.Outcome o : c.outcomes()) {
        if (o.completedWithTheRightBytes()) {
          ok++;
          bytes += o.bytes();
        } else if (o.status().getCode() == Status.Code.RESOURCE_EXHAUSTED) {
          exhausted++;
        } else if (o.status().getCode() == Status.Code.UNAVAILABLE) {
          unavailable++;
        } else {
          other++;
        }
      }
    }
    double jain = Flood.fairness(clients);
    long neverFailed = clients.stream().filter(c -> !c.failed()).count();
    String budget = variant.equals("pinless")
        ? String.format("%.0f MiB", ProcessBudget.process().limitBytes() / 1048576.0) : "none";
    System.out.printf("%s, %d connections, budget %s: server pool pinned at most %.1f MiB; heap "
        + "after GC grew %.1f MiB; %.1f s, %.0f MB/s completed; calls: %d completed, %d "
        + "RESOURCE_EXHAUSTED, %d UNAVAILABLE, %d other; %d shed, %d peers slowed; Jain's index "
        + "%.3f over %d connections never failed%n",
        variant, connections, budget, pinned / 1048576.0, heapGrowth / 1048576.0, seconds,
        bytes / seconds / 1e6, ok, exhausted, unavailable, other, shed, slowed, jain,
        neverFailed);
  }
}
