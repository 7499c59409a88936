package io.pinless.grpc;

import io.grpc.CallOptions;
import io.grpc.ManagedChannel;
import io.grpc.stub.ClientCalls;
import io.grpc.stub.StreamObserver;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Locale;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicReference;

/**
 * Small unary calls of several variants in one JVM, in windows that take turns as {@link
 * Interleaved}'s downloads do: per window, {@code inFlight} chains of echo calls of {@code
 * messageBytes} each way, each chain starting its next call when the last one completes. With one
 * in flight that is a ping-pong.
 *
 * <pre>
 *   java -Xms1g -Xmx1g -Dio.netty.leakDetection.level=disabled \
 *       -Dio.grpc.netty.shaded.io.netty.leakDetection.level=disabled \
 *       -cp tools/target/benchmarks.jar io.pinless.grpc.Interleaved unary \
 *       [messageBytes (1024)] [in flight (1)] [variants (pinless,stock)] [rounds (20)]
 *       [window seconds (2)] [warm-up rounds (10)]
 * </pre>
 *
 * <p>Variants are {@link Interleaved}'s. Per window it prints calls per second, the median and
 * 99th percentile latency in microseconds and the process's CPU microseconds per call; at the end,
 * per ratio of the first variant to each other one (calls per second, p50, p99, CPU per call),
 * the rounds' median and geometric mean with a 95% confidence interval.
 */
final class UnaryInterleaved {
  /** Latencies kept per window; calls past it count but are not timed. */
  private static final int MAX_TIMED_CALLS = 1 << 21;

  private UnaryInterleaved() {}

  /** One window's figures. */
  private record Window(double callsPerSecond, double p50Micros, double p99Micros,
      double cpuMicrosPerCall) {
    double get(int figure) {
      switch (figure) {
        case 0:
          return callsPerSecond;
        case 1:
          return p50Micros;
        case 2:
          return p99Micros;
        default:
          return cpuMicrosPerCall;
      }
    }
  }

  private static final String[] FIGURES = {"calls/s", "p50", "p99", "CPU/call"};

  static void main(String[] args) throws Exception {
    int messageBytes = args.length > 0 ? Integer.parseInt(args[0]) : 1024;
    int inFlight = args.length > 1 ? Integer.parseInt(args[1]) : 1;
    String[] variants = args.length > 2 ? args[2].split(",") : new String[] {"pinless", "stock"};
    int rounds = args.length > 3 ? Integer.parseInt(args[3]) : 20;
    double seconds = args.length > 4 ? Double.parseDouble(args[4]) : 2;
    int warmupRounds = args.length > 5 ? Integer.parseInt(args[5]) : 10;
    if (variants.length < 2 || rounds < 2 || inFlight < 1) {
      throw new IllegalArgumentException("needs two variants, two rounds and one call in flight");
    }
    byte[] request = new byte[messageBytes];
    List<AutoCloseable> tearDowns = new ArrayList<>();
    List<ManagedChannel> channels = new ArrayList<>();
    try {
      for (String variant : variants) {
        Interleaved.Opened opened = Interleaved.openChannel(variant);
        tearDowns.add(opened.tearDown());
        channels.add(opened.channel());
      }
      System.out.printf(Locale.ROOT,
          "%s, %d-byte echo calls, %d in flight, windows of %.1f s, %d warm-up rounds%n",
          String.join(" / ", variants), messageBytes, inFlight, seconds, warmupRounds);
      for (int r = 0; r < warmupRounds; r++) {
        for (int v = 0; v < variants.length; v++) {
          window(channels.get((v + r) % variants.length), request, inFlight, seconds);
        }
      }
      double[][][] ratios = new double[FIGURES.length][variants.length][rounds];
      for (int r = 0; r < rounds; r++) {
        Window[] got = new Window[variants.length];
        for (int k = 0; k < variants.length; k++) {
          int v = (k + r) % variants.length;
          got[v] = window(channels.get(v), request, inFlight, seconds);
        }
        StringBuilder line = new StringBuilder(String.format(Locale.ROOT, "round %3d", r + 1));
        for (int v = 0; v < variants.length; v++) {
          Window w = got[v];
          line.append(String.format(Locale.ROOT, " | %s %.0f/s p50 %.0f p99 %.0f us %.1f us CPU",
              variants[v], w.callsPerSecond(), w.p50Micros(), w.p99Micros(),
              w.cpuMicrosPerCall()));
          for (int f = 0; f < FIGURES.length; f++) {
            ratios[f][v][r] = got[0].get(f) / w.get(f);
          }
        }
        System.out.println(line);
      }
      for (int v = 1; v < variants.length; v++) {
        for (int f = 0; f < FIGURES.length; f++) {
          Interleaved.summarize(
              variants[0] + " / " + variants[v] + " " + FIGURES[f], ratios[f][v]);
        }
      }
    } finally {
      for (AutoCloseable t : tearDowns) {
        t.close();
      }
    }
  }

  /** Runs {@code inFlight} chains of echo calls for {@code seconds}; returns the figures. */
  private static Window window(ManagedChannel channel, byte[] request, int inFlight,
      double seconds) throws Exception {
    long[] latencies = new long[MAX_TIMED_CALLS];
    AtomicInteger timed = new AtomicInteger();
    AtomicInteger calls = new AtomicInteger();
    AtomicReference<Throwable> failure = new AtomicReference<>();
    CountDownLatch chainsDone = new CountDownLatch(inFlight);
    long cpu = ReadPathBenchmark.Bytes.processCpuNanos();
    long start = System.nanoTime();
    long end = start + (long) (seconds * 1e9);
    for (int i = 0; i < inFlight; i++) {
      new Chain(channel, request, end, latencies, timed, calls, failure, chainsDone).next();
    }
    if (!chainsDone.await(60 + (long) seconds, TimeUnit.SECONDS)) {
      throw new IllegalStateException("calls still in flight a minute after the window");
    }
    long elapsed = System.nanoTime() - start;
    double cpuNanos = ReadPathBenchmark.Bytes.processCpuNanos() - cpu;
    if (failure.get() != null) {
      throw new IllegalStateException("a call failed", failure.get());
    }
    int n = Math.min(timed.get(), latencies.length);
    long[] sorted = Arrays.copyOf(latencies, n);
    Arrays.sort(sorted);
    return new Window(calls.get() * 1e9 / elapsed, sorted[n / 2] / 1e3,
        sorted[Math.min(n - 1, (int) (n * 0.99))] / 1e3, cpuNanos / calls.get() / 1e3);
  }

  /** One chain of calls: each completion starts the next until the window ends. */
  private static final class Chain implements StreamObserver<byte[]> {
    private final ManagedChannel channel;
    private final byte[] request;
    private final long end;
    private final long[] latencies;
    private final AtomicInteger timed;
    private final AtomicInteger calls;
    private final AtomicReference<Throwable> failure;
    private final CountDownLatch done;
    private final int expectedBytes;
    private long started;
    private int receivedBytes;

    Chain(ManagedChannel channel, byte[] request, long end, long[] latencies, AtomicInteger timed,
        AtomicInteger calls, AtomicReference<Throwable> failure, CountDownLatch done) {
      this.channel = channel;
      this.request = request;
      this.end = end;
      this.latencies = latencies;
      this.timed = timed;
      this.calls = calls;
      this.failure = failure;
      this.done = done;
      this.expectedBytes = request.length;
    }

    void next() {
      receivedBytes = -1;
      started = System.nanoTime();
      ClientCalls.asyncUnaryCall(
          channel.newCall(BenchService.ECHO, CallOptions.DEFAULT), request, this);
    }

    @Override
    public void onNext(byte[] value) {
      receivedBytes = value.length;
    }

    @Override
    public void onError(Throwable t) {
      failure.compareAndSet(null, t);
      done.countDown();
    }

    @Override
    public void onCompleted() {
      long now = System.nanoTime();
      if (receivedBytes != expectedBytes) {
        onError(new IllegalStateException("echo of " + receivedBytes + " bytes"));
        return;
      }
      calls.incrementAndGet();
      int i = timed.getAndIncrement();
      if (i < latencies.length) {
        latencies[i] = now - started;
      }
      if (now < end) {
        next();
      } else {
        done.countDown();
      }
    }
  }
}
