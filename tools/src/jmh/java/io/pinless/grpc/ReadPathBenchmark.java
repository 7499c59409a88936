package io.pinless.grpc;

import io.grpc.ManagedChannel;
import io.netty.buffer.PooledByteBufAllocator;
import java.util.concurrent.TimeUnit;
import org.openjdk.jmh.annotations.AuxCounters;
import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.BenchmarkMode;
import org.openjdk.jmh.annotations.Fork;
import org.openjdk.jmh.annotations.Level;
import org.openjdk.jmh.annotations.Measurement;
import org.openjdk.jmh.annotations.Mode;
import org.openjdk.jmh.annotations.OutputTimeUnit;
import org.openjdk.jmh.annotations.Param;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.annotations.State;
import org.openjdk.jmh.annotations.TearDown;
import org.openjdk.jmh.annotations.Warmup;

/**
 * Streaming download over real grpc-java on loopback, pinless's plaintext credentials against
 * stock grpc-netty's, in one run.
 *
 * <pre>
 *   mvn -Ptools,jmh -DskipTests package &amp;&amp; java -jar tools/target/benchmarks.jar ReadPathBenchmark -prof gc
 * </pre>
 *
 * <p>One operation is one server-streaming call that downloads {@value #BYTES_PER_CALL} bytes in
 * messages of {@code messageBytes}; the client reads every byte once (as a parser would). The
 * {@code :payloadBytes} rows give payload bytes per second; with {@code -prof gc},
 * {@code gc.alloc.rate.norm} divided by {@value #BYTES_PER_CALL} is the heap allocated per
 * payload byte, by both ends and every thread. Server and client each have one event loop thread
 * and run callbacks on it ({@code directExecutor}), the same for both variants, so the rows
 * differ only in the credentials' pipeline.
 */
@BenchmarkMode(Mode.Throughput)
@OutputTimeUnit(TimeUnit.SECONDS)
@Fork(
    value = 1,
    jvmArgsAppend = {"-Xms1g", "-Xmx1g", "-Dio.netty.leakDetection.level=disabled"})
@Warmup(iterations = 4, time = 3)
@Measurement(iterations = 6, time = 3)
@State(Scope.Benchmark)
public class ReadPathBenchmark {
  /** 16 MiB per call. */
  static final int BYTES_PER_CALL = 16 << 20;

  /** {@code pinless}: {@code PinlessChannelCredentials.insecure()}; {@code stock}: grpc-netty's. */
  @Param({"pinless", "stock"})
  public String variant;

  @Param({"1048576", "1024"})
  public int messageBytes;

  /** {@code nio}, {@code epoll} or {@code io_uring_ring}. */
  @Param({"nio"})
  public String transport;

  private BenchTransport loop;
  private ManagedChannel channel;
  private byte[] request;

  /**
   * Payload bytes downloaded and the process's CPU time spent doing it, each reported per second:
   * {@code :cpuNanos} over {@code :payloadBytes} is CPU nanoseconds per payload byte, client and
   * server together (both run in the benchmark's JVM). On a shared machine it moves less than
   * throughput does: time the VM was not given a CPU is not counted.
   */
  @State(Scope.Thread)
  @AuxCounters(AuxCounters.Type.OPERATIONS)
  public static class Bytes {
    private static final com.sun.management.OperatingSystemMXBean OS =
        (com.sun.management.OperatingSystemMXBean)
            java.lang.management.ManagementFactory.getOperatingSystemMXBean();

    /** Payload bytes downloaded in this iteration. */
    public long payloadBytes;
    /** Process CPU nanoseconds spent in this iteration's operations. */
    public long cpuNanos;

    @Setup(Level.Iteration)
    public void reset() {
      payloadBytes = 0;
      cpuNanos = 0;
    }

    /** The process's CPU time so far, in nanoseconds. */
    static long processCpuNanos() {
      return OS.getProcessCpuTime();
    }
  }

  @Setup(Level.Trial)
  public void setUp() throws Exception {
    if (!variant.equals("pinless") && !variant.equals("stock")
        && !BenchTransport.TLS_VARIANTS.contains(variant)) {
      throw new IllegalArgumentException(
          "variant must be pinless, stock or one of " + BenchTransport.TLS_VARIANTS + ", not " + variant);
    }
    loop = new BenchTransport(BenchTransport.Kind.parse(transport), variant,
        PooledByteBufAllocator.DEFAULT, BenchService.definition(), null);
    channel = loop.newChannel();
    request = BenchService.request(BYTES_PER_CALL / messageBytes, messageBytes);
    download(); // connect, and check one call end to end
  }

  @TearDown(Level.Trial)
  public void tearDown() throws Exception {
    channel.shutdownNow().awaitTermination(10, TimeUnit.SECONDS);
    loop.close();
  }

  @Benchmark
  public long downloadSixteenMebibytes(Bytes bytes) throws Exception {
    long cpu = ReadPathBenchmark.Bytes.processCpuNanos();
    long got = download();
    bytes.cpuNanos += ReadPathBenchmark.Bytes.processCpuNanos() - cpu;
    bytes.payloadBytes += got;
    return got;
  }

  /** The benchmark's channel, once set up. */
  io.grpc.ManagedChannel channel() {
    return channel;
  }

  private long download() throws Exception {
    return BenchService.download(channel, request, BYTES_PER_CALL);
  }

}
