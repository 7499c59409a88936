package io.pinless.grpc;

import io.grpc.ChannelCredentials;
import io.grpc.Grpc;
import io.grpc.InsecureChannelCredentials;
import io.grpc.InsecureServerCredentials;
import io.grpc.ManagedChannel;
import io.grpc.Server;
import io.grpc.ServerCredentials;
import io.grpc.alts.AltsChannelCredentials;
import io.grpc.alts.AltsServerCredentials;
import io.pinless.alts.handshake.LocalHandshakerMain;
import java.util.concurrent.TimeUnit;
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
 * Streaming download over ALTS: pinless's ALTS credentials against grpc-alts (the stock ALTS)
 * and stock plaintext grpc-netty, in one run, each as a user would set it up
 * ({@code Grpc.newServerBuilderForPort} and {@code Grpc.newChannelBuilder} with the credentials
 * and grpc's default event loops).
 *
 * <pre>
 *   mvn -Ptools,jmh -DskipTests package &amp;&amp; java -jar tools/target/benchmarks.jar AltsDownloadBenchmark -prof gc
 * </pre>
 *
 * <p>One operation downloads 16 MiB in a server-streaming call (see {@link ReadPathBenchmark}).
 * Both ALTS variants handshake through in-process local handshakers ({@link LocalHandshakerMain}), then run
 * ALTSRP_GCM_AES128_REKEY records of up to 128 KiB.
 */
@BenchmarkMode(Mode.Throughput)
@OutputTimeUnit(TimeUnit.SECONDS)
@Fork(
    value = 1,
    jvmArgsAppend = {
      "-Xms1g", "-Xmx1g", "-Dio.netty.leakDetection.level=disabled",
      "-Dio.grpc.netty.shaded.io.netty.leakDetection.level=disabled"
    })
@Warmup(iterations = 4, time = 3)
@Measurement(iterations = 6, time = 3)
@State(Scope.Benchmark)
public class AltsDownloadBenchmark {
  static final int BYTES_PER_CALL = ReadPathBenchmark.BYTES_PER_CALL;

  /** {@code pinless-alts}, {@code stock-alts} (grpc-alts) or {@code stock-plaintext}. */
  @Param({"pinless-alts", "stock-alts", "stock-plaintext"})
  public String variant;

  @Param({"1048576", "1024"})
  public int messageBytes;

  private Server clientHandshaker;
  private Server serverHandshaker;
  private Server server;
  private ManagedChannel channel;
  private byte[] request;

  @Setup(Level.Trial)
  public void setUp() throws Exception {
    clientHandshaker = LocalHandshakerMain.start(0, "client-sa");
    serverHandshaker = LocalHandshakerMain.start(0, "server-sa");
    ServerCredentials serverCreds;
    ChannelCredentials channelCreds;
    switch (variant) {
      case "pinless-alts":
        serverCreds = PinlessServerCredentials.altsBuilder()
            .handshakerAddress(LocalHandshakerMain.hostAndPort(serverHandshaker)).build();
        channelCreds = PinlessChannelCredentials.altsBuilder()
            .handshakerAddress(LocalHandshakerMain.hostAndPort(clientHandshaker)).build();
        break;
      case "stock-alts":
        serverCreds = AltsServerCredentials.newBuilder().enableUntrustedAltsForTesting()
            .setHandshakerAddressForTesting(LocalHandshakerMain.hostAndPort(serverHandshaker)).build();
        channelCreds = AltsChannelCredentials.newBuilder().enableUntrustedAltsForTesting()
            .setHandshakerAddressForTesting(LocalHandshakerMain.hostAndPort(clientHandshaker)).build();
        break;
      case "stock-plaintext":
        serverCreds = InsecureServerCredentials.create();
        channelCreds = InsecureChannelCredentials.create();
        break;
      default:
        throw new IllegalArgumentException("unknown variant " + variant);
    }
    server = Grpc.newServerBuilderForPort(0, serverCreds)
        .addService(BenchService.definition())
        .directExecutor()
        .build()
        .start();
    channel = Grpc.newChannelBuilder("127.0.0.1:" + server.getPort(), channelCreds)
        .directExecutor()
        .maxInboundMessageSize(64 << 20)
        .build();
    request = BenchService.request(BYTES_PER_CALL / messageBytes, messageBytes);
    download();
  }

  @TearDown(Level.Trial)
  public void tearDown() throws Exception {
    channel.shutdownNow().awaitTermination(10, TimeUnit.SECONDS);
    for (Server s : new Server[] {server, clientHandshaker, serverHandshaker}) {
      s.shutdownNow().awaitTermination(10, TimeUnit.SECONDS);
    }
  }

  @Benchmark
  public long downloadSixteenMebibytes(ReadPathBenchmark.Bytes bytes) throws Exception {
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
