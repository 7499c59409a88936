package io.pinless.compare;

import com.google.gson.GsonBuilder;
import com.google.gson.JsonObject;
import io.grpc.ManagedChannel;
import io.pinless.PinlessMetrics.Metric;
import java.io.PrintStream;
import java.lang.ref.ReferenceQueue;
import java.lang.ref.WeakReference;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Locale;
import java.util.concurrent.TimeUnit;
import java.util.function.LongSupplier;

/**
 * One variant's client end, in a JVM of its own (so that pools and JIT state do not mix): the
 * download loop, the small-message phase and the idle phase (those {@code --phases} names), one
 * after the other. Their server end runs in one more JVM ({@link ServerEnd}): one for the download
 * and small phases, a fresh one for the idle phase ({@link IdlePhase}). Each phase reports each
 * process's own figures, the client's first. The result goes to a JSON file, progress to standard
 * output.
 *
 * <pre>
 *   VariantRun --variant pinless-alts --handshakers host:port,host:port --result file [phase options]
 * </pre>
 */
public final class VariantRun {
  /** Lines starting so are progress; {@link Compare} shows them as they come. */
  static final String PROGRESS = "progress: ";
  private static final double MB = 1e6;
  /** The warm-up's slices once {@code --warmup} has passed. */
  private static final long JIT_SLICE_MILLIS = 2_000;
  /** The JIT has settled when it compiled for at most this share of a slice. */
  private static final double SETTLED_JIT_SHARE = 0.10;

  private static final double MIB = 1 << 20;
  private final Variant variant;
  private final Options options;
  private final PrintStream out;

  private VariantRun(Variant variant, Options options, PrintStream out) {
    this.variant = variant;
    this.options = options;
    this.out = out;
  }

  /** Runs one variant; see the class comment for the arguments. */
  public static void main(String[] args) throws Exception {
    if (args.length < 6 || !"--variant".equals(args[0]) || !"--handshakers".equals(args[2])
        || !"--result".equals(args[4])) {
      System.err.println("usage: VariantRun --variant v --handshakers a,b --result file [options]");
      System.exit(2);
    }
    Path resultFile = Path.of(args[5]);
    JsonObject result;
    int status = 0;
    try {
      Variant variant = Variant.byName(args[1]);
      if (variant == null) {
        throw new IllegalArgumentException("unknown variant " + args[1]);
      }
      Options options = Options.parse(Arrays.copyOfRange(args, 6, args.length));
      result = new VariantRun(variant, options, System.out).run(args[3]);
    } catch (Throwable t) {
      t.printStackTrace();
      result = new JsonObject();
      result.addProperty("variant", args[1]);
      result.addProperty("completed", false);
      result.addProperty("error", String.valueOf(t));
      status = 1;
    }
    reportLeaks();
    Files.writeString(resultFile, new GsonBuilder().setPrettyPrinting().create().toJson(result),
        StandardCharsets.UTF_8);
    System.out.flush();
    System.exit(status);
  }

  private JsonObject run(String handshakers) throws Exception {
    JsonObject result = new JsonObject();
    result.addProperty("variant", variant.name);
    try (Variant.Stack stack = variant.open(options.transport, handshakers.split(","))) {
      result.addProperty("transport", stack.transportUsed());
      if (variant.tls()) {
        result.addProperty("tlsEngine", Variant.TLS_PROVIDER.name());
      }
      if (options.phases.contains("download") || options.phases.contains("small")) {
        try (RemoteServerEnd server = RemoteServerEnd.start(variant, handshakers, options, out)) {
          int port = server.port();
          progress("download and small: %d clients in this JVM, the server end in a JVM of its"
              + " own (port %d)", options.clients, port);
          List<ManagedChannel> clients = new ArrayList<>();
          try {
            for (int i = 0; i < options.clients; i++) {
              clients.add(stack.newChannel(port));
            }
            if (options.phases.contains("download")) {
              result.add("download", download(stack, server, clients));
            }
            if (options.phases.contains("small")) {
              result.add("small", small(stack, server, clients));
            }
          } finally {
            shutdown(clients);
          }
        }
      }
      if (options.phases.contains("idle")) {
        result.add("idle", new IdlePhase(variant, options, out).run(stack, handshakers));
      }
    }
    result.addProperty("completed", true);
    return result;
  }

  private JsonObject download(Variant.Stack stack, RemoteServerEnd server,
      List<ManagedChannel> clients) throws Exception {
    Marshalling.Download download = options.marshaller.download(variant);
    double warmedSeconds = warmUp("download", server, deadline -> Workload.downloadLoop(clients,
        download, options.objectBytes, options.messageBytes, deadline, new Latencies()));
    Latencies latencies = new Latencies();
    progress("download: %d clients, %d-byte objects in %d-byte messages (%s), for %d ms",
        options.clients, options.objectBytes, options.messageBytes, options.marshaller.name,
        options.durationMillis);
    long[] copiedBefore = copiedCounts();
    server.begin();
    long start = System.nanoTime();
    long bytes;
    JsonObject client;
    try (MemoryMonitor memory =
            new MemoryMonitor(stack::pinnedDirectBytes, stack::reservedDirectBytes);
        Ticker ticker = new Ticker("download", "objects", latencies::count)) {
      bytes = Workload.downloadLoop(clients, download, options.objectBytes, options.messageBytes,
          start + TimeUnit.MILLISECONDS.toNanos(options.durationMillis), latencies);
      client = memory.stop();
    }
    double seconds = (System.nanoTime() - start) / 1e9;
    long[] copiedAfter = copiedCounts();
    JsonObject serverEnd = server.end();
    JsonObject o = new JsonObject();
    o.addProperty("seconds", round(seconds));
    o.addProperty("warmupSeconds", round(warmedSeconds));
    o.addProperty("objects", latencies.count());
    o.addProperty("payloadBytes", bytes);
    o.addProperty("throughputMBps", round(bytes / MB / seconds));
    o.add("latencyMillis", percentiles(latencies, 1e6));
    o.add("client", PhaseFigures.perByte(client, bytes));
    o.add("server", PhaseFigures.perByte(serverEnd, bytes));
    PhaseFigures.bothEndsPerByte(o, bytes);
    addCopies(o, copiedBefore, copiedAfter, bytes);
    // Both JVMs' JIT compilers' time within the measured window (their threads' elapsed compile
    // time, summed): on two cores, compilation still going on takes CPU from the event loops.
    double jitSeconds = Double.NaN;
    if (client.has("jitSeconds") && serverEnd.has("jitSeconds")) {
      jitSeconds =
          client.get("jitSeconds").getAsDouble() + serverEnd.get("jitSeconds").getAsDouble();
      o.addProperty("jitSeconds", round(jitSeconds));
    }
    progress("download: %.0f MB/s; client: %.2f CPU ns per byte, pooled direct pinned %.2f MiB"
            + " mean, pool reserved %.2f MiB mean, pinless's buffers held by gRPC %.2f MiB mean;"
            + " server end: %.2f CPU ns per byte; JIT compiling for %.1f s of the %.0f s",
        bytes / MB / seconds, client.get("cpuNanosPerPayloadByte").getAsDouble(),
        client.get("pooledDirectPinnedMeanBytes").getAsDouble() / MIB,
        client.get("poolReservedMeanBytes").getAsDouble() / MIB,
        client.get("pinlessHeldDownstreamMeanBytes").getAsDouble() / MIB,
        serverEnd.get("cpuNanosPerPayloadByte").getAsDouble(),
        jitSeconds, seconds);
    return o;
  }

  /**
   * Bytes pinless copied so far: DATA frames, records, messages, and messages the zero-copy
   * marshaller parsed by copying (this JVM runs one variant).
   */
  private static long[] copiedCounts() {
    return new long[] {
      Metric.DATA_BYTES_COPIED.value(), Metric.RECORD_BYTES_COPIED.value(),
      Metric.MESSAGE_BYTES_COPIED.value(), Marshalling.COPIED_MESSAGE_BYTES.sum()};
  }

  /**
   * Adds how many times each payload byte was copied between the socket's read buffer and the
   * message the application got, and how that figure is made:
   *
   * <pre>
   *   pinless: (DATA_BYTES_COPIED + RECORD_BYTES_COPIED + MESSAGE_BYTES_COPIED
   *             + bytes of messages the zero-copy marshaller parsed by copying) / payload bytes
   *            + the record layer's decrypting copies ({@link Variant#cipherCopies})
   *            + the parse's copies unless it is the zero-copy marshaller's, which counts its own
   *              (once per byte; the fallback's second copy is the term above)
   *   stock:   at least the decrypting copies + the parse's copies; grpc-netty's cumulation and
   *            grpc-alts's copies before decrypting are not counted
   * </pre>
   */
  private void addCopies(JsonObject o, long[] before, long[] after, long payloadBytes) {
    int known = variant.cipherCopies()
        + (options.marshaller.zeroCopy(variant) ? 0 : options.marshaller.parseCopies);
    if (!variant.pinless()) {
      o.addProperty("copiesPerPayloadByte", known);
      o.addProperty("copiesLowerBound", true);
      o.addProperty("copiesFormula", String.format(Locale.ROOT,
          "at least %d: %d decrypting, %d by the parse (%s); the transport's own copies are not"
              + " counted", known, variant.cipherCopies(), known - variant.cipherCopies(),
          options.marshaller.parser(variant)));
      return;
    }
    long data = after[0] - before[0];
    long records = after[1] - before[1];
    long messages = after[2] - before[2];
    long fallback = after[3] - before[3];
    double counted = (double) (data + records + messages + fallback) / payloadBytes;
    JsonObject copied = new JsonObject();
    copied.addProperty("dataFrameBytes", data);
    copied.addProperty("recordBytes", records);
    copied.addProperty("messageBytes", messages);
    copied.addProperty("messageBytesParsedByCopying", fallback);
    o.add("pinlessCopiedBytes", copied);
    o.addProperty("copiesPerPayloadByte", round4(counted + known));
    o.addProperty("copiesLowerBound", false);
    o.addProperty("copiesFormula", String.format(Locale.ROOT,
        "(DATA %d + RECORD %d + MESSAGE %d + fallback's second copy %d bytes) / %d payload bytes"
            + " = %.4f, + %d known (%d decrypting, %d by the parse, %s)", data, records, messages,
        fallback, payloadBytes, counted, known, variant.cipherCopies(),
        known - variant.cipherCopies(), options.marshaller.parser(variant)));
  }

  private JsonObject small(Variant.Stack stack, RemoteServerEnd server,
      List<ManagedChannel> clients) throws Exception {
    byte[] message = new byte[options.smallBytes];
    Arrays.fill(message, (byte) 'p');
    warmUp("small", server, deadline -> Workload.echoLoop(clients, message, options.inFlight,
        deadline, new Latencies()));
    Latencies latencies = new Latencies();
    progress("small: %d clients, %d unary calls of %d bytes each in flight, for %d ms",
        options.clients, options.inFlight, options.smallBytes, options.durationMillis);
    server.begin();
    long start = System.nanoTime();
    long calls;
    JsonObject client;
    try (MemoryMonitor memory =
            new MemoryMonitor(stack::pinnedDirectBytes, stack::reservedDirectBytes);
        Ticker ticker = new Ticker("small", "calls", latencies::count)) {
      calls = Workload.echoLoop(clients, message, options.inFlight,
          start + TimeUnit.MILLISECONDS.toNanos(options.durationMillis), latencies);
      client = memory.stop();
    }
    double seconds = (System.nanoTime() - start) / 1e9;
    JsonObject serverEnd = server.end();
    long bytes = 2L * calls * options.smallBytes;
    JsonObject o = new JsonObject();
    o.addProperty("seconds", round(seconds));
    o.addProperty("calls", calls);
    o.addProperty("callsPerSecond", round(calls / seconds));
    o.addProperty("payloadBytes", bytes);
    o.addProperty("throughputMBps", round(bytes / MB / seconds));
    o.add("latencyMicros", percentiles(latencies, 1e3));
    o.add("client", PhaseFigures.perCall(PhaseFigures.perByte(client, bytes), calls));
    o.add("server", PhaseFigures.perCall(PhaseFigures.perByte(serverEnd, bytes), calls));
    PhaseFigures.bothEndsPerByte(o, bytes);
    PhaseFigures.bothEndsPerCall(o, calls);
    progress("small: %.0f calls/s; client: %.1f CPU us per call, pooled direct pinned %.2f MiB"
            + " mean; server end: %.1f CPU us per call", calls / seconds,
        client.get("cpuMicrosPerCall").getAsDouble(),
        client.get("pooledDirectPinnedMeanBytes").getAsDouble() / MIB,
        serverEnd.get("cpuMicrosPerCall").getAsDouble());
    return o;
  }

  /** Shuts {@code channels} down now and waits for each (up to 10 s). */
  static void shutdown(List<ManagedChannel> channels) throws InterruptedException {
    for (ManagedChannel channel : channels) {
      channel.shutdownNow();
    }
    for (ManagedChannel channel : channels) {
      channel.awaitTermination(10, TimeUnit.SECONDS);
    }
  }

  private static JsonObject percentiles(Latencies latencies, double unitNanos) {
    JsonObject o = new JsonObject();
    o.addProperty("p50", round(latencies.percentileNanos(50) / unitNanos));
    o.addProperty("p90", round(latencies.percentileNanos(90) / unitNanos));
    o.addProperty("p99", round(latencies.percentileNanos(99) / unitNanos));
    return o;
  }

  static double round(double v) {
    return Math.round(v * 10) / 10.0;
  }

  static double round4(double v) {
    return Math.round(v * 10_000) / 10_000.0;
  }

  private void progress(String format, Object... args) {
    progress(out, format, args);
  }

  /** Prints a progress line on {@code out}. */
  static void progress(PrintStream out, String format, Object... args) {
    out.println(PROGRESS + String.format(Locale.ROOT, format, args));
    out.flush();
  }

  /** A phase's loop, run until a deadline ({@link System#nanoTime()}). */
  private interface Loop {
    void runUntil(long deadlineNanos) throws Exception;
  }

  /**
   * Warms a phase up: runs its loop for {@code --warmup}, then on in slices of {@link
   * #JIT_SLICE_MILLIS} until the JIT compilers of both JVMs (this one and the server end's) have
   * compiled for at most {@link #SETTLED_JIT_SHARE} of a slice, or {@code --settle} has passed. On
   * two cores compilation that is still going on takes CPU from the event loops: a fixed 5 s
   * warm-up leaves the JIT compiling for much of a 15 s download window, and the rounds with the
   * most compiling are the slowest, for every variant.
   *
   * @return the seconds the warm-up took
   */
  private double warmUp(String phase, RemoteServerEnd server, Loop loop) throws Exception {
    progress("%s: warming up for %d ms, then until the JIT settles (at most %d ms more)", phase,
        options.warmupMillis, options.settleMillis);
    long start = System.nanoTime();
    loop.runUntil(start + TimeUnit.MILLISECONDS.toNanos(options.warmupMillis));
    long cap = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(options.settleMillis);
    long jit = jitMillis(server);
    double share = Double.NaN;
    while (jit >= 0 && System.nanoTime() - cap < 0) {
      long sliceStart = System.nanoTime();
      loop.runUntil(sliceStart + TimeUnit.MILLISECONDS.toNanos(JIT_SLICE_MILLIS));
      long now = jitMillis(server);
      share = (now - jit) / ((System.nanoTime() - sliceStart) / 1e6);
      jit = now;
      if (share <= SETTLED_JIT_SHARE) {
        break;
      }
    }
    double seconds = (System.nanoTime() - start) / 1e9;
    if (Double.isNaN(share)) {
      progress("%s: warmed up for %.1f s", phase, seconds);
    } else {
      progress("%s: warmed up for %.1f s; both JVMs' JIT compiled for %.0f%% of the last %d ms%s",
          phase, seconds, share * 100, JIT_SLICE_MILLIS,
          share <= SETTLED_JIT_SHARE ? "" : " (not settled: --settle ran out)");
    }
    return seconds;
  }

  /** Milliseconds both JVMs' JIT compilers have spent so far; -1 if either does not say. */
  private static long jitMillis(RemoteServerEnd server) throws Exception {
    long client = MemoryMonitor.jitMillis();
    long serverEnd = server.jitMillis();
    return client < 0 || serverEnd < 0 ? -1 : client + serverEnd;
  }

  /** Prints how far a phase has come every two seconds. */
  private final class Ticker implements AutoCloseable {
    private final Thread thread;

    Ticker(String phase, String unit, LongSupplier done) {
      long start = System.nanoTime();
      thread = new Thread(() -> {
        try {
          while (true) {
            Thread.sleep(2_000);
            progress("%s: %.0f s, %d %s so far", phase, (System.nanoTime() - start) / 1e9,
                done.getAsLong(), unit);
          }
        } catch (InterruptedException e) {
          // the phase is over
        }
      }, "pinless-compare-progress");
      thread.setDaemon(true);
      thread.start();
    }

    @Override
    public void close() throws InterruptedException {
      thread.interrupt();
      thread.join();
    }
  }

  /**
   * Makes Netty's leak detectors (both Netty copies) report what was collected unreleased: after
   * a collection, each tracked allocation polls its detector's queue. {@link Compare} counts the
   * reports in this JVM's output, which carries the server ends' output too.
   */
  static void reportLeaks() throws InterruptedException {
    for (int round = 0; round < 3; round++) {
      ReferenceQueue<Object> queue = new ReferenceQueue<>();
      WeakReference<Object> sentinel = new WeakReference<>(new Object(), queue);
      while (queue.remove(100) == null) {
        System.gc();
      }
      sentinel.clear();
      io.netty.buffer.PooledByteBufAllocator.DEFAULT.directBuffer(1).release();
      io.grpc.netty.shaded.io.netty.buffer.PooledByteBufAllocator.DEFAULT.directBuffer(1).release();
    }
  }
}
