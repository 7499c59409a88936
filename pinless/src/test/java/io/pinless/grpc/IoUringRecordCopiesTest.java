package io.pinless.grpc;

import static io.pinless.grpc.TestService.message;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeFalse;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import io.grpc.CallOptions;
import io.grpc.ManagedChannel;
import io.grpc.Server;
import io.grpc.netty.NettyChannelBuilder;
import io.grpc.netty.NettyServerBuilder;
import io.grpc.stub.ClientCalls;
import io.netty.buffer.PooledByteBufAllocator;
import io.netty.channel.ChannelOption;
import io.netty.channel.EventLoopGroup;
import io.pinless.PinlessMetrics.Metric;
import io.pinless.testing.NettyTransports;
import io.pinless.testing.NettyTransports.Socket;
import io.pinless.testing.PoolBytes;
import java.net.InetSocketAddress;
import java.util.Iterator;
import java.util.Locale;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;
import org.junit.jupiter.api.extension.RegisterExtension;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.MethodSource;

/**
 * ALTS and TLS downloads over io_uring, without and with a provided-buffer ring, and over epoll
 * for reference, set up as {@code pinless compare} sets up its download: pinless at both ends,
 * one event loop thread each, 2 MiB messages, a warm-up download first. What the read path
 * copies besides the cipher (the heads of records that reads cut, small DATA frames) is counted
 * by {@link Metric#RECORD_BYTES_COPIED} and {@link Metric#DATA_BYTES_COPIED}. Once the download
 * is over, the client's connection holds no pooled buffer.
 *
 * <p>Each mechanism gets its bound: the record stage's copies (records cut by reads) and the
 * slicer's (DATA frames too small, or in reads too sparse, to pin their buffer). Both follow how
 * reads happen to fall, so each is asserted alone with room for a loaded machine; their sum is
 * printed, and {@code pinless compare} measures it (docs/benchmarks.md).
 *
 * <p>The ring is the one the README asks for ({@link NettyTransports}: 2 MiB buffers, not
 * incremental). Its reads end where data has arrived, and a record a read cuts is copied: TLS's
 * 16 KiB records are still opened in place, and so are ALTS's, which an end reading from a ring
 * asks to be 16 KiB too.
 */
class IoUringRecordCopiesTest {
  private static final int MESSAGE_BYTES = 2 << 20;
  /** 128 MiB counted, after a warm-up of 32 MiB. */
  private static final int MESSAGES = 64;
  /**
   * Records opened in place: at most 1 payload byte in 20 copied by the record stage. A ring's
   * reads that cut 128 KiB ALTS records, each copied, cost it about 0.1.
   */
  private static final double RECORDS_IN_PLACE = 0.05;
  /** DATA sliced from the records: at most 1 payload byte in 20 copied by the frame slicer. */
  private static final double DATA_SLICED = 0.05;

  @RegisterExtension
  static final LocalHandshakers handshakers = new LocalHandshakers();

  /** Every transport with a ring and without, and over epoll for reference. */
  static Stream<Arguments> opensInPlace() {
    return Stream.of(
        Arguments.of(Socket.IO_URING, Transport.ALTS),
        Arguments.of(Socket.IO_URING, Transport.TLS_JDK),
        Arguments.of(Socket.IO_URING, Transport.TLS_OPENSSL),
        Arguments.of(Socket.IO_URING_RING, Transport.ALTS),
        Arguments.of(Socket.IO_URING_RING, Transport.TLS_JDK),
        Arguments.of(Socket.IO_URING_RING, Transport.TLS_OPENSSL),
        Arguments.of(Socket.EPOLL, Transport.ALTS),
        Arguments.of(Socket.EPOLL, Transport.TLS_JDK),
        Arguments.of(Socket.EPOLL, Transport.TLS_OPENSSL));
  }

  @ParameterizedTest
  @MethodSource("opensInPlace")
  void recordsAreOpenedInPlaceAndTheIdleConnectionHoldsNoBuffer(Socket socket,
      Transport transport) throws Exception {
    // Netty 4.1's incubator io_uring may leave a read pending, with its buffer, on an idle
    // connection, and its ALTS downloads copy 0.05-0.08: the README promises neither for it.
    assumeFalse(socket == Socket.IO_URING && NettyTransports.incubatorIoUring(),
        "Netty 4.1's incubator io_uring");
    Copies copies = downloadCopiesPerByte(socket, transport);
    assertTrue(copies.records() <= RECORDS_IN_PLACE, transport + " over " + socket + ": "
        + copies.records() + " record bytes copied per payload byte");
    assertTrue(copies.data() <= DATA_SLICED, transport + " over " + socket + ": "
        + copies.data() + " DATA bytes copied per payload byte");
  }

  /** Bytes the read path copied per payload byte, by the record stage and by the slicer. */
  private record Copies(double records, double data) {}

  /**
   * Downloads {@link #MESSAGES} messages over {@code socket} after a warm-up, checks that the
   * idle connection then holds no pooled buffer, and returns the read path's copies per payload
   * byte of the counted download.
   */
  private static Copies downloadCopiesPerByte(Socket socket, Transport transport)
      throws Exception {
    assumeTrue(NettyTransports.available(socket), socket + " is not available on this machine");
    // The client's connection allocates from a pool of its own, its ring (if any) from another.
    PooledByteBufAllocator connectionPool =
        new PooledByteBufAllocator(true, 1, 1, 8192, 9, 0, 0, false);
    EventLoopGroup serverLoop = NettyTransports.group(socket, 1);
    EventLoopGroup clientLoop = NettyTransports.group(socket, 1);
    ExecutorService calls = ServerThreads.newPool();
    Server server = NettyTransports.useRing(NettyServerBuilder.forAddress(
                new InetSocketAddress("127.0.0.1", 0),
                transport.server(handshakers.serverAddress())), socket)
        .bossEventLoopGroup(serverLoop)
        .workerEventLoopGroup(serverLoop)
        .channelType(NettyTransports.serverChannel(socket))
        .executor(calls)
        .addService(TestService.definition())
        .build()
        .start();
    ManagedChannel channel = NettyTransports.useRing(NettyChannelBuilder.forAddress(
                new InetSocketAddress("127.0.0.1", server.getPort()),
                transport.channel(handshakers.clientAddress())), socket)
        .eventLoopGroup(clientLoop)
        .channelType(NettyTransports.clientChannel(socket))
        .withOption(ChannelOption.ALLOCATOR, connectionPool)
        .maxInboundMessageSize(MESSAGE_BYTES)
        .build();
    try {
      download(channel, MESSAGES / 4);
      long dataCopied = Metric.DATA_BYTES_COPIED.value();
      long recordCopied = Metric.RECORD_BYTES_COPIED.value();
      download(channel, MESSAGES);
      long payload = (long) MESSAGES * MESSAGE_BYTES;
      long data = Metric.DATA_BYTES_COPIED.value() - dataCopied;
      long records = Metric.RECORD_BYTES_COPIED.value() - recordCopied;
      System.out.printf(Locale.ROOT, "%s over %s: %.4f copies per payload byte besides the "
          + "cipher's (DATA %d, record %d bytes of %d)%n",
          transport, socket, (double) (data + records) / payload, data, records, payload);

      // Idle: once the read budget has swept what gRPC released, the connection holds nothing.
      // The read budget's sweep timer releases what gRPC let go of.
      long idle = PoolBytes.liveBytesOnceSwept(connectionPool, bytes -> bytes == 0);
      assertEquals(0, idle, "pooled bytes the idle connection holds");
      return new Copies((double) records / payload, (double) data / payload);
    } finally {
      channel.shutdownNow().awaitTermination(10, TimeUnit.SECONDS);
      ServerThreads.stop(server, calls);
      clientLoop.shutdownGracefully(0, 5, TimeUnit.SECONDS).sync();
      serverLoop.shutdownGracefully(0, 5, TimeUnit.SECONDS).sync();
    }
  }

  /**
   * Downloads {@code messages} messages of {@link #MESSAGE_BYTES}: the first checked byte for
   * byte (the integration tests check every transport's bytes), the others by length.
   */
  private static void download(ManagedChannel channel, int messages) {
    Iterator<byte[]> download = ClientCalls.blockingServerStreamingCall(channel,
        TestService.SERVER_STREAM, CallOptions.DEFAULT.withDeadlineAfter(60, TimeUnit.SECONDS),
        TestService.streamRequest(messages, MESSAGE_BYTES));
    assertArrayEquals(message(MESSAGE_BYTES, 0), download.next(), "message 0");
    int n = 1;
    while (download.hasNext()) {
      assertEquals(MESSAGE_BYTES, download.next().length, "message " + n);
      n++;
    }
    assertEquals(messages, n);
  }
}
