package io.pinless.grpc;

import io.grpc.CallOptions;
import io.grpc.ManagedChannel;
import io.grpc.MethodDescriptor;
import io.grpc.Server;
import io.grpc.ServerCredentials;
import io.grpc.ServerInterceptor;
import io.grpc.ServerServiceDefinition;
import io.grpc.Status;
import io.grpc.netty.NettyChannelBuilder;
import io.grpc.netty.NettyServerBuilder;
import io.grpc.stub.ClientCalls;
import io.grpc.stub.ServerCalls;
import io.grpc.stub.StreamObserver;
import io.netty.buffer.PooledByteBufAllocator;
import io.netty.channel.ChannelOption;
import io.netty.channel.EventLoopGroup;
import io.netty.channel.socket.nio.NioServerSocketChannel;
import io.netty.channel.socket.nio.NioSocketChannel;
import io.pinless.testing.NettyTransports;
import java.net.InetSocketAddress;
import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
import java.util.zip.CRC32;

/**
 * Many clients uploading 1 MiB messages to a server whose service keeps each received zero-copy
 * message for a while before releasing it, so the server's received memory grows with the
 * clients' rate unless something bounds it. Each client connection runs its calls one after the
 * other; each call sends its messages and gets back the CRC32 of what the server received.
 */
final class Flood implements AutoCloseable {
  static final String SERVICE = "pinless.test.Flood";
  static final MethodDescriptor<Payload, byte[]> UPLOAD =
      MethodDescriptor.<Payload, byte[]>newBuilder()
          .setType(MethodDescriptor.MethodType.CLIENT_STREAMING)
          .setFullMethodName(MethodDescriptor.generateFullMethodName(SERVICE, "Upload"))
          .setRequestMarshaller(PayloadMarshaller.INSTANCE)
          .setResponseMarshaller(TestService.BYTES)
          .build();

  /** How one call ended: the CRC32 the server returned, or the status it failed with. */
  record Outcome(long expectedCrc, long crc, Status status) {
    boolean completedWithTheRightBytes() {
      return status.isOk() && crc == expectedCrc;
    }
  }

  private final EventLoopGroup group = NettyTransports.nio(2);
  /** The server's own pool, so that what it pins is the server's alone. */
  final PooledByteBufAllocator serverPool = new PooledByteBufAllocator(true);
  private final ScheduledExecutorService releases = Executors.newSingleThreadScheduledExecutor();
  private final Server server;
  private final List<ManagedChannel> channels = new ArrayList<>();

  /**
   * A server on loopback with {@code credentials}, its service keeping each message {@code
   * holdMillis} before releasing it, shedding through {@code shedding} unless it is null.
   */
  Flood(ServerCredentials credentials, ServerInterceptor shedding, long holdMillis)
      throws Exception {
    ServerServiceDefinition service = ServerServiceDefinition.builder(SERVICE)
        .addMethod(UPLOAD, ServerCalls.asyncClientStreamingCall(out -> new Keeper(out, holdMillis)))
        .build();
    NettyServerBuilder builder = NettyServerBuilder.forAddress(
            new InetSocketAddress("127.0.0.1", 0), credentials)
        .bossEventLoopGroup(group)
        .workerEventLoopGroup(group)
        .channelType(NioServerSocketChannel.class)
        .withChildOption(ChannelOption.ALLOCATOR, serverPool)
        .permitKeepAliveTime(1, TimeUnit.SECONDS)
        .permitKeepAliveWithoutCalls(true)
        .addService(service);
    if (shedding != null) {
      builder.intercept(shedding);
    }
    server = builder.build().start();
  }

  /** A client connection of its own, with a 1 s keepalive (gRPC may lengthen it). */
  ManagedChannel connect() {
    ManagedChannel channel = NettyChannelBuilder.forAddress("127.0.0.1",
            ((InetSocketAddress) server.getListenSockets().get(0)).getPort())
        .usePlaintext()
        .eventLoopGroup(group)
        .channelType(NioSocketChannel.class)
        .keepAliveTime(1, TimeUnit.SECONDS)
        .keepAliveWithoutCalls(true)
        .build();
    channels.add(channel);
    return channel;
  }

  /**
   * Runs {@code calls} uploads of {@code messages} messages of {@code size} bytes, one after the
   * other on {@code channel}; the future completes with every call's outcome.
   */
  CompletableFuture<List<Outcome>> uploads(
      ManagedChannel channel, int calls, int messages, int size, int seed) {
    CompletableFuture<List<Outcome>> done = new CompletableFuture<>();
    List<Outcome> outcomes = new ArrayList<>();
    upload(channel, calls, messages, size, seed, outcomes, done);
    return done;
  }

  private void upload(ManagedChannel channel, int callsLeft, int messages, int size, int seed,
      List<Outcome> outcomes, CompletableFuture<List<Outcome>> done) {
    if (callsLeft == 0) {
      done.complete(outcomes);
      return;
    }
    CRC32 expected = new CRC32();
    List<byte[]> bodies = new ArrayList<>();
    for (int i = 0; i < messages; i++) {
      byte[] body = TestService.message(size, seed + i);
      expected.update(body);
      bodies.add(body);
    }
    long want = expected.getValue();
    StreamObserver<Payload> requests = ClientCalls.asyncClientStreamingCall(
        channel.newCall(UPLOAD, CallOptions.DEFAULT), new StreamObserver<byte[]>() {
          private long crc = -1;

          @Override
          public void onNext(byte[] value) {
            crc = ByteBuffer.wrap(value).getLong();
          }

          @Override
          public void onError(Throwable t) {
            outcomes.add(new Outcome(want, -1, Status.fromThrowable(t)));
            upload(channel, callsLeft - 1, messages, size, seed + messages, outcomes, done);
          }

          @Override
          public void onCompleted() {
            outcomes.add(new Outcome(want, crc, Status.OK));
            upload(channel, callsLeft - 1, messages, size, seed + messages, outcomes, done);
          }
        });
    for (byte[] body : bodies) {
      requests.onNext(Payload.wrap(body));
    }
    requests.onCompleted();
  }

  @Override
  public void close() throws Exception {
    for (ManagedChannel c : channels) {
      c.shutdownNow();
    }
    server.shutdownNow();
    for (ManagedChannel c : channels) {
      c.awaitTermination(10, TimeUnit.SECONDS);
    }
    server.awaitTermination(10, TimeUnit.SECONDS);
    releases.shutdown();
    releases.awaitTermination(10, TimeUnit.SECONDS);
    group.shutdownGracefully(0, 5, TimeUnit.SECONDS).sync();
  }

  /** Sums a call's messages into a CRC32 and releases each one {@code holdMillis} later. */
  private final class Keeper implements StreamObserver<Payload> {
    private final StreamObserver<byte[]> out;
    private final long holdMillis;
    private final CRC32 crc = new CRC32();

    Keeper(StreamObserver<byte[]> out, long holdMillis) {
      this.out = out;
      this.holdMillis = holdMillis;
    }

    @Override
    public void onNext(Payload message) {
      for (ByteBuffer b : message.buffers()) {
        crc.update(b);
      }
      releases.schedule(message::close, holdMillis, TimeUnit.MILLISECONDS);
    }

    @Override
    public void onError(Throwable t) {}

    @Override
    public void onCompleted() {
      out.onNext(ByteBuffer.allocate(Long.BYTES).putLong(crc.getValue()).array());
      out.onCompleted();
    }
  }
}
