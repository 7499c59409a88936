package io.pinless.grpc;

import io.grpc.ManagedChannel;
import java.lang.management.ManagementFactory;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Locale;

/**
 * Streaming download throughput of several variants in one JVM, in short windows that take
 * turns: every variant is set up once (its own server and channel), then each round gives each
 * variant one window of the same length, the order rotated from round to round, and the ratio of
 * the first variant to each other one is taken within the round, from windows seconds apart.
 *
 * <pre>
 *   java -Xms1g -Xmx1g -Dio.netty.leakDetection.level=disabled \
 *       -Dio.grpc.netty.shaded.io.netty.leakDetection.level=disabled \
 *       -cp tools/target/benchmarks.jar io.pinless.grpc.Interleaved \
 *       [messageBytes (1024)] [variants (pinless,stock)] [rounds (20)] [window seconds (3)] [warm-up rounds (10)]
 * </pre>
 *
 * <p>Variants: {@code pinless} and {@code stock} are {@link ReadPathBenchmark}'s (plaintext, one
 * event loop per end), and so are {@code pinless-tls} and {@code stock-tls} (the JDK's engine) and
 * {@code pinless-tls-openssl} and {@code stock-tls-openssl} (OpenSSL's); {@code pinless-alts}, {@code stock-alts} and {@code stock-plaintext} are
 * {@link AltsDownloadBenchmark}'s. One JMH fork per variant measures each variant with the JIT's
 * choices of that fork, and on this two-core machine those differ from fork to fork by more than
 * the variants differ at 1 KiB messages; here the variants share one JVM, its compiled code and
 * its drift, so their ratio is measured against less noise. The price: code both variants run
 * (gRPC's own classes, and grpc-netty and Netty when both use the unshaded ones) is compiled with
 * what both do, which neither would see alone, and a compilation that suits one variant's types
 * can slow another for the rest of the run. Read each variant's own MB/s against other runs
 * before its ratio, and check with forks in turn ({@code docs/benchmarks.md}).
 *
 * <p>{@code Interleaved chunks <args>} runs {@link ChunkInterleaved} instead: protobuf messages
 * through {@link ZeroCopyMarshaller} against {@code ProtoLiteUtils}. {@code Interleaved unary
 * <args>} runs {@link UnaryInterleaved}: small echo calls, ping-pong or many in flight.
 *
 * <p>Per window it prints payload MB/s, CPU nanoseconds per payload byte (the process's) and heap
 * bytes allocated per payload byte (every live thread's, from {@code ThreadMXBean}); at the end,
 * per ratio, the rounds' median, their geometric mean with a 95% confidence interval, and how
 * many rounds fell below 1.
 */
public final class Interleaved {
  private static final com.sun.management.ThreadMXBean THREADS =
      (com.sun.management.ThreadMXBean) ManagementFactory.getThreadMXBean();

  private Interleaved() {}

  /** One download of 16 MiB; returns the payload bytes received. */
  private interface Call {
    long call() throws Exception;
  }

  /** One variant, set up: its download call and what tears it down. */
  private record Download(Call call, AutoCloseable tearDown) {}

  /** One window's figures. */
  private record Window(double megabytesPerSecond, double cpuPerByte, double heapPerByte) {}

  /** Runs the comparison; see the class comment for the arguments. */
  public static void main(String[] args) throws Exception {
    if (args.length > 0 && args[0].equals("chunks")) {
      // Protobuf chunks through the zero-copy marshaller against ProtoLiteUtils.
      ChunkInterleaved.main(java.util.Arrays.copyOfRange(args, 1, args.length));
      return;
    }
    if (args.length > 0 && args[0].equals("unary")) {
      // Small echo calls instead of downloads.
      UnaryInterleaved.main(java.util.Arrays.copyOfRange(args, 1, args.length));
      return;
    }
    int messageBytes = args.length > 0 ? Integer.parseInt(args[0]) : 1024;
    String[] variants = args.length > 1 ? args[1].split(",") : new String[] {"pinless", "stock"};
    int rounds = args.length > 2 ? Integer.parseInt(args[2]) : 20;
    double seconds = args.length > 3 ? Double.parseDouble(args[3]) : 3;
    int warmupRounds = args.length > 4 ? Integer.parseInt(args[4]) : 10;
    if (variants.length < 2 || rounds < 2) {
      throw new IllegalArgumentException("needs at least two variants and two rounds");
    }
    List<Download> downloads = new ArrayList<>();
    try {
      for (String variant : variants) {
        downloads.add(open(variant, messageBytes));
      }
      System.out.printf(Locale.ROOT,
          "%s, %d-byte messages, 16 MiB per call, windows of %.1f s, %d warm-up rounds%n",
          String.join(" / ", variants), messageBytes, seconds, warmupRounds);
      for (int r = 0; r < warmupRounds; r++) {
        for (int v = 0; v < variants.length; v++) {
          window(downloads.get((v + r) % variants.length), seconds);
        }
      }
      double[][] ratios = new double[variants.length][rounds];
      System.out.printf(Locale.ROOT, "round %s%n", header(variants));
      for (int r = 0; r < rounds; r++) {
        Window[] got = new Window[variants.length];
        for (int k = 0; k < variants.length; k++) {
          int v = (k + r) % variants.length;
          got[v] = window(downloads.get(v), seconds);
        }
        StringBuilder line = new StringBuilder(String.format(Locale.ROOT, "%5d", r + 1));
        for (Window w : got) {
          line.append(String.format(Locale.ROOT, " %15.0f %6.3f %8.5f",
              w.megabytesPerSecond(), w.cpuPerByte(), w.heapPerByte()));
        }
        for (int v = 1; v < variants.length; v++) {
          ratios[v][r] = got[0].megabytesPerSecond() / got[v].megabytesPerSecond();
          line.append(String.format(Locale.ROOT, " %6.2f", ratios[v][r]));
        }
        System.out.println(line);
      }
      for (int v = 1; v < variants.length; v++) {
        summarize(variants[0] + " / " + variants[v], ratios[v]);
      }
    } finally {
      for (Download d : downloads) {
        d.tearDown().close();
      }
    }
  }

  private static String header(String[] variants) {
    StringBuilder h = new StringBuilder();
    for (String v : variants) {
      h.append(String.format(Locale.ROOT, " %-15s %6s %8s", abbreviate(v, 10) + " MB/s", "ns/B", "heap B/B"));
    }
    for (int v = 1; v < variants.length; v++) {
      h.append(String.format(Locale.ROOT, " %6s", "/" + abbreviate(variants[v], 5)));
    }
    return h.toString();
  }

  private static String abbreviate(String s, int length) {
    return s.length() <= length ? s : s.substring(0, length);
  }

  /** A variant's channel, set up with its server, and what tears both down. */
  record Opened(ManagedChannel channel, AutoCloseable tearDown) {}

  /** Sets up {@code variant} for calls other than its download (its download is checked once). */
  static Opened openChannel(String variant) throws Exception {
    switch (variant) {
      case "pinless-alts":
      case "stock-alts":
      case "stock-plaintext": {
        AltsDownloadBenchmark b = new AltsDownloadBenchmark();
        b.variant = variant;
        b.messageBytes = 1024;
        b.setUp();
        return new Opened(b.channel(), b::tearDown);
      }
      default: {
        ReadPathBenchmark b = new ReadPathBenchmark();
        b.variant = variant;
        b.messageBytes = 1024;
        b.transport = "nio";
        b.setUp();
        return new Opened(b.channel(), b::tearDown);
      }
    }
  }

  private static Download open(String variant, int messageBytes) throws Exception {
    ReadPathBenchmark.Bytes bytes = new ReadPathBenchmark.Bytes();
    switch (variant) {
      case "pinless":
      case "stock":
      case "pinless-tls":
      case "stock-tls":
      case "pinless-tls-openssl":
      case "stock-tls-openssl": {
        ReadPathBenchmark b = new ReadPathBenchmark();
        b.variant = variant;
        b.messageBytes = messageBytes;
        b.transport = "nio";
        b.setUp();
        return new Download(() -> b.downloadSixteenMebibytes(bytes), b::tearDown);
      }
      case "pinless-alts":
      case "stock-alts":
      case "stock-plaintext": {
        AltsDownloadBenchmark b = new AltsDownloadBenchmark();
        b.variant = variant;
        b.messageBytes = messageBytes;
        b.setUp();
        return new Download(() -> b.downloadSixteenMebibytes(bytes), b::tearDown);
      }
      default:
        throw new IllegalArgumentException("unknown variant " + variant);
    }
  }

  /** Downloads until {@code seconds} have passed (whole calls) and returns the window's figures. */
  private static Window window(Download download, double seconds) throws Exception {
    long heap = allocatedBytes();
    long cpu = ReadPathBenchmark.Bytes.processCpuNanos();
    long start = System.nanoTime();
    long end = start + (long) (seconds * 1e9);
    long payload = 0;
    long now;
    do {
      payload += download.call().call();
      now = System.nanoTime();
    } while (now < end);
    double cpuNanos = ReadPathBenchmark.Bytes.processCpuNanos() - cpu;
    double heapBytes = allocatedBytes() - heap;
    return new Window(payload * 1e3 / (now - start), cpuNanos / payload, heapBytes / payload);
  }

  /** Heap bytes allocated so far by the threads alive now. */
  static long allocatedBytes() {
    long sum = 0;
    for (long n : THREADS.getThreadAllocatedBytes(THREADS.getAllThreadIds())) {
      sum += Math.max(0, n);
    }
    return sum;
  }

  /**
   * Prints, for {@code ratios} (one per round), their median, their geometric mean with a 95%
   * confidence interval (Student's t on the logs), their range, and how many fell below 1.
   */
  public static void summarize(String name, double[] ratios) {
    double[] sorted = ratios.clone();
    Arrays.sort(sorted);
    int n = sorted.length;
    double median = n % 2 == 1 ? sorted[n / 2] : (sorted[n / 2 - 1] + sorted[n / 2]) / 2;
    double mean = 0;
    for (double r : ratios) {
      mean += Math.log(r);
    }
    mean /= n;
    double var = 0;
    for (double r : ratios) {
      var += (Math.log(r) - mean) * (Math.log(r) - mean);
    }
    double half = tQuantile975(n - 1) * Math.sqrt(var / (n - 1) / n);
    int below = 0;
    for (double r : ratios) {
      if (r < 1) {
        below++;
      }
    }
    System.out.printf(Locale.ROOT,
        "%s: median %.3f, geometric mean %.3f (95%% CI %.3f-%.3f), range %.2f-%.2f, %d of %d rounds below 1%n",
        name, median, Math.exp(mean), Math.exp(mean - half), Math.exp(mean + half),
        sorted[0], sorted[n - 1], below, n);
  }

  /** Student's t, two-sided 95%, for {@code df} degrees of freedom (a table, then 1.96). */
  private static double tQuantile975(int df) {
    double[] table = {
      12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228,
      2.201, 2.179, 2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086,
      2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042
    };
    return df <= table.length ? table[df - 1] : (df <= 60 ? 2.00 : 1.96);
  }
}
