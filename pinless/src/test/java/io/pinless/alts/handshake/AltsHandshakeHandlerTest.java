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
import io.netty.channel.socket.nio.NioServerSocketChannel;
import io.netty.channel.socket.nio.NioSocketChannel;
import io.pinless.alts.handshake.proto.HandshakerResp;
import io.pinless.read.ReadBudget;
import io.pinless.connection.ConnectionHandler;
import io.pinless.testing.Handshakers;
import io.pinless.testing.NettyTransports;
import java.io.ByteArrayOutputStream;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.util.ArrayList;
import java.util.List;
import java.util.Random;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/**
 * The handshake handler on its own, in plain Netty pipelines over loopback: after the handshake
 * the record codec takes its place, inside a read handler right in front of it (as pinless's
 * credentials install them) or as a pipeline entry of its own, and the first records, sent by
 * each end the moment its handshake ends, arrive whole (the client's behind its last handshake
 * bytes, so the server's handshake hands them on).
 */
class AltsHandshakeHandlerTest {
  private static final int MESSAGE_BYTES = 40_000;

  private Server clientHandshaker;
  private Server serverHandshaker;
  private EventLoopGroup group;

  /** Completed once the server has read {@link #GATE_BYTES}; the server's handshaker waits for it. */
  private final CompletableFuture<Void> gate = new CompletableFuture<>();
  /** How many bytes the server reads before its handshaker gives it its result. */
  private static final int GATE_BYTES = 10_000;
  /** The bytes that open the gate in this test. */
  private int gateBytes = GATE_BYTES;

  @BeforeEach
  void start() throws Exception {
    // The server's handshaker holds back the answer that ends the server's handshake until the
    // server has read the client's first records too: so they always arrive behind the handshake.
    serverHandshaker = NettyServerBuilder.forAddress(
            new InetSocketAddress(InetAddress.getLoopbackAddress(), 0),
            InsecureServerCredentials.create())
        .addService(ServerInterceptors.intercept(
            new LocalHandshakerService("server-sa"), new HoldResult()))
        .build()
        .start();
    clientHandshaker = Handshakers.start("client-sa");
    group = NettyTransports.nio(2);
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

  /** Counts what the server reads, in front of everything, and opens the gate. */
  private final class ReadProbe extends ChannelInboundHandlerAdapter {
    private long bytes;

    /** @param msg owned: passed on */
    @Override
    public void channelRead(ChannelHandlerContext ctx, Object msg) {
      bytes += ((ByteBuf) msg).readableBytes();
      ctx.fireChannelRead(msg);
      if (bytes >= gateBytes) {
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
    /** Whether it installs the record stage, as pinless's negotiator does. */
    private final boolean install;

    Received(int expected, byte[] sendAtOnce, boolean install) {
      this.expected = expected;
      this.sendAtOnce = sendAtOnce;
      this.install = install;
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
        if (install) {
          ctx.pipeline().get(ConnectionHandler.class)
              .install(((AltsHandshakeResult) evt).takeRecordStage(), null);
        }
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

  /** A listening server whose connections end in {@code last}. */
  private Channel listen(Received last) throws InterruptedException {
    return new ServerBootstrap()
        .group(group)
        .channel(NioServerSocketChannel.class)
        .childOption(ChannelOption.ALLOCATOR, PooledByteBufAllocator.DEFAULT)
        .childHandler(pipeline(false, last))
        .bind(new InetSocketAddress(InetAddress.getLoopbackAddress(), 0)).sync().channel();
  }

  /** A client connection to {@code listener} that ends in {@code last}. */
  private Channel connect(Channel listener, Received last) throws InterruptedException {
    return new Bootstrap()
        .group(group)
        .channel(NioSocketChannel.class)
        .option(ChannelOption.ALLOCATOR, PooledByteBufAllocator.DEFAULT)
        .handler(pipeline(true, last))
        .connect(listener.localAddress()).sync().channel();
  }

  /** A connection handler, the handshake handler, then {@code last}. */
  private ChannelInitializer<Channel> pipeline(boolean client, Received last) {
    String handshaker = Handshakers.address(client ? clientHandshaker : serverHandshaker);
    return new ChannelInitializer<>() {
      @Override
      protected void initChannel(Channel ch) {
        if (!client) {
          ch.pipeline().addLast("probe", new ReadProbe());
        }
        ch.pipeline().addLast(new ConnectionHandler(new ReadBudget(1 << 20), false, 32768));
        ch.pipeline().addLast(new AltsHandshakeHandler(client, handshaker, List.of(), 20_000));
        ch.pipeline().addLast(last);
      }
    };
  }

  @Test
  void theInstalledStageOpensTheFirstRecordsThatCameBehindTheHandshake() throws Exception {
    byte[] message = new byte[MESSAGE_BYTES];
    new Random(11).nextBytes(message);
    byte[] reply = new byte[2 * GATE_BYTES];
    new Random(12).nextBytes(reply);
    // Each end writes as soon as its handshake ends: the client's records reach the server right
    // behind the client's last handshake bytes, before the server's handshake has ended (its
    // handshaker's last answer waits until the server has read GATE_BYTES).
    Received atServer = new Received(MESSAGE_BYTES, reply, true);
    Received atClient = new Received(reply.length, message, true);
    Channel listener = listen(atServer);
    Channel client = null;
    try {
      client = connect(listener, atClient);
      assertArrayEquals(message, atServer.all.get(20, TimeUnit.SECONDS));
      assertArrayEquals(reply, atClient.all.get(20, TimeUnit.SECONDS));

      Channel accepted = atServer.handshaken.get(20, TimeUnit.SECONDS).channel();
      for (Channel ch : List.of(client, accepted)) {
        CompletableFuture<Void> checked = new CompletableFuture<>();
        ch.eventLoop().execute(() -> {
          try {
            assertNull(ch.pipeline().get(AltsHandshakeHandler.class), "the handshake is gone");
            assertNotNull(ch.pipeline().get(ConnectionHandler.class), "one entry runs the stage");
            assertEquals(ch.pipeline().get("probe") == null ? 2 : 3, ch.pipeline().toMap().size(),
                "the connection's entry and the collector (and the probe): " + ch.pipeline().names());
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

  @Test
  void firstRecordsPastTheHandshakeLimitAreHeldUntilTheHandshakeEnds() throws Exception {
    // The client sends more than the handshake limit right behind its last handshake message,
    // and the server reads twice that limit before its handshaker answers.
    gateBytes = 2 * AltsHandshakeHandler.MAX_HANDSHAKE_BYTES;
    byte[] message = new byte[3 * AltsHandshakeHandler.MAX_HANDSHAKE_BYTES];
    new Random(13).nextBytes(message);
    Received atServer = new Received(message.length, null, true);
    Received atClient = new Received(1, message, true);
    Channel listener = listen(atServer);
    try {
      Channel client = connect(listener, atClient);
      assertArrayEquals(message, atServer.all.get(60, TimeUnit.SECONDS));
      client.close().sync();
    } finally {
      listener.close().sync();
    }
  }

  @Test
  void aPeerSendingMoreThanTheHandshakeHoldsFailsIt() throws Exception {
    gateBytes = Integer.MAX_VALUE;
    byte[] message = new byte[AltsHandshakeHandler.MAX_HELD_BYTES + 1];
    Received atServer = new Received(message.length, null, true);
    Received atClient = new Received(1, message, true);
    Channel listener = listen(atServer);
    try {
      connect(listener, atClient);
      ExecutionException e = org.junit.jupiter.api.Assertions.assertThrows(
          ExecutionException.class, () -> atServer.all.get(60, TimeUnit.SECONDS));
      assertTrue(e.getCause().getMessage().contains(
          "over " + AltsHandshakeHandler.MAX_HELD_BYTES + " bytes the ALTS handshake has not taken"),
          e.getCause().toString());
    } finally {
      listener.close().sync();
    }
  }

  @Test
  void aHandshakeWhoseStageNobodyInstallsFailsTheConnection() throws Exception {
    Received atServer = new Received(1, null, false);
    Received atClient = new Received(1, new byte[] {1, 2, 3}, false);
    Channel listener = listen(atServer);
    try {
      Channel client = connect(listener, atClient);
      // The end whose handshake ends first fails for want of a stage; the other sees the close.
      List<String> reasons = new ArrayList<>();
      for (Received end : List.of(atClient, atServer)) {
        ExecutionException e = org.junit.jupiter.api.Assertions.assertThrows(
            ExecutionException.class, () -> end.all.get(20, TimeUnit.SECONDS));
        reasons.add(e.getCause().getMessage());
      }
      assertTrue(reasons.stream().anyMatch(
          r -> r.contains("no handler installed the ALTS record stage")), reasons.toString());
      client.closeFuture().get(10, TimeUnit.SECONDS);
    } finally {
      listener.close().sync();
    }
  }
}
