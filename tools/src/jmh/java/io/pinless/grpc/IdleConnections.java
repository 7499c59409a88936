package io.pinless.grpc;

import io.grpc.CallOptions;
import io.grpc.ManagedChannel;
import io.grpc.stub.ClientCalls;
import io.grpc.stub.StreamObserver;
import io.netty.buffer.PooledByteBufAllocator;
import io.pinless.alts.handshake.LocalHandshakerMain;
import io.pinless.testing.PoolBytes;
import java.lang.management.ManagementFactory;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import javax.management.ObjectName;
import java.util.Locale;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;

/**
 * What an idle connection costs, pinless's plaintext and ALTS credentials against stock
 * grpc-netty's plaintext, in one run: N connections each make one call (a 1 KiB download) and are
 * left idle for 2 s; then the live heap and the pooled bytes still allocated are divided by N.
 * The connections open in two halves and the heap figure is the second half's (so what a
 * transport sets up once, with its first connections, is not in it). The live heap is the total of the JVM's class histogram of live objects ({@code
 * gcClassHistogram}, what {@code jmap -histo:live} prints, after a full collection), so a
 * variant's figure is the bytes its connections' objects hold, not a reading of the heap's
 * occupancy; the pool's heap chunks are left out of it (they are pooled memory). With {@code
 * --classes}, the classes that make a pinless variant's figure differ from its stock
 * counterpart's are listed per connection; {@code --tls} runs stock plaintext and the TLS
 * variants only. The last column is the growth of the process's resident memory outside the Java
 * heap over the second half, per connection: the TLS engines' native state with OpenSSL's. It
 * means that only with the heap committed and touched up front, as below.
 *
 * <pre>
 *   mvn -Ptools,jmh -DskipTests package &amp;&amp; java -Xms2g -Xmx2g -XX:+AlwaysPreTouch \
 *       -cp tools/target/benchmarks.jar io.pinless.grpc.IdleConnections [connections] [nio,epoll,io_uring_ring] [--classes] [--tls]
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
    List<String> rest = new ArrayList<>(List.of(args));
    boolean classes = rest.remove("--classes");
    boolean tlsOnly = rest.remove("--tls");
    int connections = rest.size() > 0 ? Integer.parseInt(rest.get(0)) : 1000;
    String[] transports = (rest.size() > 1 ? rest.get(1) : "nio,epoll,io_uring_ring").split(",");
    System.out.printf(Locale.ROOT, "%d idle connections, per connection (both ends):%n", connections);
    System.out.printf(Locale.ROOT, "%-14s %-20s %14s %22s %18s %16s%n", "transport", "variant",
        "heap bytes", "pooled bytes pinned", "pooled buffers", "outside heap");
    io.grpc.Server[] handshakers = {LocalHandshakerMain.start(0, "client-sa"), LocalHandshakerMain.start(0, "server-sa")};
    String[] alts = {
        LocalHandshakerMain.hostAndPort(handshakers[0]), LocalHandshakerMain.hostAndPort(handshakers[1])};
    try {
      // A first round of every variant, not reported, so that class loading, JIT and the crypto
      // providers' one-time setup are not charged to a variant's connections.
      measure(BenchTransport.Kind.NIO, "pinless", null, Math.min(connections, 100));
      measure(BenchTransport.Kind.NIO, "stock", null, Math.min(connections, 100));
      measure(BenchTransport.Kind.NIO, "pinless", alts, Math.min(connections, 100));
      for (String tls : BenchTransport.TLS_VARIANTS) {
        measure(BenchTransport.Kind.NIO, tls, null, Math.min(connections, 100));
      }
      for (String transport : transports) {
        BenchTransport.Kind kind = BenchTransport.Kind.parse(transport);
        Cost stock = measure(kind, "stock", null, connections);
        print(transport, "stock", stock, connections);
        Cost plain = tlsOnly ? null : measure(kind, "pinless", null, connections);
        Cost secure = tlsOnly ? null : measure(kind, "pinless", alts, connections);
        if (!tlsOnly) {
          print(transport, "pinless", plain, connections);
          print(transport, "pinless-alts", secure, connections);
        }
        Cost[] tls = new Cost[BenchTransport.TLS_VARIANTS.size()];
        for (int i = 0; i < tls.length; i++) {
          tls[i] = measure(kind, BenchTransport.TLS_VARIANTS.get(i), null, connections);
          print(transport, BenchTransport.TLS_VARIANTS.get(i), tls[i], connections);
        }
        if (classes && !tlsOnly) {
          printClasses(transport + " pinless - stock", plain, stock, connections);
          printClasses(transport + " pinless-alts - stock", secure, stock, connections);
        }
        if (classes) {
          for (int i = 0; i + 1 < tls.length; i += 2) {
            printClasses(transport + " " + BenchTransport.TLS_VARIANTS.get(i) + " - "
                + BenchTransport.TLS_VARIANTS.get(i + 1), tls[i], tls[i + 1], connections);
          }
        }
      }
    } finally {
      for (io.grpc.Server h : handshakers) {
        h.shutdownNow().awaitTermination(10, TimeUnit.SECONDS);
      }
    }
  }

  private static void print(String transport, String variant, Cost cost, int connections) {
    System.out.printf(Locale.ROOT, "%-14s %-20s %14d %22d %18.2f %16d%n",
        transport, variant, cost.heap / connections, cost.pooled / connections,
        (double) cost.buffers / connections, cost.outsideHeap / connections);
  }

  /** Lists the classes whose live bytes per connection differ by at least 4 B between two runs. */
  private static void printClasses(String title, Cost a, Cost b, int connections) {
    System.out.printf(Locale.ROOT, "  %s, bytes per connection by class:%n", title);
    Map<String, Long> diff = new HashMap<>();
    a.byClass.forEach((k, v) -> diff.merge(k, v, Long::sum));
    b.byClass.forEach((k, v) -> diff.merge(k, -v, Long::sum));
    diff.entrySet().stream()
        .filter(e -> Math.abs(e.getValue()) >= 4L * connections)
        .sorted((x, y) -> Long.compare(Math.abs(y.getValue()), Math.abs(x.getValue())))
        .forEach(e -> System.out.printf(
            Locale.ROOT, "  %+8.1f  %s%n", (double) e.getValue() / connections, e.getKey()));
  }

  /** What some idle connections hold: live heap (in all and by class) and pooled memory. */
  private static final class Cost {
    long heap;
    long pooled;
    long buffers;
    /** Growth of the process's resident memory outside the Java heap; -1 when unknown. */
    long outsideHeap;
    /** Live bytes by class name, after minus before. */
    final Map<String, Long> byClass = new HashMap<>();
  }

  /**
   * Opens {@code connections} in two halves, each connection making one call, and measures after
   * each half has been idle for a while: the pooled memory held against none open, the heap by the
   * second half alone (so that what the first connections of a transport set up once, such as
   * thread caches and tables, is not charged to connections).
   *
   * @return what the connections hold (heap: per connection of the second half, times all)
   */
  private static Cost measure(
      BenchTransport.Kind kind, String variant, String[] alts, int connections) throws Exception {
    // Direct, one arena each, no thread caches: numActiveBytes is what live buffers hold.
    PooledByteBufAllocator alloc =
        new PooledByteBufAllocator(true, 1, 1, 8192, 9, 0, 0, false);
    List<ManagedChannel> channels = new ArrayList<>();
    try (BenchTransport loop =
        new BenchTransport(kind, variant, alloc, BenchService.definition(), alts)) {
      // Each arena's first chunk (4 MiB) is made now, so the pool's fixed cost is not charged to
      // connections (pinless-tls on the JDK's engine uses heap buffers, the only heap arena user).
      alloc.heapBuffer(1).release();
      alloc.directBuffer(1).release();
      long pooledBefore = PoolBytes.pagesInUse(alloc);
      long buffersBefore = PoolBytes.liveBuffers(alloc);
      int firstHalf = connections / 2;
      openIdle(loop, channels, firstHalf);
      Map<String, Long> heapBefore = liveHeapByClass();
      long poolHeapBefore = alloc.metric().usedHeapMemory();
      long residentBefore = residentBytes();
      openIdle(loop, channels, connections - firstHalf);
      Cost cost = new Cost();
      liveHeapByClass().forEach((k, v) -> cost.byClass.merge(k, v, Long::sum));
      heapBefore.forEach((k, v) -> cost.byClass.merge(k, -v, Long::sum));
      // The pool's heap chunks (4 MiB arrays, made when a heap buffer first needs one) are pooled
      // memory, counted with the pooled bytes: they are left out of the heap figure.
      cost.byClass.merge("byte[]", -(alloc.metric().usedHeapMemory() - poolHeapBefore), Long::sum);
      double scale = (double) connections / (connections - firstHalf);
      cost.byClass.replaceAll((k, v) -> Math.round(v * scale));
      cost.heap = cost.byClass.values().stream().mapToLong(Long::longValue).sum();
      long residentAfter = residentBytes();
      cost.outsideHeap = residentBefore < 0 || residentAfter < 0
          ? -1 : Math.round((residentAfter - residentBefore) * scale);
      cost.pooled = PoolBytes.pagesInUse(alloc) - pooledBefore;
      cost.buffers = PoolBytes.liveBuffers(alloc) - buffersBefore;
      for (ManagedChannel channel : channels) {
        channel.shutdownNow();
      }
      for (ManagedChannel channel : channels) {
        channel.awaitTermination(10, TimeUnit.SECONDS);
      }
      return cost;
    }
  }

  /** Opens {@code count} more channels, each makes one call, and leaves them idle for a while. */
  private static void openIdle(BenchTransport loop, List<ManagedChannel> channels, int count)
      throws Exception {
    List<CompletableFuture<Void>> calls = new ArrayList<>();
    byte[] request = BenchService.request(1, 1024);
    for (int i = 0; i < count; i++) {
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
  }

  /**
   * The process's resident memory ({@code VmRSS}), or -1 off Linux. With a heap committed and
   * touched up front ({@code -Xms} = {@code -Xmx}, {@code -XX:+AlwaysPreTouch}) its growth is memory
   * outside the Java heap: the TLS engines' native state (BoringSSL's), pool chunks, JIT code.
   */
  private static long residentBytes() {
    try {
      for (String line : java.nio.file.Files.readAllLines(java.nio.file.Path.of("/proc/self/status"))) {
        if (line.startsWith("VmRSS:")) {
          return Long.parseLong(line.replaceAll("[^0-9]", "")) * 1024;
        }
      }
    } catch (java.io.IOException | RuntimeException e) {
      // not Linux
    }
    return -1;
  }

  /** Matches a class histogram's row: rank, instances, bytes, class name. */
  private static final Pattern HISTOGRAM_ROW =
      Pattern.compile("^\\s*\\d+:\\s+\\d+\\s+(\\d+)\\s+(\\S+)", Pattern.MULTILINE);

  /**
   * Live heap bytes by class: the JVM's class histogram of live objects, taken in this process
   * through the diagnostic command MBean (a full collection first, as {@code jmap -histo:live}).
   */
  private static Map<String, Long> liveHeapByClass() throws Exception {
    // Engines of connections closed before (OpenSSL's OpenSslEngine has a finalizer) stay
    // reachable until finalized: finalized first, so no variant is charged with another's.
    System.gc();
    System.runFinalization();
    String histogram =
        (String)
            ManagementFactory.getPlatformMBeanServer()
                .invoke(
                    new ObjectName("com.sun.management:type=DiagnosticCommand"),
                    "gcClassHistogram",
                    new Object[] {new String[0]},
                    new String[] {String[].class.getName()});
    Map<String, Long> bytes = new HashMap<>();
    Matcher row = HISTOGRAM_ROW.matcher(histogram);
    while (row.find()) {
      bytes.merge(row.group(2), Long.parseLong(row.group(1)), Long::sum);
    }
    if (bytes.isEmpty()) {
      throw new IllegalStateException("no class histogram: " + histogram);
    }
    return bytes;
  }
}
