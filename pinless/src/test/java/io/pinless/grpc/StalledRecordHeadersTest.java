package io.pinless.grpc;

import static org.junit.jupiter.api.Assertions.assertTrue;

import io.grpc.Server;
import io.grpc.ServerCredentials;
import io.grpc.netty.NettyServerBuilder;
import io.netty.bootstrap.Bootstrap;
import io.netty.buffer.ByteBuf;
import io.netty.buffer.PooledByteBufAllocator;
import io.netty.buffer.Unpooled;
import io.netty.buffer.UnpooledByteBufAllocator;
import io.netty.channel.Channel;
import io.netty.channel.ChannelDuplexHandler;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.ChannelInitializer;
import io.netty.channel.ChannelOption;
import io.netty.channel.ChannelPromise;
import io.netty.channel.EventLoopGroup;
import io.netty.channel.socket.nio.NioServerSocketChannel;
import io.netty.channel.socket.nio.NioSocketChannel;
import io.netty.handler.ssl.ClientAuth;
import io.netty.handler.ssl.SslProvider;
import io.netty.util.internal.SocketUtils;
import io.pinless.alts.handshake.AltsHandshakeHandler;
import io.pinless.alts.handshake.AltsHandshakeResult;
import io.pinless.testing.NettyTransports;
import io.pinless.testing.PoolBytes;
import io.pinless.testing.TestCertificates;
import io.pinless.tls.TlsHandshakeHandler;
import io.pinless.tls.TlsHandshakeResult;
import java.net.InetSocketAddress;
import java.nio.channels.SocketChannel;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import org.junit.jupiter.api.extension.RegisterExtension;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * 1,000 real loopback connections to a pinless server (its own credentials, NIO, a pooled
 * allocator of its own) whose clients finish the handshake, then send only a record header
 * claiming the largest record and then one byte at a time, each in a read of its own: the server
 * holds at most 4 KiB per connection, counted as the pooled bytes its connections' buffers take.
 *
 * <p>Each byte is sent on every connection, then the test waits until the server has read every
 * byte the clients wrote (counted by the server's socket channels) and its event loop has handled
 * them; so each byte is a read of its own.
 */
class StalledRecordHeadersTest {
  private static final int CONNECTIONS = 1000;
  /** Single bytes sent after the header, each in its own read. */
  private static final int BYTES = 64;
  /** 4 KiB: the most a stalled connection may hold. */
  private static final long MAX_HELD_PER_CONNECTION = 4096;
  /** Handshakes in flight at once. */
  private static final int BATCH = 50;

  @RegisterExtension
  static final LocalHandshakers handshakers = new LocalHandshakers();

  /** Bytes the server's connections read from their sockets, with a wait for a total. */
  static final class Received {
    private long bytes;

    synchronized void add(int n) {
      bytes += n;
      notifyAll();
    }

    /** Waits (60 s at most, a hang guard) until {@code total} bytes have been read. */
    synchronized void await(long total) throws InterruptedException, TimeoutException {
      long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
      while (bytes < total) {
        long left = deadline - System.nanoTime();
        if (left <= 0) {
          throw new TimeoutException(bytes + " of " + total + " bytes read by the server");
        }
        TimeUnit.NANOSECONDS.timedWait(this, left);
      }
    }
  }

  static final Received RECEIVED = new Received();

  /** A server channel whose connections count the bytes they read. */
  public static final class CountingServerChannel extends NioServerSocketChannel {
    @Override
    protected int doReadMessages(List<Object> buf) throws Exception {
      SocketChannel socket = SocketUtils.accept(javaChannel());
      if (socket == null) {
        return 0;
      }
      buf.add(new NioSocketChannel(this, socket) {
        @Override
        protected int doReadBytes(ByteBuf byteBuf) throws Exception {
          int n = super.doReadBytes(byteBuf);
          if (n > 0) {
            RECEIVED.add(n);
          }
          return n;
        }
      });
      return 1;
    }
  }

  /** Counts the bytes a client writes, at the head of its pipeline. */
  static final class Written extends ChannelDuplexHandler {
    static long total;

    @Override
    public void write(ChannelHandlerContext ctx, Object msg, ChannelPromise promise) {
      if (msg instanceof ByteBuf) {
        synchronized (Written.class) {
          total += ((ByteBuf) msg).readableBytes();
        }
      }
      ctx.write(msg, promise);
    }

    static synchronized long total() {
      return total;
    }
  }

  /** Takes the record stage the handshake ends with and drops it: the client writes raw bytes. */
  static final class Stalling extends ChannelDuplexHandler {
    final CompletableFuture<Integer> largestRecord = new CompletableFuture<>();

    @Override
    public void userEventTriggered(ChannelHandlerContext ctx, Object evt) {
      if (evt instanceof AltsHandshakeResult) {
        AltsHandshakeResult result = (AltsHandshakeResult) evt;
        result.takeRecordStage().release();
        largestRecord.complete(result.maxFrameSize());
      } else if (evt instanceof TlsHandshakeResult) {
        ((TlsHandshakeResult) evt).takeRecordStage().release();
        largestRecord.complete(5 + (1 << 14) + 2048);
      } else {
        ctx.fireUserEventTriggered(evt);
      }
    }

    @Override
    public void exceptionCaught(ChannelHandlerContext ctx, Throwable cause) {
      largestRecord.completeExceptionally(cause);
    }

    @Override
    public void channelInactive(ChannelHandlerContext ctx) {
      largestRecord.completeExceptionally(new IllegalStateException("closed before the header"));
      ctx.fireChannelInactive();
    }
  }

  /** The header of a record of {@code recordBytes} in all. */
  private static byte[] header(String security, int recordBytes) {
    if (security.equals("ALTS")) {
      int length = recordBytes - 4;
      return new byte[] {(byte) length, (byte) (length >>> 8), (byte) (length >>> 16),
          (byte) (length >>> 24), 6, 0, 0, 0};
    }
    int length = recordBytes - 5;
    return new byte[] {23, 3, 3, (byte) (length >>> 8), (byte) length};
  }

  @ParameterizedTest
  @ValueSource(strings = {"ALTS", "TLS"})
  void aThousandConnectionsStalledInTheLargestRecordHoldAtMost4KiBEach(String security)
      throws Exception {
    boolean alts = security.equals("ALTS");
    // One arena and no thread caches: live bytes are what live buffers take.
    PooledByteBufAllocator serverAlloc =
        new PooledByteBufAllocator(true, 1, 1, 8192, 9, 0, 0, false);
    EventLoopGroup boss = NettyTransports.nio(1);
    EventLoopGroup worker = NettyTransports.nio(1);
    EventLoopGroup clients = NettyTransports.nio(1);
    ServerCredentials creds = alts
        ? PinlessServerCredentials.altsBuilder().handshakerAddress(handshakers.serverAddress())
            .build()
        : PinlessServerCredentials.tls(TestCertificates.serverContext(
            SslProvider.JDK, TestCertificates.SERVER, ClientAuth.NONE));
    ExecutorService calls = ServerThreads.newPool();
    Server server = NettyServerBuilder.forAddress(new InetSocketAddress("127.0.0.1", 0), creds)
        .channelType(CountingServerChannel.class)
        .bossEventLoopGroup(boss)
        .workerEventLoopGroup(worker)
        .withChildOption(ChannelOption.ALLOCATOR, serverAlloc)
        .executor(calls)
        .addService(TestService.definition())
        .build()
        .start();
    List<Channel> channels = new ArrayList<>();
    try {
      Bootstrap bootstrap = new Bootstrap().group(clients).channel(NioSocketChannel.class)
          .option(ChannelOption.ALLOCATOR, UnpooledByteBufAllocator.DEFAULT);
      int recordBytes = 0;
      for (int start = 0; start < CONNECTIONS; start += BATCH) {
        List<CompletableFuture<Integer>> handshakes = new ArrayList<>();
        for (int i = start; i < start + BATCH; i++) {
          Stalling stalling = new Stalling();
          handshakes.add(stalling.largestRecord);
          channels.add(bootstrap.handler(new ChannelInitializer<Channel>() {
            @Override
            protected void initChannel(Channel ch) throws Exception {
              ch.pipeline().addLast(new Written());
              ch.pipeline().addLast(alts
                  ? new AltsHandshakeHandler(true, handshakers.clientAddress(), List.of(), 30_000)
                  : new TlsHandshakeHandler(TestCertificates.clientContext(SslProvider.JDK, null)
                      .newEngine(ch.alloc(), "localhost", 443), Runnable::run, 30_000));
              ch.pipeline().addLast(stalling);
            }
          }).connect(new InetSocketAddress("127.0.0.1", server.getPort())).sync().channel());
        }
        for (CompletableFuture<Integer> handshake : handshakes) {
          recordBytes = handshake.get(60, TimeUnit.SECONDS);
        }
      }
      RECEIVED.await(Written.total());
      long settled = heldOnTheLoop(worker, serverAlloc);

      byte[] header = header(security, recordBytes);
      sendToAll(channels, header);
      for (int b = 0; b < BYTES; b++) {
        sendToAll(channels, new byte[] {(byte) b});
      }
      long held = heldOnTheLoop(worker, serverAlloc);
      for (Channel ch : channels) {
        assertTrue(ch.isActive(), "the server closed a stalled connection");
      }
      System.out.printf(Locale.ROOT, "stalled %s: %d connections, a %d-byte record, %d bytes"
              + " received each: %d pooled bytes each (%d after the handshakes)%n", security,
          CONNECTIONS, recordBytes, header.length + BYTES, held / CONNECTIONS,
          settled / CONNECTIONS);
      assertTrue(held <= MAX_HELD_PER_CONNECTION * CONNECTIONS,
          held / CONNECTIONS + " pooled bytes per connection");
    } finally {
      for (Channel ch : channels) {
        ch.close();
      }
      ServerThreads.stop(server, calls);
      clients.shutdownGracefully(0, 5, TimeUnit.SECONDS).sync();
      worker.shutdownGracefully(0, 5, TimeUnit.SECONDS).sync();
      boss.shutdownGracefully(0, 5, TimeUnit.SECONDS).sync();
    }
  }

  /** Writes {@code bytes} on every channel, then waits until the server has read them all. */
  private static void sendToAll(List<Channel> channels, byte[] bytes) throws Exception {
    for (Channel ch : channels) {
      ch.writeAndFlush(Unpooled.wrappedBuffer(bytes));
    }
    channels.get(channels.size() - 1).eventLoop().submit(() -> { }).get(60, TimeUnit.SECONDS);
    RECEIVED.await(Written.total());
  }

  /** The server pool's live bytes, read on its event loop once the reads so far are handled. */
  private static long heldOnTheLoop(EventLoopGroup worker, PooledByteBufAllocator alloc)
      throws Exception {
    return worker.next().submit(() -> PoolBytes.liveBytes(alloc)).get(60, TimeUnit.SECONDS);
  }
}
