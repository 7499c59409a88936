package io.pinless.grpc;

import io.grpc.ChannelCredentials;
import io.grpc.InsecureChannelCredentials;
import io.grpc.InsecureServerCredentials;
import io.grpc.ManagedChannel;
import io.grpc.MethodDescriptor;
import io.grpc.Server;
import io.grpc.ServerCredentials;
import io.grpc.alts.AltsChannelCredentials;
import io.grpc.alts.AltsServerCredentials;
import io.grpc.protobuf.lite.ProtoLiteUtils;
import io.netty.buffer.PooledByteBufAllocator;
import io.netty.channel.ChannelOption;
import io.netty.channel.EventLoopGroup;
import io.netty.channel.MultiThreadIoEventLoopGroup;
import io.netty.channel.nio.NioIoHandler;
import io.netty.channel.socket.nio.NioServerSocketChannel;
import io.netty.channel.socket.nio.NioSocketChannel;
import io.pinless.PinlessMetrics;
import io.pinless.alts.handshake.LocalHandshakerMain;
import io.pinless.testing.Chunk;
import io.pinless.testing.ChunkDownloads;
import io.pinless.testing.ChunkRequest;
import io.pinless.testing.ChunkService;
import java.lang.management.ManagementFactory;
import java.net.InetSocketAddress;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Locale;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.LongAdder;
import java.util.function.Consumer;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * A download of protobuf {@link Chunk} messages, the client's receive path compared in windows
 * that take turns in one JVM (as {@link Interleaved} does, the order also reversed every other
 * round): pinless with the zero-copy marshaller against stock grpc-netty with protobuf's, over
 * plaintext and over ALTS.
 *
 * <pre>
 *   java -Xms1g -Xmx1g -Dio.netty.leakDetection.level=disabled \
 *       -Dio.grpc.netty.shaded.io.netty.leakDetection.level=disabled \
 *       -cp tools/target/benchmarks.jar io.pinless.grpc.ChunkInterleaved \
 *       [chunkBytes (2097152)] [variants (pinless,stock,stock,stock)] [rounds (12)] \
 *       [window seconds (2)] [warm-up rounds (4)]
 * </pre>
 *
 * <p>Variants, each a client with an event loop thread of its own:
 * <ul>
 *   <li>{@code pinless}: pinless's plaintext credentials, chunks parsed by {@link
 *       ZeroCopyMarshaller} (the data field a view of the received buffers), each released once
 *       checked;
 *   <li>{@code stock}: grpc-netty's plaintext credentials, chunks parsed by {@code
 *       ProtoLiteUtils}' marshaller;
 *   <li>{@code pinless-alts}: pinless's ALTS credentials, the zero-copy marshaller;
 *   <li>{@code stock-alts}: grpc-alts (on grpc-netty-shaded), protobuf's marshaller;
 *   <li>{@code pinless-tls} and {@code stock-tls}: TLS on the JDK's engine, pinless's credentials
 *       with the zero-copy marshaller and grpc-netty's with protobuf's; {@code
 *       pinless-tls-openssl} and {@code stock-tls-openssl} the same on OpenSSL's engine;
 *   <li>a pinless variant with {@code -proto} after its name ({@code pinless-proto}, {@code
 *       pinless-alts-proto}, ...): the same transport with protobuf's marshaller, as most
 *       applications parse, so that its pair with stock compares the transports alone;
 *   <li>any variant with {@code -x2} to {@code -x99} after its name ({@code pinless-proto-x4}):
 *       that many connections on its one event loop, each window's calls on all of them at
 *       once, as {@code pinless compare}'s four clients share a loop.
 * </ul>
 * Variants come in pairs, and each pair's ratios are the first over the second: {@code
 * pinless,stock,stock,stock} gives pinless over stock and a stock-against-stock control. The
 * control shows how far two identical clients differ; read a pair's interval against it. Every
 * plaintext client connects to one stock grpc-netty server, every TLS client to one stock
 * grpc-netty server per engine, and every ALTS client to one grpc-alts server, all running
 * {@link ChunkService}: each chunk's data is a view of one pattern made once,
 * so the server's work per byte is gRPC's own (framing, writing, and for ALTS sealing), the same
 * for every client. What differs is the receive path.
 *
 * <p>Per window and variant it prints payload MB/s, then CPU nanoseconds and heap bytes allocated
 * per payload byte, each twice: by the client's event loop thread, and by the whole process. With
 * {@code directExecutor} the client's loop does the whole receive path, from the socket read to
 * the parse and the application's callback, so its thread's figures are that path's cost. The
 * process's add the server's send path, which is the same for both variants of a pair and so
 * dilutes their ratio, and the garbage collector's threads, which bear the cost of what the
 * receive path allocated. At the end, per pair and figure, the rounds' ratios are summarized
 * ({@link Interleaved#summarize}), and per pinless variant the share of message bytes the
 * zero-copy marshaller could only parse by copying (whole messages whose received pieces gRPC
 * did not offer as NIO buffers).
 */
public final class ChunkInterleaved {
  private static final com.sun.management.ThreadMXBean THREADS =
      (com.sun.management.ThreadMXBean) ManagementFactory.getThreadMXBean();
  /** Each call downloads this much (whole chunks). */
  static final int BYTES_PER_CALL = 64 << 20;
  private static final int MAX_MESSAGE_BYTES = 64 << 20;

  private ChunkInterleaved() {}

  /**
   * What a client does with a received chunk: the marshaller that parses it, and its release,
   * which counts the bytes of the chunks the zero-copy marshaller could only parse by copying.
   */
  private record Receiving(MethodDescriptor.Marshaller<Chunk> marshaller, Consumer<Chunk> release,
      LongAdder parsedByCopying) {
    static Receiving zeroCopy() {
      ZeroCopyMarshaller<Chunk> marshaller = ZeroCopyMarshaller.of(Chunk.getDefaultInstance());
      LongAdder copying = new LongAdder();
      return new Receiving(marshaller, chunk -> {
        if (!marshaller.isZeroCopy(chunk)) {
          copying.add(chunk.getSerializedSize());
        }
        marshaller.release(chunk);
      }, copying);
    }

    static Receiving protobuf() {
      return new Receiving(
          ProtoLiteUtils.marshaller(Chunk.getDefaultInstance()), chunk -> {}, null);
    }
  }

  /**
   * One client, connected: its channels (one, or several on the same event loop), its event loop
   * thread, and what shuts it down.
   */
  record Client(String variant, List<ManagedChannel> channels, long loopThread,
      MethodDescriptor<ChunkRequest, Chunk> method, Receiving receiving, AutoCloseable loops) {
    /** The first channel. */
    ManagedChannel channel() {
      return channels.get(0);
    }

    /** One download on each channel at once; returns the payload bytes of all. */
    long download(int count, int size) throws Exception {
      List<CompletableFuture<Long>> calls = new ArrayList<>();
      for (ManagedChannel channel : channels) {
        calls.add(ChunkDownloads.download(channel, method, count, size, receiving.release()));
      }
      long bytes = 0;
      for (CompletableFuture<Long> call : calls) {
        bytes += call.get(60, TimeUnit.SECONDS);
      }
      return bytes;
    }

    /** Bytes of chunks the zero-copy marshaller parsed by copying so far; 0 for protobuf's. */
    long parsedByCopying() {
      return receiving.parsedByCopying() == null ? 0 : receiving.parsedByCopying().sum();
    }

    void close() throws Exception {
      for (ManagedChannel channel : channels) {
        channel.shutdownNow().awaitTermination(10, TimeUnit.SECONDS);
      }
      loops.close();
    }
  }

  /** One window's figures; per byte means per payload byte. */
  record Window(long payloadBytes, double megabytesPerSecond, double loopCpuPerByte,
      double cpuPerByte, double loopHeapPerByte, double heapPerByte) {
    static final String[] NAMES = {
      "MB/s", "loop CPU ns/B", "process CPU ns/B", "loop heap B/B", "process heap B/B"};

    double get(int figure) {
      switch (figure) {
        case 0:
          return megabytesPerSecond;
        case 1:
          return loopCpuPerByte;
        case 2:
          return cpuPerByte;
        case 3:
          return loopHeapPerByte;
        default:
          return heapPerByte;
      }
    }
  }

  /** The servers both variants of a pair share, and the local ALTS handshakers. */
  static final class Servers implements AutoCloseable {
    private final List<AutoCloseable> closing = new ArrayList<>();
    private Server plaintext;
    private Server tlsJdk;
    private Server tlsOpenSsl;
    private Server alts;
    private Server clientHandshaker;
    private Server serverHandshaker;

    /** The stock grpc-netty plaintext server, started on first use. */
    Server plaintext() throws Exception {
      if (plaintext == null) {
        plaintext = stock(InsecureServerCredentials.create());
      }
      return plaintext;
    }

    /** A stock grpc-netty server on an event loop thread of its own. */
    private Server stock(ServerCredentials creds) throws Exception {
      EventLoopGroup group = new MultiThreadIoEventLoopGroup(1, NioIoHandler.newFactory());
      Server server = io.grpc.netty.NettyServerBuilder
            .forAddress(new InetSocketAddress("127.0.0.1", 0), creds)
            .bossEventLoopGroup(group)
            .workerEventLoopGroup(group)
            .channelType(NioServerSocketChannel.class)
            .withChildOption(ChannelOption.ALLOCATOR, PooledByteBufAllocator.DEFAULT)
            .directExecutor()
            .addService(ChunkService.service())
            .build()
            .start();
      closing.add(() -> group.shutdownGracefully(0, 5, TimeUnit.SECONDS).sync());
      closing.add(stopping(server));
      return server;
    }

    /** The stock grpc-netty TLS server on the JDK's or OpenSSL's engine, started on first use. */
    Server tls(boolean openssl) throws Exception {
      Server server = openssl ? tlsOpenSsl : tlsJdk;
      if (server == null) {
        server = stock(BenchTransport.credentials(openssl ? "stock-tls-openssl" : "stock-tls")
            .server());
        if (openssl) {
          tlsOpenSsl = server;
        } else {
          tlsJdk = server;
        }
      }
      return server;
    }

    /** The client's handshaker address, the handshakers started on first use. */
    String clientHandshaker() throws Exception {
      if (clientHandshaker == null) {
        clientHandshaker = LocalHandshakerMain.start(0, "client-sa");
        closing.add(stopping(clientHandshaker));
        serverHandshaker = LocalHandshakerMain.start(0, "server-sa");
        closing.add(stopping(serverHandshaker));
      }
      return LocalHandshakerMain.hostAndPort(clientHandshaker);
    }

    /** The grpc-alts server (on grpc-netty-shaded), started on first use. */
    Server alts() throws Exception {
      if (alts == null) {
        clientHandshaker();
        var group = new io.grpc.netty.shaded.io.netty.channel.MultiThreadIoEventLoopGroup(1,
            io.grpc.netty.shaded.io.netty.channel.nio.NioIoHandler.newFactory());
        alts = io.grpc.netty.shaded.io.grpc.netty.NettyServerBuilder
            .forAddress(new InetSocketAddress("127.0.0.1", 0),
                AltsServerCredentials.newBuilder().enableUntrustedAltsForTesting()
                    .setHandshakerAddressForTesting(
                        LocalHandshakerMain.hostAndPort(serverHandshaker))
                    .build())
            .bossEventLoopGroup(group)
            .workerEventLoopGroup(group)
            .channelType(
                io.grpc.netty.shaded.io.netty.channel.socket.nio.NioServerSocketChannel.class)
            .directExecutor()
            .addService(ChunkService.service())
            .build()
            .start();
        closing.add(() -> group.shutdownGracefully(0, 5, TimeUnit.SECONDS).sync());
        closing.add(stopping(alts));
      }
      return alts;
    }

    private static AutoCloseable stopping(Server server) {
      return () -> server.shutdownNow().awaitTermination(10, TimeUnit.SECONDS);
    }

    @Override
    public void close() throws Exception {
      for (int i = closing.size() - 1; i >= 0; i--) {
        closing.get(i).close();
      }
    }
  }

  /** Runs the comparison; see the class comment for the arguments. */
  public static void main(String[] args) throws Exception {
    int chunkBytes = args.length > 0 ? Integer.parseInt(args[0]) : 2 << 20;
    String[] variants = (args.length > 1 ? args[1] : "pinless,stock,stock,stock").split(",");
    int rounds = args.length > 2 ? Integer.parseInt(args[2]) : 12;
    double seconds = args.length > 3 ? Double.parseDouble(args[3]) : 2;
    int warmupRounds = args.length > 4 ? Integer.parseInt(args[4]) : 4;
    if (variants.length < 2 || variants.length % 2 != 0 || rounds < 2) {
      throw new IllegalArgumentException("needs variants in pairs and at least two rounds");
    }
    if (chunkBytes < 1 || chunkBytes > BYTES_PER_CALL) {
      throw new IllegalArgumentException("chunk bytes from 1 to " + BYTES_PER_CALL);
    }
    int count = BYTES_PER_CALL / chunkBytes;
    List<Client> clients = new ArrayList<>();
    try (Servers servers = new Servers()) {
      for (String variant : variants) {
        Client client = open(variant, servers);
        clients.add(client);
        client.download(count, chunkBytes); // connects, and checks one call end to end
      }
      System.out.printf(Locale.ROOT,
          "%s, %d-byte chunks, %d per call, windows of %.1f s, %d warm-up rounds%n",
          String.join(" / ", variants), chunkBytes, count, seconds, warmupRounds);
      for (int r = 0; r < warmupRounds; r++) {
        for (int v = 0; v < variants.length; v++) {
          window(clients.get(turn(r, v, variants.length)), count, chunkBytes, seconds);
        }
      }
      long aliased = PinlessMetrics.Metric.MESSAGE_BYTES_ALIASED.value();
      long copied = PinlessMetrics.Metric.MESSAGE_BYTES_COPIED.value();
      long[] parsedByCopying = new long[variants.length];
      long[] payload = new long[variants.length];
      for (int v = 0; v < variants.length; v++) {
        parsedByCopying[v] = clients.get(v).parsedByCopying();
      }
      int pairs = variants.length / 2;
      double[][][] ratios = new double[pairs][Window.NAMES.length][rounds];
      List<List<Window>> all = new ArrayList<>();
      for (String ignored : variants) {
        all.add(new ArrayList<>());
      }
      System.out.printf(Locale.ROOT, "round%s%n", header(variants));
      for (int r = 0; r < rounds; r++) {
        Window[] got = new Window[variants.length];
        for (int k = 0; k < variants.length; k++) {
          int v = turn(r, k, variants.length);
          got[v] = window(clients.get(v), count, chunkBytes, seconds);
          all.get(v).add(got[v]);
          payload[v] += got[v].payloadBytes();
        }
        StringBuilder line = new StringBuilder(String.format(Locale.ROOT, "%5d", r + 1));
        for (Window w : got) {
          line.append(String.format(Locale.ROOT, " %7.0f %6.3f %6.3f %7.4f %7.4f",
              w.megabytesPerSecond(), w.loopCpuPerByte(), w.cpuPerByte(), w.loopHeapPerByte(),
              w.heapPerByte()));
        }
        for (int p = 0; p < pairs; p++) {
          for (int f = 0; f < Window.NAMES.length; f++) {
            ratios[p][f][r] = got[2 * p].get(f) / got[2 * p + 1].get(f);
          }
          line.append(String.format(Locale.ROOT, " %5.2f", ratios[p][0][r]));
        }
        System.out.println(line);
      }
      for (int v = 0; v < variants.length; v++) {
        StringBuilder line = new StringBuilder(
            String.format(Locale.ROOT, "median, %s (column %d):", variants[v], v + 1));
        for (int f = 0; f < Window.NAMES.length; f++) {
          double[] values = new double[rounds];
          for (int r = 0; r < rounds; r++) {
            values[r] = all.get(v).get(r).get(f);
          }
          line.append(String.format(Locale.ROOT, " %s %.4g;", Window.NAMES[f], median(values)));
        }
        System.out.println(line);
      }
      for (int p = 0; p < pairs; p++) {
        for (int f = 0; f < Window.NAMES.length; f++) {
          Interleaved.summarize(String.format(Locale.ROOT, "%s (%d) / %s (%d), %s",
              variants[2 * p], 2 * p + 1, variants[2 * p + 1], 2 * p + 2, Window.NAMES[f]),
              ratios[p][f]);
        }
      }
      System.out.printf(Locale.ROOT,
          "pinless's message bytes in the measured rounds: %,d aliased, %,d copied%n",
          PinlessMetrics.Metric.MESSAGE_BYTES_ALIASED.value() - aliased,
          PinlessMetrics.Metric.MESSAGE_BYTES_COPIED.value() - copied);
      for (int v = 0; v < variants.length; v++) {
        if (clients.get(v).receiving().parsedByCopying() != null) {
          long n = clients.get(v).parsedByCopying() - parsedByCopying[v];
          System.out.printf(Locale.ROOT,
              "%s (%d): %,d of %,d message bytes parsed by copying (%.1f%%)%n",
              variants[v], v + 1, n, payload[v], 100.0 * n / payload[v]);
        }
      }
    } finally {
      for (Client c : clients) {
        c.close();
      }
    }
  }

  /**
   * The variant whose window is {@code k}th in round {@code r}. The order rotates every round and
   * runs backwards every other round, so each variant follows each of its neighbours as often:
   * a window that leaves work behind (garbage to collect, a cold cache) falls on both alike.
   */
  static int turn(int r, int k, int n) {
    return Math.floorMod(r % 2 == 0 ? r + k : r - k, n);
  }

  private static String header(String[] variants) {
    StringBuilder h = new StringBuilder();
    for (int v = 0; v < variants.length; v++) {
      h.append(String.format(Locale.ROOT, " %7s %6s %6s %7s %7s",
          (v + 1) + " MB/s", "loop", "proc", "loop", "proc"));
    }
    for (int p = 0; p < variants.length / 2; p++) {
      h.append(String.format(Locale.ROOT, " %5s", (2 * p + 1) + "/" + (2 * p + 2)));
    }
    return h.append("\n     ").append(" ".repeat(8)).append(
        "(per variant: MB/s, CPU ns/B by the client's loop and the process, heap B/B by each;"
            + " per pair: MB/s ratio)").toString();
  }

  /** A connected client of {@code variant} (see the class comment) to its server in {@code servers}. */
  static Client open(String variant, Servers servers) throws Exception {
    Matcher several = CONNECTIONS.matcher(variant);
    return several.matches()
        ? open(variant, several.group(1), Integer.parseInt(several.group(2)), servers)
        : open(variant, variant, 1, servers);
  }

  /** A client named {@code name} of {@code variant} with {@code connections} channels. */
  private static Client open(String name, String variant, int connections, Servers servers)
      throws Exception {
    if (variant.startsWith("pinless") && variant.endsWith(PROTO)) {
      Client zeroCopy = open(name, variant.substring(0, variant.length() - PROTO.length()),
          connections, servers);
      Receiving protobuf = Receiving.protobuf();
      return new Client(name, zeroCopy.channels(), zeroCopy.loopThread(),
          ChunkService.download(protobuf.marshaller()), protobuf, zeroCopy.loops());
    }
    Variant client = new Variant(name, connections);
    switch (variant) {
      case "pinless-tls":
      case "pinless-tls-openssl":
        return netty(client, servers.tls(variant.endsWith("openssl")),
            BenchTransport.credentials(variant).channel(), Receiving.zeroCopy());
      case "stock-tls":
      case "stock-tls-openssl":
        return netty(client, servers.tls(variant.endsWith("openssl")),
            BenchTransport.credentials(variant).channel(), Receiving.protobuf());
      case "pinless":
        return netty(client, servers.plaintext(), PinlessChannelCredentials.insecure(),
            Receiving.zeroCopy());
      case "stock":
        return netty(client, servers.plaintext(), InsecureChannelCredentials.create(),
            Receiving.protobuf());
      case "pinless-alts":
        return netty(client, servers.alts(),
            PinlessChannelCredentials.altsBuilder()
                .handshakerAddress(servers.clientHandshaker()).build(),
            Receiving.zeroCopy());
      case "stock-alts":
        return shaded(client, servers.alts(),
            AltsChannelCredentials.newBuilder().enableUntrustedAltsForTesting()
                .setHandshakerAddressForTesting(servers.clientHandshaker()).build(),
            Receiving.protobuf());
      default:
        throw new IllegalArgumentException(
            "unknown variant " + variant + " (pinless, stock, pinless-alts, stock-alts, "
                + "pinless-tls, stock-tls, pinless-tls-openssl or stock-tls-openssl; a pinless "
                + "one with " + PROTO + "; any with -x2 to -x99 for that many connections)");
    }
  }

  /** A pinless variant's suffix for protobuf's marshaller instead of the zero-copy one. */
  static final String PROTO = "-proto";
  /** A variant's suffix for that many connections on its one event loop, as {@code -x4}. */
  private static final Pattern CONNECTIONS = Pattern.compile("(.+)-x([2-9]|[1-9][0-9])");

  /** A client's name and how many connections it opens. */
  private record Variant(String name, int connections) {}

  /** A client on grpc-netty with one event loop thread of its own. */
  private static Client netty(Variant variant, Server server, ChannelCredentials creds,
      Receiving receiving) throws Exception {
    EventLoopGroup group = new MultiThreadIoEventLoopGroup(1, NioIoHandler.newFactory());
    List<ManagedChannel> channels = new ArrayList<>();
    for (int i = 0; i < variant.connections(); i++) {
      channels.add(io.grpc.netty.NettyChannelBuilder
          .forAddress(new InetSocketAddress("127.0.0.1", server.getPort()), creds)
          .eventLoopGroup(group)
          .channelType(NioSocketChannel.class)
          .withOption(ChannelOption.ALLOCATOR, PooledByteBufAllocator.DEFAULT)
          .directExecutor()
          .maxInboundMessageSize(MAX_MESSAGE_BYTES)
          .build());
    }
    long thread = group.next().submit(() -> Thread.currentThread().getId()).get();
    return new Client(variant.name(), channels, thread,
        ChunkService.download(receiving.marshaller()), receiving,
        () -> group.shutdownGracefully(0, 5, TimeUnit.SECONDS).sync());
  }

  /** A client on grpc-netty-shaded (which grpc-alts runs on) with one event loop thread. */
  private static Client shaded(Variant variant, Server server, ChannelCredentials creds,
      Receiving receiving) throws Exception {
    var group = new io.grpc.netty.shaded.io.netty.channel.MultiThreadIoEventLoopGroup(1,
        io.grpc.netty.shaded.io.netty.channel.nio.NioIoHandler.newFactory());
    List<ManagedChannel> channels = new ArrayList<>();
    for (int i = 0; i < variant.connections(); i++) {
      channels.add(io.grpc.netty.shaded.io.grpc.netty.NettyChannelBuilder
          .forAddress(new InetSocketAddress("127.0.0.1", server.getPort()), creds)
          .eventLoopGroup(group)
          .channelType(io.grpc.netty.shaded.io.netty.channel.socket.nio.NioSocketChannel.class)
          .directExecutor()
          .maxInboundMessageSize(MAX_MESSAGE_BYTES)
          .build());
    }
    long thread = group.next().submit(() -> Thread.currentThread().getId()).get();
    return new Client(variant.name(), channels, thread,
        ChunkService.download(receiving.marshaller()), receiving,
        () -> group.shutdownGracefully(0, 5, TimeUnit.SECONDS).sync());
  }

  /** Downloads until {@code seconds} have passed (whole calls); returns the window's figures. */
  private static Window window(Client client, int count, int size, double seconds)
      throws Exception {
    return window(() -> client.download(count, size), client.loopThread(), seconds);
  }

  /** One download; returns the payload bytes received. */
  interface Download {
    long run() throws Exception;
  }

  /**
   * Runs {@code download} until {@code seconds} have passed (whole downloads); returns the
   * window's figures, the loop's those of thread {@code loopThread}.
   */
  static Window window(Download download, long loopThread, double seconds) throws Exception {
    long heap = Interleaved.allocatedBytes();
    long loopHeap = THREADS.getThreadAllocatedBytes(loopThread);
    long cpu = ReadPathBenchmark.Bytes.processCpuNanos();
    long loopCpu = THREADS.getThreadCpuTime(loopThread);
    long start = System.nanoTime();
    long end = start + (long) (seconds * 1e9);
    long payload = 0;
    long now;
    do {
      payload += download.run();
      now = System.nanoTime();
    } while (now < end);
    double p = payload;
    return new Window(
        payload,
        payload * 1e3 / (now - start),
        (THREADS.getThreadCpuTime(loopThread) - loopCpu) / p,
        (ReadPathBenchmark.Bytes.processCpuNanos() - cpu) / p,
        (THREADS.getThreadAllocatedBytes(loopThread) - loopHeap) / p,
        (Interleaved.allocatedBytes() - heap) / p);
  }

  static double median(double[] values) {
    double[] sorted = values.clone();
    Arrays.sort(sorted);
    int n = sorted.length;
    return n % 2 == 1 ? sorted[n / 2] : (sorted[n / 2 - 1] + sorted[n / 2]) / 2;
  }
}
