package io.pinless.alts.handshake;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.grpc.CallOptions;
import io.grpc.Channel;
import io.grpc.ClientCall;
import io.grpc.ClientInterceptor;
import io.grpc.ForwardingClientCall;
import io.grpc.ForwardingClientCallListener;
import io.grpc.InsecureServerCredentials;
import io.grpc.ManagedChannel;
import io.grpc.Metadata;
import io.grpc.MethodDescriptor;
import io.grpc.Server;
import io.grpc.ServerServiceDefinition;
import io.grpc.netty.NettyChannelBuilder;
import io.grpc.netty.NettyServerBuilder;
import io.grpc.stub.ServerCalls;
import io.grpc.stub.StreamObserver;
import io.netty.bootstrap.Bootstrap;
import io.netty.bootstrap.ServerBootstrap;
import io.netty.buffer.Unpooled;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.ChannelInboundHandlerAdapter;
import io.netty.channel.ChannelInitializer;
import io.netty.channel.EventLoop;
import io.netty.channel.EventLoopGroup;
import io.netty.channel.socket.nio.NioServerSocketChannel;
import io.netty.channel.socket.nio.NioSocketChannel;
import io.pinless.alts.handshake.proto.HandshakerReq;
import io.pinless.alts.handshake.proto.HandshakerResp;
import io.pinless.alts.handshake.proto.HandshakerStatus;
import io.pinless.connection.ConnectionHandler;
import io.pinless.read.ReadBudget;
import io.pinless.testing.NettyTransports;
import java.lang.reflect.Field;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.Test;

/** A handshaker service that answers a request twice, both answers reaching the loop at once. */
class HandshakerAnswersTest {
  /** A hang guard only; every wait ends on an event. */
  private static final long HANG_GUARD_SECONDS = 60;

  @SuppressWarnings("unchecked")
  private static Map<String, ManagedChannel> handshakerChannels() throws Exception {
    Field field = AltsHandshakeHandler.class.getDeclaredField("HANDSHAKERS");
    field.setAccessible(true);
    return (Map<String, ManagedChannel>) field.get(null);
  }

  /** Sees the error the handshake handler fires. */
  private static final class Failure extends ChannelInboundHandlerAdapter {
    final CompletableFuture<Throwable> error = new CompletableFuture<>();

    @Override
    public void exceptionCaught(ChannelHandlerContext ctx, Throwable cause) {
      error.complete(cause);
    }
  }

  /**
   * The second answer fails the handshake (the handshaker answered more than it was asked), and
   * the process-wide bound on requests at handshakers gets back every slot the handshake took.
   */
  @Test
  void aSecondAnswerToOneRequestFailsTheHandshakeAndLeaksNoSlot() throws Exception {
    EventLoopGroup group = NettyTransports.nio(1);
    EventLoop loop = group.next();
    CountDownLatch loopHeld = new CountDownLatch(1);
    CountDownLatch bothDelivered = new CountDownLatch(2);
    AtomicInteger requests = new AtomicInteger();
    ServerServiceDefinition twice = ServerServiceDefinition.builder(HandshakerProtocol.SERVICE_NAME)
        .addMethod(HandshakerProtocol.DO_HANDSHAKE, ServerCalls.asyncBidiStreamingCall(
            out -> new StreamObserver<HandshakerReq>() {
              @Override
              public void onNext(HandshakerReq req) {
                if (requests.incrementAndGet() != 1) {
                  return;
                }
                // The connection's loop waits until both answers are delivered to the handler.
                loop.execute(() -> {
                  loopHeld.countDown();
                  await(bothDelivered);
                });
                await(loopHeld);
                HandshakerResp resp = HandshakerResp.newBuilder()
                    .setStatus(HandshakerStatus.newBuilder().setCode(0)).build();
                out.onNext(resp);
                out.onNext(resp);
              }

              @Override
              public void onError(Throwable t) {}

              @Override
              public void onCompleted() {}
            }))
        .build();
    Server handshaker = NettyServerBuilder.forAddress(
            new InetSocketAddress(InetAddress.getLoopbackAddress(), 0),
            InsecureServerCredentials.create())
        .addService(twice).build().start();
    String address = "127.0.0.1:" + handshaker.getPort();
    ManagedChannel counting = NettyChannelBuilder.forTarget(address).usePlaintext()
        .intercept(countDeliveries(bothDelivered)).build();
    handshakerChannels().put(address, counting);
    HandshakerCalls calls = new HandshakerCalls(HandshakerCalls.MAX_OUTSTANDING);
    Failure failure = new Failure();
    io.netty.channel.Channel listener = new ServerBootstrap().group(group)
        .channel(NioServerSocketChannel.class)
        .childHandler(new ChannelInitializer<io.netty.channel.Channel>() {
          @Override
          protected void initChannel(io.netty.channel.Channel ch) {
            ch.pipeline().addLast(new ConnectionHandler(new ReadBudget(1 << 20), false, 32768),
                new AltsHandshakeHandler(false, address, List.of(), 60_000, calls), failure);
          }
        })
        .bind(new InetSocketAddress(InetAddress.getLoopbackAddress(), 0)).sync().channel();
    EventLoopGroup peerGroup = NettyTransports.nio(1);
    try {
      io.netty.channel.Channel peer = new Bootstrap().group(peerGroup)
          .channel(NioSocketChannel.class).handler(new ChannelInboundHandlerAdapter())
          .connect(listener.localAddress()).sync().channel();
      peer.writeAndFlush(Unpooled.wrappedBuffer(new byte[] {0, 0, 0, 5, 1, 2, 3, 4, 5})).sync();
      Throwable error = failure.error.get(HANG_GUARD_SECONDS, TimeUnit.SECONDS);
      assertTrue(error.getMessage().contains("answered more requests than it was sent"),
          error.toString());
      loop.submit(() -> { }).sync();
      assertEquals(0, calls.outstanding(), "slots held after the handshake ended");
      assertEquals(0, calls.waiting(), "requests waiting for a slot");
      peer.close().sync();
    } finally {
      handshakerChannels().remove(address);
      counting.shutdownNow();
      listener.close().sync();
      peerGroup.shutdownGracefully(0, 5, TimeUnit.SECONDS).sync();
      group.shutdownGracefully(0, 5, TimeUnit.SECONDS).sync();
      handshaker.shutdownNow().awaitTermination(HANG_GUARD_SECONDS, TimeUnit.SECONDS);
    }
  }

  /** Counts down {@code delivered} for each answer the handshake handler's call delivers. */
  private static ClientInterceptor countDeliveries(CountDownLatch delivered) {
    return new ClientInterceptor() {
      @Override
      public <Q, R> ClientCall<Q, R> interceptCall(
          MethodDescriptor<Q, R> method, CallOptions options, Channel next) {
        return new ForwardingClientCall.SimpleForwardingClientCall<Q, R>(
            next.newCall(method, options)) {
          @Override
          public void start(Listener<R> listener, Metadata headers) {
            super.start(new ForwardingClientCallListener.SimpleForwardingClientCallListener<R>(
                listener) {
              @Override
              public void onMessage(R message) {
                super.onMessage(message);
                delivered.countDown();
              }
            }, headers);
          }
        };
      }
    };
  }

  private static void await(CountDownLatch latch) {
    try {
      if (!latch.await(HANG_GUARD_SECONDS, TimeUnit.SECONDS)) {
        throw new IllegalStateException("the fake handshaker waited in vain");
      }
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
  }
}
