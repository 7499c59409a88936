package io.pinless.compare;

import com.google.gson.JsonObject;
import com.google.gson.JsonParser;
import io.grpc.ManagedChannel;
import io.grpc.Server;
import io.pinless.alts.handshake.LocalHandshakerMain;
import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;

/**
 * Many ALTS connections handshaking at once: for pinless ALTS and grpc-alts, a server in one JVM
 * and a client in another (grpc-alts caps concurrent handshakes per process, and a client and a
 * server sharing one process and one cap can deadlock), the client opens N connections at the
 * same moment, each making one 1 KiB call, after storms of the same size to warm up and a wait
 * for every JVM's JIT compilers to go quiet. Measured: the time until every call has completed
 * (every connection READY and used once), and the longest stall of the client's and the
 * server's event loop (a task due every millisecond, and how late it ran), and each process's
 * CPU time during the storm.
 *
 * <pre>
 *   mvn -q -Ptools -DskipTests package &amp;&amp; java -cp tools/target/pinless-compare.jar io.pinless.compare.HandshakeStorm [connections] [transport] [warm-up storms]
 * </pre>
 */
public final class HandshakeStorm {
  private static final long PROBE_NANOS = TimeUnit.MILLISECONDS.toNanos(1);
  /** Warm-up storms before the one measured (each of the same size). */
  static final int DEFAULT_WARM_UPS = 2;
  /** How long the JIT compilers must have been idle before a storm is measured. */
  private static final long JIT_QUIET_MILLIS = 1000;
  /** The longest wait for them. */
  private static final long JIT_WAIT_MILLIS = 60_000;

  private HandshakeStorm() {}

  /** Runs both variants (or, with {@code --serve} / {@code --connect}, one end of one). */
  public static void main(String[] args) throws Exception {
    if (args.length > 0 && args[0].equals("--serve")) {
      serve(Variant.byName(args[1]), args[2], Transport.byName(args[3]));
      return;
    }
    if (args.length > 0 && args[0].equals("--connect")) {
      connect(Variant.byName(args[1]), args[2], Transport.byName(args[3]),
          Integer.parseInt(args[4]), Integer.parseInt(args[5]), Integer.parseInt(args[6]));
      return;
    }
    int connections = args.length > 0 ? Integer.parseInt(args[0]) : 500;
    Transport transport = args.length > 1 ? Transport.byName(args[1]) : Transport.NIO;
    int warmUps = args.length > 2 ? Integer.parseInt(args[2]) : DEFAULT_WARM_UPS;
    if (connections < 1 || transport == null || warmUps < 0) {
      System.err.println(
          "usage: HandshakeStorm [connections >= 1] [nio|epoll|io_uring|io_uring_noring] "
              + "[warm-up storms >= 0]");
      System.exit(2);
    }
    List<JsonObject> results = run(connections, transport, warmUps, System.out);
    System.exit(results.stream().allMatch(r -> r.get("failed").getAsInt() == 0) ? 0 : 1);
  }

  /** Runs the storm for pinless ALTS and grpc-alts and prints a table; returns their results. */
  static List<JsonObject> run(int connections, Transport transport, int warmUps, PrintStream out)
      throws Exception {
    Server clientHandshaker = LocalHandshakerMain.start(0, "client-sa");
    Server serverHandshaker = LocalHandshakerMain.start(0, "server-sa");
    List<JsonObject> results = new ArrayList<>();
    try {
      for (Variant variant : List.of(Variant.PINLESS_ALTS, Variant.STOCK_ALTS)) {
        out.printf(Locale.ROOT, "[%s] %d connections handshaking at once...%n", variant.name, connections);
        results.add(runOne(variant, transport, connections, warmUps,
            LocalHandshakerMain.hostAndPort(clientHandshaker),
            LocalHandshakerMain.hostAndPort(serverHandshaker)));
      }
    } finally {
      clientHandshaker.shutdownNow().awaitTermination(10, TimeUnit.SECONDS);
      serverHandshaker.shutdownNow().awaitTermination(10, TimeUnit.SECONDS);
    }
    out.printf(Locale.ROOT, "%n%d connections at once, %s, client and server in separate JVMs:%n",
        connections, transport.name);
    out.printf(Locale.ROOT, "%-14s %16s %8s %30s %30s %42s%n", "variant", "all called (s)", "failed",
        "client loop stall (ms, on CPU)", "server loop stall (ms, on CPU)",
        "CPU s: client (its JIT) / server / handshakers");
    for (JsonObject r : results) {
      out.printf(Locale.ROOT, "%-14s %16.2f %8d %30s %30s %42s%n", r.get("variant").getAsString(),
          r.get("seconds").getAsDouble(), r.get("failed").getAsInt(),
          r.get("clientStallMillis").getAsDouble() + " (" + r.get("clientStallCpuMillis").getAsDouble() + ")",
          r.get("serverStallMillis").getAsDouble() + " (" + r.get("serverStallCpuMillis").getAsDouble() + ")",
          r.get("clientCpuSeconds").getAsDouble() + " (" + r.get("clientJitSeconds").getAsDouble()
              + ") / " + r.get("serverCpuSeconds").getAsDouble() + " / "
              + r.get("handshakersCpuSeconds").getAsDouble());
    }
    out.printf(Locale.ROOT, "grpc-alts time / pinless time: %.2f%n",
        results.get(1).get("seconds").getAsDouble() / results.get(0).get("seconds").getAsDouble());
    return results;
  }

  private static JsonObject runOne(Variant variant, Transport transport, int connections,
      int warmUps, String clientHandshaker, String serverHandshaker) throws Exception {
    List<String> serve = Compare.javaCommand(HandshakeStorm.class);
    serve.addAll(List.of("--serve", variant.name, serverHandshaker, transport.name));
    Process server = new ProcessBuilder(serve).redirectErrorStream(true).start();
    try (BufferedReader serverOut = new BufferedReader(
        new InputStreamReader(server.getInputStream(), StandardCharsets.UTF_8))) {
      int port = Integer.parseInt(awaitLine(serverOut, "port ").trim());
      List<String> connect = Compare.javaCommand(HandshakeStorm.class);
      connect.addAll(List.of("--connect", variant.name, clientHandshaker, transport.name,
          Integer.toString(port), Integer.toString(connections), Integer.toString(warmUps)));
      Process client = new ProcessBuilder(connect).redirectErrorStream(true).start();
      JsonObject result;
      try (BufferedReader clientOut = new BufferedReader(
          new InputStreamReader(client.getInputStream(), StandardCharsets.UTF_8))) {
        // Both ends warmed up: the server starts watching its loop, then (once this JVM's
        // handshakers are compiled too) the storm starts.
        awaitLine(clientOut, "warmed");
        tell(server, "measure");
        awaitLine(serverOut, "measuring");
        awaitJitQuiet();
        long handshakersCpu = MemoryMonitor.processCpuNanos();
        tell(client, "go");
        result = JsonParser.parseString(awaitLine(clientOut, "result ")).getAsJsonObject();
        result.addProperty("handshakersCpuSeconds",
            Math.round((MemoryMonitor.processCpuNanos() - handshakersCpu) / 1e7) / 100.0);
      } finally {
        client.destroy();
        client.waitFor(30, TimeUnit.SECONDS);
      }
      tell(server, "stop");
      String[] stall = awaitLine(serverOut, "stall-ms ").split(" ");
      result.addProperty("serverStallMillis", Math.round(Double.parseDouble(stall[0]) * 10) / 10.0);
      result.addProperty("serverStallCpuMillis", Math.round(Double.parseDouble(stall[1]) * 10) / 10.0);
      result.addProperty("serverCpuSeconds", Math.round(Double.parseDouble(stall[2]) * 100) / 100.0);
      result.addProperty("variant", variant.name);
      return result;
    } finally {
      server.destroy();
      server.waitFor(30, TimeUnit.SECONDS);
    }
  }

  private static void tell(Process process, String line) throws IOException {
    process.getOutputStream().write((line + "\n").getBytes(StandardCharsets.US_ASCII));
    process.getOutputStream().flush();
  }

  /** Reads lines until one starts with {@code prefix}; returns the rest of it. */
  private static String awaitLine(BufferedReader in, String prefix) throws IOException {
    StringBuilder seen = new StringBuilder();
    for (String line; (line = in.readLine()) != null; ) {
      if (line.startsWith(prefix)) {
        return line.substring(prefix.length());
      }
      seen.append(line).append('\n');
      if (seen.length() > 20_000) {
        seen.delete(0, seen.length() - 10_000);
      }
    }
    throw new IOException("the other JVM ended before saying '" + prefix + "'; its output:\n" + seen);
  }

  /**
   * The server JVM: prints its port, watches its loop from the first line on standard input,
   * and reports the longest stall at the second.
   */
  private static void serve(Variant variant, String handshaker, Transport transport) throws Exception {
    try (Variant.Stack stack = variant.open(transport, new String[] {handshaker, handshaker})) {
      stack.start(Workload.service(1024));
      System.out.println("port " + stack.serverPort());
      System.out.flush();
      BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.US_ASCII));
      in.readLine();
      awaitJitQuiet();
      StallProbe probe = new StallProbe(stack.serverLoop());
      long cpuAtStart = MemoryMonitor.processCpuNanos();
      System.out.println("measuring");
      System.out.flush();
      in.readLine();
      System.out.println("stall-ms " + probe.stop() / 1e6 + " " + probe.cpuOfLongestStallNanos() / 1e6
          + " " + (MemoryMonitor.processCpuNanos() - cpuAtStart) / 1e9);
      System.out.flush();
    }
    System.exit(0);
  }

  /**
   * The client JVM: {@code warmUps} storms of the same size to warm up, a wait for its JIT
   * compilers to go quiet, then the storm measured; prints its result as JSON.
   */
  private static void connect(Variant variant, String handshaker, Transport transport, int port,
      int connections, int warmUps) throws Exception {
    JsonObject result = new JsonObject();
    try (Variant.Stack stack = variant.open(transport, new String[] {handshaker, handshaker})) {
      byte[] message = new byte[1024];
      // Warm-up: storms of the same size, not measured, then a wait for the JIT compilers to
      // finish what those queued, so that the storm measured is not class loading, the
      // interpreter and compilation competing for the two cores.
      for (int round = 0; round < warmUps; round++) {
        List<ManagedChannel> warmUp = new ArrayList<>();
        List<CompletableFuture<Void>> warmUpCalls = new ArrayList<>();
        for (int i = 0; i < connections; i++) {
          ManagedChannel channel = stack.newChannel(port);
          warmUp.add(channel);
          warmUpCalls.add(Workload.echo(channel, message));
        }
        CompletableFuture.allOf(warmUpCalls.toArray(new CompletableFuture<?>[0]))
            .get(5, TimeUnit.MINUTES);
        VariantRun.shutdown(warmUp);
      }
      awaitJitQuiet();
      System.out.println("warmed");
      System.out.flush();
      new BufferedReader(new InputStreamReader(System.in, StandardCharsets.US_ASCII)).readLine();
      StallProbe probe = new StallProbe(stack.clientLoop());
      List<ManagedChannel> channels = new ArrayList<>(connections);
      List<CompletableFuture<Void>> calls = new ArrayList<>(connections);
      AtomicInteger failed = new AtomicInteger();
      AtomicLong lastDone = new AtomicLong();
      long cpuAtStart = MemoryMonitor.processCpuNanos();
      long jitAtStart = MemoryMonitor.jitMillis();
      long start = System.nanoTime();
      for (int i = 0; i < connections; i++) {
        ManagedChannel channel = stack.newChannel(port);
        channels.add(channel);
        calls.add(Workload.echo(channel, message).whenComplete((ignored, t) -> {
          if (t != null && failed.getAndIncrement() == 0) {
            result.addProperty("firstFailure", String.valueOf(t));
          }
          lastDone.accumulateAndGet(System.nanoTime(), Math::max);
        }));
      }
      try {
        CompletableFuture.allOf(calls.toArray(new CompletableFuture<?>[0])).get(5, TimeUnit.MINUTES);
      } catch (java.util.concurrent.ExecutionException e) {
        // counted per call above
      }
      result.addProperty("clientCpuSeconds",
          Math.round((MemoryMonitor.processCpuNanos() - cpuAtStart) / 1e7) / 100.0);
      result.addProperty("clientJitSeconds",
          Math.round((MemoryMonitor.jitMillis() - jitAtStart) / 10.0) / 100.0);
      result.addProperty("connections", connections);
      result.addProperty("seconds", Math.round((lastDone.get() - start) / 1e7) / 100.0);
      result.addProperty("failed", failed.get());
      result.addProperty("clientStallMillis", Math.round(probe.stop() / 1e5) / 10.0);
      result.addProperty("clientStallCpuMillis", Math.round(probe.cpuOfLongestStallNanos() / 1e5) / 10.0);
      VariantRun.shutdown(channels);
    }
    System.out.println("result " + result);
    System.out.flush();
    System.exit(0);
  }

  /**
   * Waits until this JVM's JIT compilers have been idle for {@link #JIT_QUIET_MILLIS} (at most
   * {@link #JIT_WAIT_MILLIS}). First reads the process's CPU time once, so that what the storm's
   * measurement uses is loaded (and compiled for) before, not during, the storm.
   */
  static void awaitJitQuiet() throws InterruptedException {
    MemoryMonitor.processCpuNanos();
    long quietNanos = TimeUnit.MILLISECONDS.toNanos(JIT_QUIET_MILLIS);
    long deadline = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(JIT_WAIT_MILLIS);
    long last = MemoryMonitor.jitMillis();
    long quietSince = System.nanoTime();
    while (last >= 0 && System.nanoTime() < deadline) {
      Thread.sleep(100);
      long now = MemoryMonitor.jitMillis();
      if (now != last) {
        last = now;
        quietSince = System.nanoTime();
      } else if (System.nanoTime() - quietSince >= quietNanos) {
        return;
      }
    }
  }

  /**
   * How long an event loop goes without running its tasks: a task due every millisecond notes
   * how late it ran; the longest lateness is the longest stall.
   */
  static final class StallProbe {
    private final ScheduledExecutorService loop;
    private final AtomicLong maxLateNanos = new AtomicLong();
    /** Of the longest stall, the loop thread's CPU time (busy) as opposed to waiting. */
    private volatile long cpuOfMaxNanos;
    private long lastCpuNanos = -1;
    private volatile boolean running = true;

    StallProbe(ScheduledExecutorService loop) {
      this.loop = loop;
      next();
    }

    private void next() {
      long due = System.nanoTime() + PROBE_NANOS;
      loop.schedule(() -> {
        long late = System.nanoTime() - due;
        long cpu = java.lang.management.ManagementFactory.getThreadMXBean().getCurrentThreadCpuTime();
        if (late > maxLateNanos.get()) {
          maxLateNanos.set(late);
          cpuOfMaxNanos = lastCpuNanos < 0 ? -1 : cpu - lastCpuNanos - PROBE_NANOS;
        }
        lastCpuNanos = cpu;
        if (running) {
          next();
        }
      }, PROBE_NANOS, TimeUnit.NANOSECONDS);
    }

    /** Of the longest stall, how long the loop thread was on a CPU (-1 if unknown). */
    long cpuOfLongestStallNanos() {
      return cpuOfMaxNanos;
    }

    /** Stops probing; returns the longest stall seen, in nanoseconds. */
    long stop() {
      running = false;
      return maxLateNanos.get();
    }
  }
}
