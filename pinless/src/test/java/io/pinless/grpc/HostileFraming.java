package io.pinless.grpc;

import io.grpc.InsecureServerCredentials;
import io.grpc.Server;
import io.grpc.netty.NettyServerBuilder;
import io.netty.bootstrap.Bootstrap;
import io.netty.buffer.PooledByteBufAllocator;
import io.netty.buffer.UnpooledByteBufAllocator;
import io.netty.channel.Channel;
import io.netty.channel.ChannelHandler;
import io.netty.channel.ChannelInitializer;
import io.netty.channel.ChannelOption;
import io.netty.channel.EventLoopGroup;
import io.netty.channel.socket.nio.NioSocketChannel;
import io.netty.handler.ssl.ClientAuth;
import io.netty.handler.ssl.SslProvider;
import io.pinless.alts.handshake.AltsHandshakeHandler;
import io.pinless.testing.Handshakers;
import io.pinless.testing.NettyTransports;
import io.pinless.testing.PoolBytes;
import io.pinless.testing.RawHttp2Client;
import io.pinless.testing.TestCertificates;
import io.pinless.tls.TlsHandshakeHandler;
import java.lang.management.ManagementFactory;
import java.net.InetSocketAddress;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.concurrent.TimeUnit;

/**
 * What a server holds for messages a hostile client sends in the smallest pieces it may: DATA
 * frames of 1 byte and up, taking turns across four streams, in ALTS or TLS records of 1 byte and
 * up ({@link RawHttp2Client}). The messages stay incomplete, so gRPC holds every byte received.
 * Between two points of the same connection (so its fixed cost drops out), it counts the bytes the
 * server holds per payload byte received: heap after collection (less the pool's heap chunks) plus
 * the bytes live buffers take from the server's pool.
 *
 * <p>A heap figure is only meaningful with Netty's leak detector off: at PARANOID every tracked
 * buffer carries stack traces of its accesses, kilobytes each. {@code main} prints one line per
 * shape for {@link HostileFramingTest}, which forks it so; the test itself runs every shape at
 * PARANOID for the leaks.
 *
 * <pre>
 *   java -Xmx512m -XX:G1HeapRegionSize=32m -Dio.netty.leakDetection.level=disabled \
 *       -cp ... io.pinless.grpc.HostileFraming [stock | PLAINTEXT,STOCK_PLAINTEXT,ALTS,...]
 * </pre>
 */
final class HostileFraming {
  static final int STREAMS = 4;
  /** Each stream's message: longer than anything sent, so it stays incomplete. */
  static final int MESSAGE_BYTES = 1_000_000;
  /** Payload per stream at the first point and at the second, when measuring. */
  static final int FIRST_POINT = 50_000;
  static final int SECOND_POINT = 450_000;
  /** What a line of {@code main}'s output starts with. */
  static final String LINE = "hostile-framing";
  /** Waits that end on an event: long enough for any machine, short of hanging CI. */
  static final int HANG_GUARD_MINUTES = 10;

  private HostileFraming() {}

  /** The server's transport: pinless's, or stock grpc-netty's for reference. */
  enum Security {
    PLAINTEXT, ALTS, TLS_JDK, TLS_OPENSSL, STOCK_PLAINTEXT, STOCK_TLS_JDK;

    boolean secure() {
      return this != PLAINTEXT && this != STOCK_PLAINTEXT;
    }

    boolean stock() {
      return this == STOCK_PLAINTEXT || this == STOCK_TLS_JDK;
    }

    Server start(PooledByteBufAllocator alloc, String handshaker) throws Exception {
      InetSocketAddress any = new InetSocketAddress("127.0.0.1", 0);
      NettyServerBuilder builder;
      switch (this) {
        case PLAINTEXT:
          builder = NettyServerBuilder.forAddress(any, PinlessServerCredentials.insecure());
          break;
        case ALTS:
          builder = NettyServerBuilder.forAddress(any,
              PinlessServerCredentials.altsBuilder().handshakerAddress(handshaker).build());
          break;
        case STOCK_PLAINTEXT:
          builder = NettyServerBuilder.forAddress(any, InsecureServerCredentials.create());
          break;
        case STOCK_TLS_JDK:
          builder = NettyServerBuilder.forAddress(any).sslContext(TestCertificates.serverContext(
              SslProvider.JDK, TestCertificates.SERVER, ClientAuth.NONE));
          break;
        default:
          builder = NettyServerBuilder.forAddress(any,
              PinlessServerCredentials.tls(TestCertificates.serverContext(
                  this == TLS_JDK ? SslProvider.JDK : SslProvider.OPENSSL,
                  TestCertificates.SERVER, ClientAuth.NONE)));
          break;
      }
      return builder.addService(TestService.definition())
          .withChildOption(ChannelOption.ALLOCATOR, alloc)
          .build()
          .start();
    }

    /** The client's handshake handler, or null over plaintext. */
    ChannelHandler handshake(Channel ch, String handshaker) throws Exception {
      if (!secure()) {
        return null;
      }
      if (this == ALTS) {
        return new AltsHandshakeHandler(true, handshaker, List.of(), 10_000);
      }
      return new TlsHandshakeHandler(TestCertificates.clientContext(SslProvider.JDK, null)
          .newEngine(ch.alloc(), "localhost", 443), Runnable::run, 10_000);
    }
  }

  /** A way of sending: the transport, the DATA frame size and the record size. */
  record Shape(Security security, int frame, int record) {
    @Override
    public String toString() {
      return security + " " + frame + " " + record;
    }
  }

  /**
   * Every shape over every pinless transport: frames of 1, 100 and 16,384 bytes in full records,
   * and 16 KiB frames in records of 1 and 100 bytes.
   */
  static List<Shape> shapes(boolean stock) {
    List<Shape> shapes = new ArrayList<>();
    for (Security security : Security.values()) {
      if (security.stock() != stock) {
        continue;
      }
      for (int frame : new int[] {1, 100, 16384}) {
        shapes.add(new Shape(security, frame, 16384));
      }
      if (security.secure()) {
        for (int record : new int[] {1, 100}) {
          shapes.add(new Shape(security, 16384, record));
        }
      }
    }
    return shapes;
  }

  /** The local handshakers, client's and server's, for ALTS. */
  record Handshaker(Server client, Server server) implements AutoCloseable {
    static Handshaker start() throws Exception {
      return new Handshaker(Handshakers.start("client-sa"), Handshakers.start("server-sa"));
    }

    @Override
    public void close() throws InterruptedException {
      Handshakers.stop(client, server);
    }
  }

  /**
   * Sends {@code first} then {@code second} payload bytes per stream in {@code shape}, and returns
   * the bytes the server held per payload byte received between the two points.
   *
   * @throws IllegalStateException if the server closed the connection or answered a stream
   */
  static double heldPerPayloadByte(Shape shape, Handshaker handshakers, int first, int second)
      throws Exception {
    // One arena each, no thread caches: active bytes are what live buffers take.
    PooledByteBufAllocator serverAlloc =
        new PooledByteBufAllocator(true, 1, 1, 8192, 9, 0, 0, false);
    EventLoopGroup clientGroup = NettyTransports.nio(1);
    Server server = shape.security().start(serverAlloc, Handshakers.address(handshakers.server()));
    Channel channel = null;
    try {
      RawHttp2Client client = new RawHttp2Client(shape.security().secure(),
          "/" + TestService.CLIENT_STREAM.getFullMethodName(), STREAMS, MESSAGE_BYTES,
          shape.frame(), shape.record());
      channel = connect(new Bootstrap()
              .group(clientGroup)
              .option(ChannelOption.ALLOCATOR, UnpooledByteBufAllocator.DEFAULT),
          shape.security(), client, Handshakers.address(handshakers.client()), server.getPort());
      // Hang guards only: a shape of 1-byte records takes 15-45 s on a loaded 2-core machine.
      client.ready().get(HANG_GUARD_MINUTES, TimeUnit.MINUTES);
      client.sendUntil(first).get(HANG_GUARD_MINUTES, TimeUnit.MINUTES);
      long before = held(serverAlloc);
      long payloadBefore = client.payloadSent();
      client.sendUntil(second).get(HANG_GUARD_MINUTES, TimeUnit.MINUTES);
      long after = held(serverAlloc);
      long payload = client.payloadSent() - payloadBefore;
      if (payload != (long) STREAMS * (second - first) || !channel.isActive()) {
        throw new IllegalStateException(shape + ": " + payload + " bytes sent, connection "
            + (channel.isActive() ? "open" : "closed"));
      }
      return (double) (after - before) / payload;
    } finally {
      if (channel != null) {
        channel.close().sync();
      }
      clientGroup.shutdownGracefully(0, 5, TimeUnit.SECONDS).sync();
      server.shutdownNow().awaitTermination(10, TimeUnit.SECONDS);
    }
  }

  /**
   * Connects {@code client} to a local {@code port} over NIO, behind a flush gate and, when
   * {@code security} is secure, its handshake.
   *
   * @param bootstrap with its group and options set
   * @param handshaker the client's ALTS handshaker address
   */
  static Channel connect(Bootstrap bootstrap, Security security, RawHttp2Client client,
      String handshaker, int port) throws Exception {
    return bootstrap
        .channel(NioSocketChannel.class)
        .handler(new ChannelInitializer<Channel>() {
          @Override
          protected void initChannel(Channel ch) throws Exception {
            ch.pipeline().addLast(new RawHttp2Client.FlushGate());
            ChannelHandler handshake = security.handshake(ch, handshaker);
            if (handshake != null) {
              ch.pipeline().addLast(handshake);
            }
            ch.pipeline().addLast(client);
          }
        })
        .connect(new InetSocketAddress("127.0.0.1", port))
        .sync()
        .channel();
  }

  /**
   * Heap after collection, less the pool's heap chunks, plus the bytes live pooled buffers take:
   * the least of three readings, as a reading only gains from garbage made around it.
   */
  private static long held(PooledByteBufAllocator alloc) {
    long least = Long.MAX_VALUE;
    for (int i = 0; i < 3; i++) {
      System.gc();
      long heap = ManagementFactory.getMemoryMXBean().getHeapMemoryUsage().getUsed()
          - alloc.metric().usedHeapMemory();
      least = Math.min(least, heap + PoolBytes.liveBytes(alloc));
    }
    return least;
  }

  /**
   * Prints one line per shape: {@code hostile-framing SECURITY frame record bytesPerByte seconds}.
   * With {@code stock}, the stock transports instead; with a list of transports (pinless's or
   * stock's, say {@code PLAINTEXT,STOCK_PLAINTEXT}), only those.
   */
  public static void main(String[] args) throws Exception {
    boolean stock = args.length > 0 && args[0].equals("stock");
    List<Shape> shapes = new ArrayList<>(shapes(stock));
    if (args.length > 0 && !stock) {
      List<String> only = List.of(args[0].split(","));
      shapes.addAll(shapes(true));
      shapes.removeIf(s -> !only.contains(s.security().name()));
    }
    try (Handshaker handshakers = Handshaker.start()) {
      for (Shape shape : shapes) {
        long start = System.nanoTime();
        double held = heldPerPayloadByte(shape, handshakers, FIRST_POINT, SECOND_POINT);
        System.out.printf(Locale.ROOT, "%s %s %.3f %.1f s%n", LINE, shape, held,
            (System.nanoTime() - start) / 1e9);
      }
    }
  }
}
