package io.pinless.alts.handshake;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertThrows;

import io.grpc.InsecureServerCredentials;
import io.grpc.Server;
import io.grpc.ServerServiceDefinition;
import io.grpc.netty.NettyServerBuilder;
import io.grpc.stub.ServerCalls;
import io.grpc.stub.StreamObserver;
import io.netty.bootstrap.Bootstrap;
import io.netty.bootstrap.ServerBootstrap;
import io.netty.channel.Channel;
import io.netty.channel.ChannelHandler;
import io.netty.channel.ChannelInboundHandlerAdapter;
import io.netty.channel.EventLoopGroup;
import io.netty.channel.socket.nio.NioServerSocketChannel;
import io.netty.channel.socket.nio.NioSocketChannel;
import io.pinless.alts.handshake.proto.HandshakerReq;
import io.pinless.alts.handshake.proto.HandshakerResp;
import io.pinless.testing.Handshakers;
import io.pinless.testing.NettyTransports;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.util.List;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/**
 * The bound on requests outstanding at handshaker services: every slot comes back, whatever
 * happens to the handshake that held it or waited for it.
 */
class HandshakerCallsTest {
  /** Requests the fake handshaker received, in order; it answers none of them. */
  private final BlockingQueue<HandshakerReq> received = new LinkedBlockingQueue<>();
  private Server handshaker;
  private EventLoopGroup serverGroup;
  private Channel listener;

  @BeforeEach
  void start() throws Exception {
    handshaker = NettyServerBuilder.forAddress(
            new InetSocketAddress(InetAddress.getLoopbackAddress(), 0),
            InsecureServerCredentials.create())
        .addService(ServerServiceDefinition.builder(HandshakerProtocol.SERVICE_NAME)
            .addMethod(HandshakerProtocol.DO_HANDSHAKE,
                ServerCalls.asyncBidiStreamingCall(out -> new StreamObserver<HandshakerReq>() {
                  @Override
                  public void onNext(HandshakerReq req) {
                    received.add(req);
                  }

                  @Override
                  public void onError(Throwable t) {}

                  @Override
                  public void onCompleted() {
                    out.onCompleted();
                  }
                }))
            .build())
        .build()
        .start();
    serverGroup = NettyTransports.nio(1);
    listener = new ServerBootstrap()
        .group(serverGroup)
        .channel(NioServerSocketChannel.class)
        .childHandler(new Ignore())
        .bind(new InetSocketAddress(InetAddress.getLoopbackAddress(), 0)).sync().channel();
  }

  /** Takes the handshake bytes a client sends and never answers. */
  @ChannelHandler.Sharable
  private static final class Ignore extends ChannelInboundHandlerAdapter {}

  @AfterEach
  void stop() throws Exception {
    listener.close().sync();
    serverGroup.shutdownGracefully(0, 5, TimeUnit.SECONDS).sync();
    Handshakers.stop(handshaker);
  }

  /** A client handshake on {@code group}, its requests bounded by {@code calls}. */
  private Channel connect(EventLoopGroup group, HandshakerCalls calls) throws Exception {
    Channel ch = new Bootstrap()
        .group(group)
        .channel(NioSocketChannel.class)
        .handler(new AltsHandshakeHandler(
            true, Handshakers.address(handshaker), List.of(), 60_000, calls))
        .connect(listener.localAddress()).sync().channel();
    // The handshake starts on channelActive, in the task that completed the connect.
    ch.eventLoop().submit(() -> {}).sync();
    return ch;
  }

  @Test
  void aQueuedHandshakeWhoseEventLoopIsShutDownGivesBackItsSlot() throws Exception {
    HandshakerCalls calls = new HandshakerCalls(1);
    EventLoopGroup first = NettyTransports.nio(1);
    EventLoopGroup second = NettyTransports.nio(1);
    try {
      Channel holder = connect(first, calls);
      assertNotNull(received.poll(60, TimeUnit.SECONDS), "the first client_start");
      assertEquals(1, calls.outstanding());
      connect(second, calls);
      assertEquals(1, calls.waiting(), "the second handshake waits for the slot");

      second.shutdownGracefully(0, 0, TimeUnit.SECONDS).sync();
      // The first handshake ends: its slot would go to the second, whose event loop is gone.
      holder.close().sync();
      // The close task completes the promise, then queues channelInactive: once a task queued
      // after the close task has run, a second one runs after channelInactive.
      holder.eventLoop().submit(() -> {}).sync();
      holder.eventLoop().submit(() -> {}).sync();

      assertEquals(0, calls.outstanding(), "slots held");
      assertEquals(0, calls.waiting(), "requests waiting");
    } finally {
      first.shutdownGracefully(0, 5, TimeUnit.SECONDS).sync();
      second.shutdownGracefully(0, 5, TimeUnit.SECONDS).sync();
    }
  }

  @Test
  void aSendThatThrowsGivesBackItsSlotAndTheNextStillGetsOne() {
    HandshakerCalls calls = new HandshakerCalls(1);
    AtomicInteger sent = new AtomicInteger();
    calls.submit(sent::incrementAndGet);
    calls.submit(() -> {
      throw new RejectedExecutionException("event loop shut down");
    });
    calls.submit(sent::incrementAndGet);
    assertEquals(1, calls.outstanding());
    assertEquals(2, calls.waiting());

    assertThrows(RejectedExecutionException.class, calls::answered);
    assertEquals(2, sent.get(), "the request behind the one that threw is sent");
    assertEquals(1, calls.outstanding(), "only the request sent holds a slot");
    assertEquals(0, calls.waiting());
    calls.answered();
    assertEquals(0, calls.outstanding());
  }
}
