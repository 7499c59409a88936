package io.pinless.grpc;

import io.grpc.ManagedChannel;
import io.netty.buffer.PooledByteBufAllocator;
import io.pinless.alts.handshake.LocalHandshakerMain;
import io.pinless.testing.FaultProxy;
import io.pinless.testing.PoolBytes;
import java.net.InetSocketAddress;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;

/**
 * What connections stalled in the middle of a response pin on the receiving end: N clients each
 * ask for one message of {@code response} bytes through a proxy that forwards {@code received}
 * bytes of it and then holds the rest, as a network or a server that stops mid-message. When the
 * clients have read all that arrived, the pooled bytes their buffers hold (the clients' own
 * allocator: the server's outbound buffers are not counted) are divided by the bytes received.
 * Then the proxy forwards the rest and every call must complete with all its bytes.
 *
 * <pre>
 *   java -cp tools/target/benchmarks.jar io.pinless.grpc.StalledConnections [connections] [received] [response] [variants] [rounds]
 * </pre>
 *
 * <p>Defaults: 100 connections, 100,000 bytes received of a 1 MiB response, every variant
 * (pinless, stock, pinless-alts and the TLS variants), 2 rounds.
 */
public final class StalledConnections {
  /** How long connections are left idle before the stalled calls begin. */
  private static final long SETTLE_MILLIS = 2000;

  private StalledConnections() {}

  /** Runs the variants in turn and prints one row per variant and round. */
  public static void main(String[] args) throws Exception {
    int connections = args.length > 0 ? Integer.parseInt(args[0]) : 100;
    long received = args.length > 1 ? Long.parseLong(args[1]) : 100_000;
    int response = args.length > 2 ? Integer.parseInt(args[2]) : 1 << 20;
    List<String> variants = new ArrayList<>(List.of("pinless", "stock", "pinless-alts"));
    variants.addAll(BenchTransport.TLS_VARIANTS);
    if (args.length > 3) {
      variants = List.of(args[3].split(","));
    }
    int rounds = args.length > 4 ? Integer.parseInt(args[4]) : 2;
    io.grpc.Server[] handshakers = {
        LocalHandshakerMain.start(0, "client-sa"), LocalHandshakerMain.start(0, "server-sa")};
    String[] alts = {
        LocalHandshakerMain.hostAndPort(handshakers[0]), LocalHandshakerMain.hostAndPort(handshakers[1])};
    try {
      for (String variant : variants) {
        measure(variant, alts, Math.min(connections, 10), received, response); // warm-up
      }
      System.out.printf(Locale.ROOT,
          "%d connections stalled after %d bytes of a %d-byte response, per connection:%n",
          connections, received, response);
      System.out.printf(Locale.ROOT, "%-20s %10s %14s %16s %14s%n", "variant", "received",
          "pooled pinned", "pinned/received", "pooled bufs");
      for (int round = 0; round < rounds; round++) {
        for (String variant : variants) {
          Result r = measure(variant, alts, connections, received, response);
          System.out.printf(Locale.ROOT, "%-20s %10d %14d %16.2f %14.1f%n", variant,
              r.received / connections, r.pooled / connections, (double) r.pooled / r.received,
              (double) r.buffers / connections);
        }
      }
    } finally {
      for (io.grpc.Server h : handshakers) {
        h.shutdownNow().awaitTermination(10, TimeUnit.SECONDS);
      }
    }
  }

  /** One variant's figures, all connections together. */
  private record Result(long received, long pooled, long buffers) {}

  private static Result measure(
      String variant, String[] alts, int connections, long received, int response)
      throws Exception {
    boolean isAlts = variant.equals("pinless-alts");
    // The clients' pool: direct, one arena, no thread caches, so active bytes are what buffers
    // hold. The server gets a pool of its own.
    PooledByteBufAllocator clientAlloc =
        new PooledByteBufAllocator(true, 1, 1, 8192, 9, 0, 0, false);
    PooledByteBufAllocator serverAlloc = new PooledByteBufAllocator(true);
    List<ManagedChannel> channels = new ArrayList<>();
    try (BenchTransport loop = new BenchTransport(BenchTransport.Kind.NIO,
            isAlts ? "pinless" : variant, serverAlloc, clientAlloc, BenchService.definition(),
            isAlts ? alts : null);
        FaultProxy proxy = new FaultProxy(
            ((InetSocketAddress) loop.server.getListenSockets().get(0)).getPort())) {
      clientAlloc.heapBuffer(1).release();
      clientAlloc.directBuffer(1).release();
      InetSocketAddress target = new InetSocketAddress("127.0.0.1", proxy.port());
      List<CompletableFuture<Long>> warm = new ArrayList<>();
      for (int i = 0; i < connections; i++) {
        ManagedChannel channel = loop.newChannel(target);
        channels.add(channel);
        warm.add(BenchService.downloadAsync(channel, BenchService.request(1, 1024)));
      }
      for (CompletableFuture<Long> call : warm) {
        call.get(60, TimeUnit.SECONDS);
      }
      Thread.sleep(SETTLE_MILLIS);
      long pooledBefore = PoolBytes.pagesInUse(clientAlloc);
      long buffersBefore = PoolBytes.liveBuffers(clientAlloc);

      proxy.stallAfter(received);
      List<CompletableFuture<Long>> calls = new ArrayList<>();
      for (ManagedChannel channel : channels) {
        calls.add(BenchService.downloadAsync(channel, BenchService.request(1, response)));
      }
      long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
      while (proxy.stalled() < connections) {
        if (System.nanoTime() > deadline) {
          throw new IllegalStateException(
              variant + ": " + proxy.stalled() + " of " + connections + " connections stalled");
        }
        Thread.sleep(10);
      }
      awaitSteady(clientAlloc);
      Result result = new Result(proxy.forwardedSinceStall(),
          PoolBytes.pagesInUse(clientAlloc) - pooledBefore,
          PoolBytes.liveBuffers(clientAlloc) - buffersBefore);

      proxy.resume();
      for (CompletableFuture<Long> call : calls) {
        long got = call.get(60, TimeUnit.SECONDS);
        if (got != response) {
          throw new IllegalStateException(variant + ": received " + got + " of " + response);
        }
      }
      for (ManagedChannel channel : channels) {
        channel.shutdownNow();
      }
      for (ManagedChannel channel : channels) {
        channel.awaitTermination(10, TimeUnit.SECONDS);
      }
      return result;
    }
  }

  /** Waits until the clients' pool has not changed for a second (they have read what came). */
  private static void awaitSteady(PooledByteBufAllocator alloc) throws InterruptedException {
    long last = -1;
    long steadySince = System.nanoTime();
    while (System.nanoTime() - steadySince < TimeUnit.SECONDS.toNanos(1)) {
      long now = PoolBytes.pagesInUse(alloc) + PoolBytes.liveBuffers(alloc);
      if (now != last) {
        last = now;
        steadySince = System.nanoTime();
      }
      Thread.sleep(100);
    }
  }
}
