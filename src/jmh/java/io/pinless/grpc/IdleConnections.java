package io.pinless.grpc;

import io.grpc.CallOptions;
import io.grpc.ManagedChannel;
import io.grpc.stub.ClientCalls;
import io.grpc.stub.StreamObserver;
import io.netty.buffer.PoolArenaMetric;
import io.pinless.alts.handshake.LocalHandshakerMain;
import io.netty.buffer.PoolChunkListMetric;
import io.netty.buffer.PoolChunkMetric;
import io.netty.buffer.PooledByteBufAllocator;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;

/**
 * What an idle connection costs, pinless's plaintext and ALTS credentials against stock
 * grpc-netty's plaintext, in one run: N connections each make one call (a 1 KiB download) and are
 * left idle for 2 s; then the heap after collection and the pooled bytes still allocated are
 * divided by N.
 *
 * <pre>
 *   mvn -Pjmh -DskipTests package &amp;&amp; java -cp target/benchmarks.jar io.pinless.grpc.IdleConnections [connections] [nio,epoll,io_uring_ring]
 * </pre>
 *
 * <p>Each variant gets its own pooled allocator, with thread caches off so that what the pool
 * reports as active is exactly what buffers hold, on both ends (client and server share the
 * process; the figures are per connection, both ends together). A provided-buffer ring's own
 * buffers belong to its event loop, not to a connection, and are in the baseline.
 */
public final class IdleConnections {
  /** How long connections are left idle before they are measured. */
  private static final long SETTLE_MILLIS = 2000;

  private IdleConnections() {}

  /** Runs every transport given (default all) with both variants and prints a table. */
  public static void main(String[] args) throws Exception {
    int connections = args.length > 0 ? Integer.parseInt(args[0]) : 1000;
    String[] transports =
        (args.length > 1 ? args[1] : "nio,epoll,io_uring_ring").split(",");
    System.out.printf(Locale.ROOT, "%d idle connections, per connection (both ends):%n", connections);
    System.out.printf(Locale.ROOT, "%-14s %-12s %14s %22s %18s%n",
        "transport", "variant", "heap bytes", "pooled bytes pinned", "pooled buffers");
    io.grpc.Server[] handshakers = {LocalHandshakerMain.start(0, "client-sa"), LocalHandshakerMain.start(0, "server-sa")};
    String[] alts = {
        LocalHandshakerMain.hostAndPort(handshakers[0]), LocalHandshakerMain.hostAndPort(handshakers[1])};
    try {
      // A first round of every variant, not reported, so that class loading, JIT and the crypto
      // providers' one-time setup are not charged to a variant's connections.
      measure(BenchTransport.Kind.NIO, true, null, Math.min(connections, 100));
      measure(BenchTransport.Kind.NIO, false, null, Math.min(connections, 100));
      measure(BenchTransport.Kind.NIO, true, alts, Math.min(connections, 100));
      for (String transport : transports) {
        BenchTransport.Kind kind = BenchTransport.Kind.parse(transport);
        print(transport, "pinless", measure(kind, true, null, connections), connections);
        print(transport, "stock", measure(kind, false, null, connections), connections);
        print(transport, "pinless-alts", measure(kind, true, alts, connections), connections);
      }
    } finally {
      for (io.grpc.Server h : handshakers) {
        h.shutdownNow().awaitTermination(10, TimeUnit.SECONDS);
      }
    }
  }

  private static void print(String transport, String variant, long[] cost, int connections) {
    System.out.printf(Locale.ROOT, "%-14s %-12s %14d %22d %18.2f%n",
        transport, variant, cost[0] / connections, cost[1] / connections,
        (double) cost[2] / connections);
  }

  /** @return heap bytes, pooled bytes and pooled buffers held by {@code connections} idle ones */
  private static long[] measure(
      BenchTransport.Kind kind, boolean pinless, String[] alts, int connections) throws Exception {
    // Direct, one arena each, no thread caches: numActiveBytes is what live buffers hold.
    PooledByteBufAllocator alloc =
        new PooledByteBufAllocator(true, 1, 1, 8192, 9, 0, 0, false);
    List<ManagedChannel> channels = new ArrayList<>();
    try (BenchTransport loop =
        new BenchTransport(kind, pinless, alloc, BenchService.definition(), alts)) {
      long heapBefore = heapAfterCollection();
      long pooledBefore = activeBytes(alloc);
      long buffersBefore = activeBuffers(alloc);
      List<CompletableFuture<Void>> calls = new ArrayList<>();
      byte[] request = BenchService.request(1, 1024);
      for (int i = 0; i < connections; i++) {
        ManagedChannel channel = loop.newChannel();
        channels.add(channel);
        CompletableFuture<Void> done = new CompletableFuture<>();
        ClientCalls.asyncServerStreamingCall(
            channel.newCall(BenchService.DOWNLOAD, CallOptions.DEFAULT), request,
            new StreamObserver<Integer>() {
              @Override
              public void onNext(Integer value) {}

              @Override
              public void onError(Throwable t) {
                done.completeExceptionally(t);
              }

              @Override
              public void onCompleted() {
                done.complete(null);
              }
            });
        calls.add(done);
      }
      for (CompletableFuture<Void> call : calls) {
        call.get(60, TimeUnit.SECONDS);
      }
      // Idle means idle for a while: as in pinless compare's idle phase, 2 s (a pinless connection
      // gives back its read budget's table at most 1.28 s after its last read).
      Thread.sleep(SETTLE_MILLIS);
      long heap = heapAfterCollection() - heapBefore;
      long pooled = activeBytes(alloc) - pooledBefore;
      long buffers = activeBuffers(alloc) - buffersBefore;
      for (ManagedChannel channel : channels) {
        channel.shutdownNow();
      }
      for (ManagedChannel channel : channels) {
        channel.awaitTermination(10, TimeUnit.SECONDS);
      }
      return new long[] {heap, pooled, buffers};
    }
  }

  /** Bytes of the pool's chunks in use (page granularity), heap and direct arenas. */
  private static long activeBytes(PooledByteBufAllocator alloc) {
    long bytes = 0;
    List<PoolArenaMetric> arenas = new ArrayList<>(alloc.metric().directArenas());
    arenas.addAll(alloc.metric().heapArenas());
    for (PoolArenaMetric arena : arenas) {
      for (PoolChunkListMetric list : arena.chunkLists()) {
        for (PoolChunkMetric chunk : list) {
          bytes += chunk.chunkSize() - chunk.freeBytes();
        }
      }
      bytes += arena.numActiveHugeAllocations() == 0 ? 0 : hugeBytes(arena);
    }
    return bytes;
  }

  /** Pooled buffers allocated and not yet released, heap and direct. */
  private static long activeBuffers(PooledByteBufAllocator alloc) {
    long buffers = 0;
    for (PoolArenaMetric arena : alloc.metric().directArenas()) {
      buffers += arena.numActiveAllocations();
    }
    for (PoolArenaMetric arena : alloc.metric().heapArenas()) {
      buffers += arena.numActiveAllocations();
    }
    return buffers;
  }

  /** Huge (unpooled) allocations are rare here; count them at the pool's chunk size each. */
  private static long hugeBytes(PoolArenaMetric arena) {
    return arena.numActiveHugeAllocations() * (8192L << 9);
  }

  private static long heapAfterCollection() {
    Runtime rt = Runtime.getRuntime();
    long used = Long.MAX_VALUE;
    for (int i = 0; i < 4; i++) {
      System.gc();
      used = Math.min(used, rt.totalMemory() - rt.freeMemory());
    }
    return used;
  }
}
