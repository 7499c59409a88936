package io.pinless.alts.handshake;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.grpc.ForwardingServerCall;
import io.grpc.InsecureServerCredentials;
import io.grpc.Metadata;
import io.grpc.Server;
import io.grpc.ServerCall;
import io.grpc.ServerCallHandler;
import io.grpc.ServerInterceptor;
import io.grpc.ServerInterceptors;
import io.grpc.netty.NettyServerBuilder;
import io.netty.bootstrap.Bootstrap;
import io.netty.bootstrap.ServerBootstrap;
import io.netty.buffer.ByteBuf;
import io.netty.buffer.ByteBufUtil;
import io.netty.buffer.PooledByteBufAllocator;
import io.netty.channel.Channel;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.ChannelInboundHandlerAdapter;
import io.netty.channel.ChannelInitializer;
import io.netty.channel.ChannelOption;
import io.netty.channel.EventLoopGroup;
import io.netty.channel.MultiThreadIoEventLoopGroup;
import io.netty.channel.nio.NioIoHandler;
import io.netty.channel.socket.nio.NioServerSocketChannel;
import io.netty.channel.socket.nio.NioSocketChannel;
import io.pinless.alts.AltsRecordCodec;
import io.pinless.alts.AltsRecordDecoder;
import io.pinless.alts.handshake.proto.HandshakerResp;
import io.pinless.read.ReadBudget;
import io.pinless.read.ReadOnReadyHandler;
import io.pinless.testing.Handshakers;
import java.io.ByteArrayOutputStream;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.util.List;
import java.util.Random;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * The handshake handler on its own, in plain Netty pipelines over loopback: after the handshake
 * the record codec takes its place, inside a read handler right in front of it (as pinless's
 * credentials install them) or as a pipeline entry of its own, and the first records, sent by
 * each end the moment its handshake ends, arrive whole (the server's behind its last handshake
 * bytes, so the client's handshake hands them on).
 */
class AltsHandshakeHandlerTest {
  private static final int MESSAGE_BYTES = 40_000;

  private Server clientHandshaker;
  private Server serverHandshaker;
  private EventLoopGroup group;

  /** Completed once the client has read {@link #GATE_BYTES}; the client's handshaker waits for it. */
  private final CompletableFuture<Void> gate = new CompletableFuture<>();
  /** How many bytes the client reads before its handshaker gives it its result. */
  private static final int GATE_BYTES = 10_000;

  @BeforeEach
  void start() throws Exception {
    // The client's handshaker holds back the answer that ends the client's handshake until the
    // client has read the server's first records too: so they always arrive behind the handshake.
    clientHandshaker = NettyServerBuilder.forAddress(
            new InetSocketAddress(InetAddress.getLoopbackAddress(), 0),
            InsecureServerCredentials.create())
        .addService(ServerInterceptors.intercept(
            new LocalHandshakerService("client-sa"), new HoldResult()))
        .build()
        .start();
    serverHandshaker = Handshakers.start("server-sa");
    group = new MultiThreadIoEventLoopGroup(2, NioIoHandler.newFactory());
  }

  @AfterEach
  void stop() throws Exception {
    group.shutdownGracefully(0, 5, TimeUnit.SECONDS).sync();
    Handshakers.stop(clientHandshaker, serverHandshaker);
  }

  /** Sends a response that carries the handshake's result only once {@link #gate} opens. */
  private final class HoldResult implements ServerInterceptor {
    @Override
    public <Q, R> ServerCall.Listener<Q> interceptCall(
        ServerCall<Q, R> call, Metadata headers, ServerCallHandler<Q, R> next) {
      return next.startCall(new ForwardingServerCall.SimpleForwardingServerCall<>(call) {
        @Override
        public void sendMessage(R message) {
          if (message instanceof HandshakerResp && ((HandshakerResp) message).hasResult()) {
            gate.thenRun(() -> super.sendMessage(message));
          } else {
            super.sendMessage(message);
          }
        }
      }, headers);
    }
  }

  /** Counts what the client reads, in front of everything, and opens the gate. */
  private final class ReadProbe extends ChannelInboundHandlerAdapter {
    private long bytes;

    /** @param msg owned: passed on */
    @Override
    public void channelRead(ChannelHandlerContext ctx, Object msg) {
      bytes += ((ByteBuf) msg).readableBytes();
      ctx.fireChannelRead(msg);
      if (bytes >= GATE_BYTES) {
        gate.complete(null);
      }
    }
  }

  /** Collects the plaintext a connection receives until it has {@code expected} bytes. */
  private static final class Received extends ChannelInboundHandlerAdapter {
    final CompletableFuture<byte[]> all = new CompletableFuture<>();
    final CompletableFuture<ChannelHandlerContext> handshaken = new CompletableFuture<>();
    private final ByteArrayOutputStream bytes = new ByteArrayOutputStream();
    private final int expected;
    /** Written to the peer the moment the handshake ends, or null. */
    private final byte[] sendAtOnce;

    Received(int expected, byte[] sendAtOnce) {
      this.expected = expected;
      this.sendAtOnce = sendAtOnce;
    }

    /** @param msg owned: copied, then released */
    @Override
    public void channelRead(ChannelHandlerContext ctx, Object msg) {
      ByteBuf buf = (ByteBuf) msg;
      try {
        bytes.writeBytes(ByteBufUtil.getBytes(buf));
      } finally {
        buf.release();
      }
      if (bytes.size() >= expected) {
        all.complete(bytes.toByteArray());
      }
    }

    @Override
    public void userEventTriggered(ChannelHandlerContext ctx, Object evt) {
      if (evt instanceof AltsHandshakeResult) {
        if (sendAtOnce != null) {
          ctx.writeAndFlush(ctx.alloc().buffer(sendAtOnce.length).writeBytes(sendAtOnce));
        }
        handshaken.complete(ctx);
      }
      ctx.fireUserEventTriggered(evt);
    }

    @Override
    public void exceptionCaught(ChannelHandlerContext ctx, Throwable cause) {
      all.completeExceptionally(cause);
      handshaken.completeExceptionally(cause);
    }
  }

  /** The handshake handler, behind a read handler when {@code withReadHandler}, then {@code last}. */
  private ChannelInitializer<Channel> pipeline(
      boolean client, boolean withReadHandler, Received last) {
    String handshaker = Handshakers.address(client ? clientHandshaker : serverHandshaker);
    return new ChannelInitializer<>() {
      @Override
      protected void initChannel(Channel ch) {
        if (client) {
          ch.pipeline().addLast("probe", new ReadProbe());
        }
        if (withReadHandler) {
          ch.pipeline().addLast(new ReadOnReadyHandler(new ReadBudget(1 << 20), false,
              ReadOnReadyHandler.ALTS_READ_BYTES));
        }
        ch.pipeline().addLast(new AltsHandshakeHandler(client, handshaker, List.of(), 20_000));
        ch.pipeline().addLast(last);
      }
    };
  }

  @ParameterizedTest(name = "with a read handler in front: {0}")
  @ValueSource(booleans = {true, false})
  void theCodecTakesTheHandshakesPlaceAndTheFirstRecordsArriveWhole(boolean withReadHandler)
      throws Exception {
    byte[] message = new byte[MESSAGE_BYTES];
    new Random(11).nextBytes(message);
    byte[] reply = new byte[2 * GATE_BYTES];
    new Random(12).nextBytes(reply);
    // Each end writes as soon as its handshake ends: the server's records reach the client right
    // behind the server's last handshake bytes, before the client's handshake has ended (its
    // handshaker's last answer waits until the client has read GATE_BYTES).
    Received atServer = new Received(MESSAGE_BYTES, reply);
    Received atClient = new Received(reply.length, message);
    Channel listener = new ServerBootstrap()
        .group(group)
        .channel(NioServerSocketChannel.class)
        .childOption(ChannelOption.ALLOCATOR, PooledByteBufAllocator.DEFAULT)
        .childHandler(pipeline(false, withReadHandler, atServer))
        .bind(new InetSocketAddress(InetAddress.getLoopbackAddress(), 0)).sync().channel();
    Channel client = null;
    try {
      client = new Bootstrap()
          .group(group)
          .channel(NioSocketChannel.class)
          .option(ChannelOption.ALLOCATOR, PooledByteBufAllocator.DEFAULT)
          .handler(pipeline(true, withReadHandler, atClient))
          .connect(listener.localAddress()).sync().channel();
      assertArrayEquals(message, atServer.all.get(20, TimeUnit.SECONDS));
      assertArrayEquals(reply, atClient.all.get(20, TimeUnit.SECONDS));

      Channel accepted = atServer.handshaken.get(20, TimeUnit.SECONDS).channel();
      for (Channel ch : List.of(client, accepted)) {
        CompletableFuture<Void> checked = new CompletableFuture<>();
        ch.eventLoop().execute(() -> {
          try {
            assertNull(ch.pipeline().get(AltsHandshakeHandler.class), "the handshake is gone");
            ReadOnReadyHandler reads = ch.pipeline().get(ReadOnReadyHandler.class);
            if (withReadHandler) {
              assertTrue(reads.hosted() instanceof AltsRecordDecoder, "the decoder runs in there");
              assertNull(ch.pipeline().get(AltsRecordCodec.class), "with no entry of its own");
            } else {
              assertNotNull(ch.pipeline().get(AltsRecordCodec.class), "an entry of its own");
            }
            assertEquals(ch.pipeline().get("probe") == null ? 2 : 3, ch.pipeline().toMap().size(),
                "the records' entry and the collector (and the probe): " + ch.pipeline().names());
            checked.complete(null);
          } catch (Throwable t) {
            checked.completeExceptionally(t);
          }
        });
        checked.get(10, TimeUnit.SECONDS);
      }
    } finally {
      if (client != null) {
        client.close().sync();
      }
      listener.close().sync();
    }
  }
}
